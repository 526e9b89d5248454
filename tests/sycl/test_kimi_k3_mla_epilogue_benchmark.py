"""The kernels stack's op benchmark (benchmark/benchmark_kimi_k3_mla_epilogue.py), taken from its patch file and run
on CPU torch, so it cannot rot while no XPU runs it.

Every case of its shape table (tokens capped at 37, to stay cheap on a CPU) goes through the script's own
input builder and its three-step path (RoPE op, cat, concat_and_cache_mla), with CPU stand-ins for the two
kernels ops that follow their schemas and semantics; the outputs must equal the fused ops' PyTorch reference
bit for bit, and its byte count the bytes the op's tensors actually hold.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from tests.sycl import kimi_k3_reference as ref
from tests.sycl.kimi_k3_harness import patch_file

SCRIPT = "benchmark/benchmark_kimi_k3_mla_epilogue.py"
MAX_TOKENS = 37


@pytest.fixture(scope="module")
def bench() -> Iterator[types.ModuleType]:
    """The script as a module, exactly as the patch stack creates it (its main() is not run)."""
    module = types.ModuleType("benchmark_kimi_k3_mla_epilogue")
    sys.modules[module.__name__] = module
    try:
        exec(compile(patch_file(SCRIPT), SCRIPT, "exec"), module.__dict__)  # noqa: S102 - the script under test
        yield module
    finally:
        del sys.modules[module.__name__]


def rotary_embedding(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None, head_size: int,
                     cos_sin_cache: torch.Tensor, is_neox: bool) -> None:
    """_C.rotary_embedding on the CPU: GPT-J (is_neox=False) over the first rot_dim of every head, in place; the
    cos / sin cache in the activations' dtype, as the XPU op reads it. The rotation is the reference's."""
    assert not is_neox and head_size == query.shape[-1] == cos_sin_cache.shape[1] == ref.ROPE
    assert cos_sin_cache.dtype == query.dtype
    rows = cos_sin_cache.float()[positions]
    query.copy_(ref.rope_gptj(query, rows[:, None, :]))
    if key is not None:
        key.copy_(ref.rope_gptj(key, rows))


def concat_and_cache_mla(kv_c: torch.Tensor, k_pe: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor,
                         kv_cache_dtype: str, scale: torch.Tensor) -> None:
    """_C_cache_ops.concat_and_cache_mla on the CPU for an unquantised cache."""
    assert kv_cache_dtype == "auto" and scale.dtype == torch.float32
    ref.concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping)


def test_the_shape_table_covers_both_models_phases_and_block_sizes(bench: types.ModuleType) -> None:
    shapes = bench.shapes()
    assert {s.model for s in shapes} == {"Kimi-Linear-48B-A3B", "Kimi-K3"}
    assert {s.phase for s in shapes} == {"prefill", "decode"}
    assert {s.block_size for s in shapes} == {16, 64}
    assert (bench.NOPE, bench.ROPE, bench.LORA) == (ref.NOPE, ref.ROPE, ref.LORA)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_the_three_step_path_equals_the_reference_on_every_shape(bench: types.ModuleType, dtype: torch.dtype) -> None:
    for shape in bench.shapes():
        shape = dataclasses.replace(shape, num_tokens=min(shape.num_tokens, MAX_TOKENS))
        x = bench.make_inputs(shape, dtype, "cpu")
        before = {name: t.clone() for name, t in x.items()}
        # The RoPE op reads the cache in the activations' dtype: the reference gets those values, widened.
        cos_sin = before["cos_sin_cache"].to(dtype).float()
        out = bench.three_step(x, shape, rotary_embedding, concat_and_cache_mla)
        if shape.phase == "prefill":
            q, k_out, cache = ref.prefill(before["q"], before["k_nope"], before["k_pe"], before["kv_c"],
                                          before["kv_cache"], before["slot_mapping"], before["positions"], cos_sin)
            assert torch.equal(x["q"].view(torch.int16), q.view(torch.int16)), shape
            assert torch.equal(out.view(torch.int16), k_out.view(torch.int16)), shape
        else:
            mqa_q, cache = ref.decode(before["ql_nope"], before["q_pe"], before["kv_c"], before["k_pe"],
                                      before["kv_cache"], before["slot_mapping"], before["positions"], cos_sin)
            assert torch.equal(out.view(torch.int16), mqa_q.view(torch.int16)), shape
        assert torch.equal(x["kv_cache"].view(torch.int16), cache.view(torch.int16)), shape
        assert bench.bytes_moved(shape, dtype) == tensor_bytes(x, out, shape), shape


def tensor_bytes(x: dict[str, torch.Tensor], out: torch.Tensor, shape: Any) -> int:
    """What the fused op reads and writes, counted from the tensors: every input element once, every output
    element once, q's RoPE part twice (prefill rotates it in place), one cache entry and cos / sin row a token."""
    def size(t: torch.Tensor) -> int:
        return t.numel() * t.element_size()

    tokens = x["positions"].numel()
    entry = x["kv_cache"].shape[-1] * x["kv_cache"].element_size()
    reads = [x["kv_c"], x["k_pe"], x["positions"], x["slot_mapping"]]
    if shape.phase == "prefill":
        reads += [x["k_nope"], x["q"][..., ref.NOPE:], x["q"][..., ref.NOPE:]]
    else:
        reads += [x["ql_nope"], x["q_pe"]]
    return sum(map(size, reads)) + size(out) + tokens * (entry + x["cos_sin_cache"][0].numel() * 4)
