"""`kpatch verify`'s contract on the real upstreams, when clones of them are on this machine (never in CI).

Set KPATCH_REAL_KERNELS and KPATCH_REAL_VLLM to local clones (vllm-xpu-kernels at the pinned commit, vLLM with
the v0.33.0 tag). The test applies the real stacks onto them and reads the contract from the worktrees.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from gitrepos import run_kpatch

from kpatch.config import load
from kpatch.contract import check

ROOT = Path(__file__).resolve().parents[1]
KERNELS, VLLM = os.environ.get("KPATCH_REAL_KERNELS"), os.environ.get("KPATCH_REAL_VLLM")
PORTED = {  # the whole Kimi-K3 MLA family the stacks carry
    "fused_kimi_k3_mla_key_concat_kv_cache_insert", "fused_kimi_k3_mla_decode_q_concat_kv_cache_insert",
    "fused_kimi_k3_mla_qkv_quant_kv_cache_fp8_insert", "fused_kimi_k3_mla_decode_q_concat_kv_cache_fp8_insert",
    "fused_kimi_k3_mla_key_concat_ds_mla_insert", "fused_kimi_k3_mla_decode_q_concat_ds_mla_insert",
    "fused_kimi_k3_mla_kv_concat", "fused_kimi_k3_mla_kv_concat_quant_fp8",
}

pytestmark = pytest.mark.skipif(not (KERNELS and VLLM), reason="set KPATCH_REAL_KERNELS and KPATCH_REAL_VLLM")


def test_real_stacks_serve_the_kimi_k3_mla_family_with_vllms_schemas(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "kpatch.toml", project / "kpatch.toml")
    shutil.copytree(ROOT / "patches", project / "patches")
    urls = ["--url", f"vllm-xpu-kernels={KERNELS}", "--url", f"vllm={VLLM}", "--cache-dir", str(tmp_path / "c")]
    assert run_kpatch(project, "apply", *urls).exit_code == 0
    report = check(project / "work" / "vllm-xpu-kernels", project / "work" / "vllm",
                   load(project / "kpatch.toml").cuda_only)
    missing = {(m.module, op.op) for m in report.missing for op in m.ops}
    assert not {op for _, op in missing} & PORTED
    assert not [m for m in report.mismatches if m.op in PORTED]
    assert not [u for u in report.unbound if u.op in PORTED]
