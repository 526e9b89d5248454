"""`kpatch verify`'s contract on the real upstreams, when clones of them are on this machine (never in CI).

Set KPATCH_REAL_KERNELS and KPATCH_REAL_VLLM to local clones (vllm-xpu-kernels at the pinned commit, vLLM with
the v0.33.0 tag). The test applies the real stacks onto them and reads the contract from the worktrees.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kpatch.config import load
from kpatch.verify.contract import ContractReport, check, findings
from tests.support.cli import run_kpatch

ROOT = Path(__file__).resolve().parents[2]
KERNELS, VLLM = os.environ.get("KPATCH_REAL_KERNELS"), os.environ.get("KPATCH_REAL_VLLM")
PORTED = {  # the whole Kimi-K3 MLA family the stacks carry
    "fused_kimi_k3_mla_key_concat_kv_cache_insert", "fused_kimi_k3_mla_decode_q_concat_kv_cache_insert",
    "fused_kimi_k3_mla_qkv_quant_kv_cache_fp8_insert", "fused_kimi_k3_mla_decode_q_concat_kv_cache_fp8_insert",
    "fused_kimi_k3_mla_key_concat_ds_mla_insert", "fused_kimi_k3_mla_decode_q_concat_ds_mla_insert",
    "fused_kimi_k3_mla_kv_concat", "fused_kimi_k3_mla_kv_concat_quant_fp8",
}

LABELS = ROOT / "tests" / "data" / "xpu_reach_labels.json"

pytestmark = pytest.mark.skipif(not (KERNELS and VLLM), reason="set KPATCH_REAL_KERNELS and KPATCH_REAL_VLLM")


@pytest.fixture(scope="module")
def real_report(tmp_path_factory: pytest.TempPathFactory) -> ContractReport:
    """The contract of the real stacks, applied once for the module."""
    tmp_path = tmp_path_factory.mktemp("real")
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "kpatch.toml", project / "kpatch.toml")
    shutil.copytree(ROOT / "patches", project / "patches")
    urls = ["--url", f"vllm-xpu-kernels={KERNELS}", "--url", f"vllm={VLLM}", "--cache-dir", str(tmp_path / "c")]
    assert run_kpatch(project, "apply", *urls).exit_code == 0
    return check(project / "work" / "vllm-xpu-kernels", project / "work" / "vllm",
                 load(project / "kpatch.toml").cuda_only)


def test_real_stacks_serve_the_kimi_k3_mla_family_with_vllms_schemas(real_report: ContractReport) -> None:
    report = real_report
    missing = {(m.module, op.op) for m in report.missing for op in m.ops}
    assert not {op for _, op in missing} & PORTED
    assert not [m for m in report.mismatches if m.op in PORTED]
    assert not [u for u in report.unbound if u.op in PORTED]


def test_real_findings_keep_every_call_reached_on_xpu_and_say_the_precision_on_the_labelled_set(
        real_report: ContractReport) -> None:
    """Precision of the XPU reachability model against findings labelled by hand (tests/data/xpu_reach_labels.json:
    op, calling function, reached on XPU or not, and the line of vLLM v0.33.0 that shows it). Prints the figure
    docs/verify.md quotes (run with -s)."""
    labels = json.loads(LABELS.read_text(encoding="utf-8"))["findings"]
    reported = {(f.op, f.kind == "unbound", f.function) for f in findings(real_report)}

    def still_reported(label: dict[str, str]) -> bool:
        return (label["op"], label.get("kind") == "unbound", label["function"]) in reported

    reached = [x for x in labels if x["verdict"] == "reached"]
    others = [x for x in labels if x["verdict"] == "not-reached"]
    assert len(labels) >= 78 and len(reached) + len(others) == len(labels)
    lost = [f"{x['op']} in {x['function']} ({x['evidence']})" for x in reached if not still_reported(x)]
    false = [f"{x['op']} in {x['function']} ({x['evidence']})" for x in others if still_reported(x)]
    kept = len(reached) - len(lost)
    print(f"labelled findings: {len(reached)} reached on XPU, {len(others)} not; still reported: "
          f"{kept}/{len(reached)} reached, {len(false)}/{len(others)} not reached; precision "
          f"{kept}/{kept + len(false)} = {100 * kept / max(1, kept + len(false)):.0f}%")
    assert not lost, "calls reached on XPU no longer reported:\n" + "\n".join(lost)
    # the figure measured with what the XPU platform selects modelled (docs/verify.md): a model that reports more
    # is worse
    assert len(false) <= 4, f"{len(false)} of {len(others)} unreached calls still reported:\n" + "\n".join(false)
