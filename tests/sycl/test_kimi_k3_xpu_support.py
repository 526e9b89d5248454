"""The vLLM stack's load-time check for Kimi-K3 MLA on XPU, run from the patch with CPU torch's real dispatcher.

vllm/models/kimi_k3/nvidia/ops/xpu_support.py is read out of patches/vllm (a new file there, so the patch is its
only copy) and imported in a fresh interpreter per scenario. Each scenario registers stand-in kernels with
torch.library under vLLM's schemas, for the XPU dispatch key or another one, and records what the check says for
each KV-cache dtype.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kpatch.stack import added_file, added_text, load_series
from kpatch.verify.contract import cpp

ROOT = Path(__file__).resolve().parents[2]
MODULE = "vllm/models/kimi_k3/nvidia/ops/xpu_support.py"
CACHE_OPS = [  # vLLM v0.33.0's schemas for the chunked-context gathers (csrc/torch_bindings.cpp)
    "gather_and_maybe_dequant_cache(Tensor src_cache, Tensor! dst, Tensor block_table, Tensor cu_seq_lens, "
    "Tensor token_to_seq, int num_tokens, str kv_cache_dtype, Tensor scale, Tensor? seq_starts) -> ()",
    "cp_gather_and_upconvert_fp8_kv_cache(Tensor src_cache, Tensor! dst, Tensor block_table, "
    "Tensor workspace_starts, int batch_size, Tensor? seq_starts, Tensor? host_cache=None, "
    "Tensor? host_row_ids=None, Tensor? device_row_ids=None) -> ()",
]
FIRST_PAIR = ("fused_kimi_k3_mla_key_concat_kv_cache_insert", "fused_kimi_k3_mla_decode_q_concat_kv_cache_insert")
DTYPES = ["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_ds_mla", "fp8_e5m2"]
TRITON_MLA = ["auto", "float16", "bfloat16", "fp8", "fp8_e4m3"]  # what vLLM's XPU fallback backend reads

SCENARIO = r"""
import importlib.util, json, sys
import torch

module_path, registrations, backend_reads, dtypes = sys.argv[1], *map(json.loads, sys.argv[2:5])
libs = {}
for namespace, schema, key in registrations:
    lib = libs.setdefault(namespace, torch.library.Library(namespace, "FRAGMENT"))
    lib.define(schema)
    lib.impl(schema.split("(", 1)[0], lambda *args: None, key)

class Backend:
    @staticmethod
    def get_name():
        return "TRITON_MLA"

    @classmethod
    def supports_kv_cache_dtype(cls, kv_cache_dtype):
        return kv_cache_dtype in backend_reads

