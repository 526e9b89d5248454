"""The real stacks' op contract, checked from the patch files alone: CI has neither upstream.

What CI can check honestly without vLLM's or the kernels' source:
1. the kernels stack registers for XPU, in the main extension's library, every op the vLLM stack's XPU path
   requires by name (the names come from the vLLM patch itself);
2. those ops belong to the Kimi-K3 MLA family vLLM v0.33.0 calls (the eight names below: a fact about vLLM, not
   an excerpt of its code);
3. the registered schemas are well-formed, read the same in kpatch and in torch, and keep their optional RoPE
   arguments optional with defaults (a PR #592-style registration is caught by the same comparison);
4. the op sources are built into the same extension as the bindings, and declared.
Whether the schemas equal vLLM's own declarations needs vLLM's source: `kpatch verify` checks that on the applied
worktrees (tests/test_real_contract.py runs it when the real upstreams are on the machine).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from kpatch.stack import Patch, added_text, load_series
from kpatch.verify.contract import cpp, schema

ROOT = Path(__file__).resolve().parents[2]
KIMI_K3_MLA_OPS = frozenset({
    "fused_kimi_k3_mla_key_concat_kv_cache_insert", "fused_kimi_k3_mla_decode_q_concat_kv_cache_insert",
    "fused_kimi_k3_mla_qkv_quant_kv_cache_fp8_insert", "fused_kimi_k3_mla_decode_q_concat_kv_cache_fp8_insert",
    "fused_kimi_k3_mla_key_concat_ds_mla_insert", "fused_kimi_k3_mla_decode_q_concat_ds_mla_insert",
    "fused_kimi_k3_mla_kv_concat", "fused_kimi_k3_mla_kv_concat_quant_fp8",
})


def patches_touching(upstream: str, path: str) -> list[Patch]:
    series = load_series(upstream, ROOT / "patches" / upstream)
    return [p for p in series.patches if path in p.paths]


def hunks(patch: Path, path: str) -> list[tuple[str, str]]:
    """(the function context git printed in the hunk header, the new side of the hunk) for `path`."""
    out: list[tuple[str, str]] = []
    inside = False
    for line in patch.read_text(encoding="utf-8").split("\n"):
        if line.startswith("diff --git "):
            inside = line == f"diff --git a/{path} b/{path}"
        elif inside and line.startswith("@@ "):
            out.append((line.split("@@", 2)[2].strip(), ""))
        elif inside and out and line[:1] in (" ", "+"):
            out[-1] = (out[-1][0], out[-1][1] + line[1:] + "\n")
    return out


def kernels_registrations() -> cpp.Registrations:
    """The defs and impls the kernels stack adds to csrc/torch_bindings.cpp (over all its patches), inside the
    library block each hunk header names (the bindings are compiled into the `_C` extension: see the CMake
    test below)."""
    blocks = []
    for patch in patches_touching("vllm-xpu-kernels", "csrc/torch_bindings.cpp"):
        for context, body in hunks(patch.path, "csrc/torch_bindings.cpp"):
            assert context == "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {", patch.name
            blocks.append(f"{context}\n{body}}}\n")
    assert blocks
    return cpp.registrations("".join(blocks), "csrc/torch_bindings.cpp", ("_C",))


XPU_SUPPORT = "vllm/models/kimi_k3/nvidia/ops/xpu_support.py"


def vllm_stack_requires() -> set[str]:
    """The `_C` ops the vLLM stack's load-time XPU check requires, for any cache dtype (its XPU_OPS table)."""
    (patch,) = patches_touching("vllm", XPU_SUPPORT)
    table = added_text(patch.path, XPU_SUPPORT)
    return set(re.findall(r'"_C::(fused_kimi_k3_\w+)"', table))


def test_kernels_register_for_xpu_every_op_the_vllm_stack_requires() -> None:
    found = kernels_registrations()
    xpu = {i.op for i in found.implementations if i.namespace == "_C" and i.key == "XPU"}
    required = vllm_stack_requires()
    assert required and required <= xpu
    assert {d.namespace for d in found.definitions} == {"_C"}


def test_the_kernels_register_the_whole_kimi_k3_mla_family_and_vllm_requires_only_it() -> None:
    defined = {cpp.op_name(d.schema) for d in kernels_registrations().definitions}
    assert defined == KIMI_K3_MLA_OPS  # all eight ops, each defined once
    assert len(kernels_registrations().definitions) == len(KIMI_K3_MLA_OPS)
    assert vllm_stack_requires() <= KIMI_K3_MLA_OPS


def test_registered_schemas_read_the_same_in_kpatch_and_torch() -> None:
    definitions = kernels_registrations().definitions
    assert len(definitions) == len(KIMI_K3_MLA_OPS)
    for definition in definitions:
        mine, theirs = schema.parse(definition.schema), torch._C.parse_schema(definition.schema)
        assert [(a.name, a.default is not None) for a in mine.args] == \
            [(a.name, a.has_default_value()) for a in theirs.arguments]
        assert schema.parse(str(theirs)) == mine  # torch's own printing parses back to the same structure


def test_optional_rope_arguments_keep_their_defaults() -> None:
    """PR #592 registered these schemas without `=None`: the comparison must report it as a breaking change."""
    roped = 0
    for definition in kernels_registrations().definitions:
        registered = schema.parse(definition.schema)
        optional = [a for a in registered.args if a.optional]
        if not optional:  # the chunked-context concats take no RoPE arguments
            continue
        roped += 1
        assert [a.name for a in optional] == ["position_ids", "cos_sin_cache"]
        assert all(a.default == "None" for a in optional)
        stripped = schema.parse(definition.schema.replace("=None", ""))
        assert schema.breaking(schema.compare(registered, stripped))
    assert roped == 6


def test_sources_are_built_into_the_bindings_extension_and_declared() -> None:
    (patch,) = (p.path for p in patches_touching("vllm-xpu-kernels", "CMakeLists.txt"))
    (context, body), = hunks(patch, "CMakeLists.txt")
    assert context == "if(BASIC_KERNELS_ENABLED)"  # the `_C` extension's block
    sources = re.findall(r'"(csrc/[^"]+)"', body)
    assert "csrc/kimi_k3_mla_epilogue.cpp" in sources and "csrc/torch_bindings.cpp" in sources
    declared = "".join(added_text(p.path, "csrc/ops.h") for p in patches_touching("vllm-xpu-kernels", "csrc/ops.h"))
    for definition in kernels_registrations().definitions:
        assert f"void {cpp.op_name(definition.schema)}(" in declared