spec = importlib.util.spec_from_file_location("xpu_support", module_path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
out = {}
for dtype in dtypes:
    try:
        module.check_xpu_kimi_k3_mla_support(dtype, Backend)
        out[dtype] = "ok"
    except ValueError as e:
        out[dtype] = str(e)
print(json.dumps(out))
"""


def vllm_schemas() -> list[str]:
    """The family's schemas as the kernels stack registers them (tests/test_op_contract.py checks they are
    well-formed and keep vLLM's defaults; `kpatch verify` compares them with vLLM's own declarations)."""
    series = load_series("vllm-xpu-kernels", ROOT / "patches" / "vllm-xpu-kernels")
    text = "".join(added_text(p.path, "csrc/torch_bindings.cpp") for p in series.patches
                   if "csrc/torch_bindings.cpp" in p.paths)
    found = cpp.registrations("TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n" + text + "}\n",
                              "csrc/torch_bindings.cpp", ("_C",))
    return [d.schema for d in found.definitions]


@pytest.fixture(scope="module")
def module_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    series = load_series("vllm", ROOT / "patches" / "vllm")
    patch = next(p for p in series.patches if MODULE in p.paths)
    path = tmp_path_factory.mktemp("vllm") / "xpu_support.py"
    path.write_text(added_file(patch.path, MODULE))
    return path


def run_check(module_file: Path, registrations: list[tuple[str, str, str]],
              backend_reads: list[str] = TRITON_MLA) -> dict[str, str]:
    """What the check says for every cache dtype, with these (namespace, schema, dispatch key) kernels."""
    proc = subprocess.run([sys.executable, "-c", SCENARIO, str(module_file), json.dumps(registrations),
                           json.dumps(backend_reads), json.dumps(DTYPES)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def kernels(key: str, ops: list[str] | None = None) -> list[tuple[str, str, str]]:
    """The family's _C ops (or just `ops`) and the XPU kernels' existing gather, registered for `key`."""
    family = [s for s in vllm_schemas() if ops is None or s.split("(")[0] in ops]
    return [("_C", s, key) for s in family] + [("_C_cache_ops", CACHE_OPS[0], key)]


def test_the_whole_family_on_xpu_runs_bf16_and_fp8_and_names_what_ds_mla_lacks(module_file: Path) -> None:
    said = run_check(module_file, kernels("XPU"))
    assert {d: said[d] for d in ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3")} == dict.fromkeys(
        ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3"), "ok")
    ds = said["fp8_ds_mla"]
    assert "kv_cache_dtype='fp8_ds_mla'" in ds
    assert "torch.ops._C_cache_ops.cp_gather_and_upconvert_fp8_kv_cache" in ds
    assert "TRITON_MLA does not read" in ds and "fused_kimi_k3" not in ds
    assert "does not support kv_cache_dtype='fp8_e5m2'" in said["fp8_e5m2"]


def test_the_first_pair_alone_names_every_missing_op_per_cache_dtype(module_file: Path) -> None:
    """The kernels before this stack's fp8 patch: bf16 chunked context and all of fp8 fail at load, by name."""
    said = run_check(module_file, kernels("XPU", list(FIRST_PAIR)))
    assert "kv_cache_dtype='auto'" in said["auto"]
    assert "torch.ops._C.fused_kimi_k3_mla_kv_concat" in said["auto"]
    assert "fused_kimi_k3_mla_key_concat_kv_cache_insert" not in said["auto"]
    for op in ("qkv_quant_kv_cache_fp8_insert", "decode_q_concat_kv_cache_fp8_insert", "kv_concat"):
        assert f"torch.ops._C.fused_kimi_k3_mla_{op}" in said["fp8_e4m3"], op


def test_kernels_for_another_dispatch_key_count_as_missing(module_file: Path) -> None:
    said = run_check(module_file, kernels("CUDA"))
    for op in ("_C.fused_kimi_k3_mla_key_concat_kv_cache_insert",
               "_C.fused_kimi_k3_mla_decode_q_concat_kv_cache_insert", "_C.fused_kimi_k3_mla_kv_concat",
               "_C_cache_ops.gather_and_maybe_dequant_cache"):
        assert f"torch.ops.{op}" in said["auto"], op


def test_a_backend_that_does_not_read_the_cache_dtype_is_named(module_file: Path) -> None:
    said = run_check(module_file, kernels("XPU"), backend_reads=["auto", "float16", "bfloat16"])
    assert said["auto"] == "ok"
    assert "attention backend TRITON_MLA does not read this cache dtype" in said["fp8"]
    assert "vllm-xpu-kernels has no XPU kernel" not in said["fp8"]


def readme_stack_table() -> str:
    """The README's table of the stacks it carries (its rows, up to the first line that is not one)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text[text.index("| stack | what it does |"):].split("\n\n", 1)[0]


def test_what_the_pair_cannot_do_is_said_at_load_in_one_line_and_listed_in_the_readme_stack_table(
        module_file: Path) -> None:
    """With the whole family on XPU, every cache dtype the load check refuses is refused in one line, and the
    README's stack table names it, with every op the refusal says is missing."""
    said = run_check(module_file, kernels("XPU"))
    refused = {dtype: message for dtype, message in said.items() if message != "ok"}
    assert refused, "the check refuses nothing: the README's list of what the pair cannot do is stale"
    table = readme_stack_table()
    cannot = next(row for row in table.splitlines() if row.startswith("| what the pair cannot do"))
    for dtype, message in refused.items():
        assert "\n" not in message, f"{dtype}: the refusal takes more than one line: {message!r}"
        assert f"`{dtype}`" in cannot, f"the README's stack table does not list {dtype}: {message}"
        for op in re.findall(r"torch\.ops\.\w+\.(\w+)", message):
            assert f"`{op}`" in cannot, f"the README's stack table does not name {op} for {dtype}"
    for dtype in re.findall(r"`(\w+)`: ", cannot):
        assert dtype in refused, f"the README's stack table lists {dtype}, which the pair runs"
