"""`kpatch verify --explain` and the verify baseline (`--update-baseline REASON`) on the applied example pair."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from kpatch.config import load
from kpatch.errors import ConfigError, ExitCode
from kpatch.examples.upstreams import make_example_project
from tests.support.cli import run_kpatch
from tests.support.fake_github import fake_github
from tests.support.gitrepos import Project, git
from tests.support.nightly_world import make_world


def applied(tmp_path: Path) -> tuple[Path, list[str]]:
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    return root, cache


def contract_check(result_stdout: str) -> dict[str, Any]:
    checks: list[dict[str, Any]] = json.loads(result_stdout)["result"]["checks"]
    (check,) = [c for c in checks if c["subject"] == "kernels -> app"]
    return check


def test_explain_says_why_a_call_behind_a_tensor_device_guard_one_call_up_is_never_reached(tmp_path: Path) -> None:
    root, cache = applied(tmp_path)
    (root / "work" / "app" / "app" / "penalties.py").write_text(
        "import torch\n\n\ndef penalties_cuda(x):\n    torch.ops._C.penalties_(x)\n\n\n"
        "def penalties(x):\n    if x.is_cuda:\n        penalties_cuda(x)\n")
    result = run_kpatch(root, "verify", *cache, "--json")
    assert result.exit_code == 0, result.output
    (dismissed,) = json.loads(result.stdout)["result"]["contracts"][0]["report"]["not_reached"]
    assert (dismissed["op"], dismissed["site"]["line"], dismissed["site"]["function"]) == (
        "penalties_", 5, "penalties_cuda")
    human = run_kpatch(root, "verify", *cache, "--explain")
    assert human.exit_code == 0
    assert ("not reached on XPU: _C.penalties_ at app/penalties.py:5 (penalties_cuda): penalties_cuda is used only "
            "where XPU does not run: app/penalties.py:10 (app/penalties.py:9: only if `x.is_cuda`, false on XPU)"
            in " ".join(human.stdout.split()))


def test_the_baseline_accepts_todays_findings_and_verify_then_fails_only_on_new_ones(tmp_path: Path) -> None:
    root, cache = applied(tmp_path)
    app = root / "work" / "app" / "app"
    (app / "gather.py").write_text("import torch\n\n\ndef gather(x):\n    return torch.ops._C.gather_cache(x)\n")
    before = run_kpatch(root, "verify", *cache, "--json")
    assert before.exit_code == ExitCode.CONFLICT
    assert "_C.gather_cache (not defined by the kernels) called from app/gather.py:5" in \
        contract_check(before.stdout)["detail"]
    recorded = run_kpatch(root, "verify", *cache, "--update-baseline", "known gap: gather runs on CUDA only")
    assert recorded.exit_code == 0, recorded.output
    written = tomllib.loads((root / "verify-baseline.toml").read_text())
    assert written["accepted"] == [{"pair": "kernels -> app", "op": "_C.gather_cache", "kind": "undefined",
                                    "function": "app/gather.py::gather",
                                    "reason": "known gap: gather runs on CUDA only"}]
    # No line numbers in the fingerprint: moving the call keeps it accepted, and it is counted.
    (app / "gather.py").write_text("import torch\n\n# moved\n\n\ndef gather(x):\n"
                                   "    return torch.ops._C.gather_cache(x)\n")
    again = run_kpatch(root, "verify", *cache, "--json")
    assert again.exit_code == 0, again.output
    assert "1 accepted finding(s) in verify-baseline.toml" in contract_check(again.stdout)["detail"]
    # A new finding fails verify, naming the new one only.
    (app / "scatter.py").write_text("import torch\n\n\ndef scatter(x):\n    return torch.ops._C.scatter_cache(x)\n")
    new = run_kpatch(root, "verify", *cache, "--json")
    assert new.exit_code == ExitCode.CONFLICT
    detail = contract_check(new.stdout)["detail"]
    assert detail.startswith("_C.scatter_cache (not defined by the kernels) called from app/scatter.py:5")
    assert "gather_cache" not in detail.split(";")[0] and "(+" not in detail
    # Dropping the call leaves a stale entry: a warning that says how to drop it.
    (app / "gather.py").unlink()
    (app / "scatter.py").unlink()
    stale = run_kpatch(root, "verify", *cache, "--json")
    assert stale.exit_code == 0
    (warned,) = [c for c in json.loads(stale.stdout)["result"]["checks"] if c["status"] == "warning"]
    assert warned["detail"] == "1 accepted finding(s) no longer reported, e.g. _C.gather_cache in app/gather.py::gather"


GATHER = "import torch\n\n\ndef gather(x):\n    return torch.ops._C.gather_cache(x)\n"
SCATTER = "import torch\n\n\ndef scatter(x):\n    return torch.ops._C.scatter_cache(x)\n"
ACCEPT_GATHER = ('version = 1\n\n[[accepted]]\npair = "kernels -> app"\nop = "_C.gather_cache"\nkind = "undefined"\n'
                 'function = "app/gather.py::gather"\nreason = "gather runs on CUDA only"\n')


def test_a_night_counts_and_lists_accepted_findings_and_build_wheels_fails_only_on_a_new_one(
        project: Project, tmp_path: Path) -> None:
    """The nightly against upstream heads: a finding the baseline accepts is counted and listed in report.md and
    report.json, and the night passes. Then a new finding: build-wheels' contract gate (which runs before any
    build, as verify does at the night's verify stage) fails naming only the new one."""
    with fake_github() as fake:
        world = make_world(project, tmp_path / "cache", fake)
        world.move("app", {"app/gather.py": GATHER}, "Gather the cache")
        (world.root / "verify-baseline.toml").write_text(ACCEPT_GATHER)
        git(world.root, "add", "verify-baseline.toml")
        git(world.root, "commit", "--quiet", "-m", "Accept the gather gap")
        passed, report = world.night("--backend", "local", "--dry-run")
        assert passed.exit_code == 0, passed.output
        assert report["contract"][0].startswith("kernels -> app (libraries _C, _C_cache_ops): 0 new finding(s), "
                                                "1 accepted (the verify baseline); ")
        assert report["accepted"] == [{"pair": "kernels -> app", "op": "_C.gather_cache", "kind": "undefined",
                                       "function": "app/gather.py::gather", "site": "app/gather.py:5",
                                       "reason": "gather runs on CUDA only"}]
        markdown = (world.root / "reports" / "nightly" / "report.md").read_text()
        assert "Accepted op-contract findings (1, the verify baseline; not failures):" in markdown
        assert "- `kernels -> app`: `_C.gather_cache` (undefined) in `app/gather.py::gather` at `app/gather.py:5`: " \
               "gather runs on CUDA only" in markdown

        (world.root / "work" / "app" / "app" / "scatter.py").write_text(SCATTER)
        gated = world.kpatch("build-wheels", "--backend", "local")
        assert gated.exit_code == ExitCode.CONFLICT, gated.output
        assert "op contract kernels -> app: _C.scatter_cache (not defined by the kernels) called from " \
               "app/scatter.py:5;" in " ".join(gated.output.split())
        assert "gather_cache" not in gated.output


def test_ops_the_stacks_add_or_call_are_never_accepted(tmp_path: Path) -> None:
    root, cache = applied(tmp_path)
    bindings = root / "work" / "kernels" / "csrc" / "torch_bindings.cpp"
    text = bindings.read_text()
    assert 'ops.impl("fused_kimi_mla_insert", torch::kXPU' in text
    bindings.write_text(text.replace('ops.impl("fused_kimi_mla_insert", torch::kXPU',
                                     'ops.impl("fused_kimi_mla_insert", torch::kCUDA'))
    recorded = run_kpatch(root, "verify", *cache, "--update-baseline", "try to accept everything", "--json")
    assert recorded.exit_code == ExitCode.CONFLICT
    checks = json.loads(recorded.stdout)["result"]["checks"]
    assert [c["detail"] for c in checks if c["subject"].endswith("verify-baseline.toml")] == [
        "recorded 0 accepted finding(s); left out 1 of ops the stacks add or call (never accepted)"]
    assert contract_check(recorded.stdout)["detail"].startswith("_C.fused_kimi_mla_insert (defined, but no kernel")
    # Even written by hand, such an entry accepts nothing.
    (root / "verify-baseline.toml").write_text(
        'version = 1\n\n[[accepted]]\npair = "kernels -> app"\nop = "_C.fused_kimi_mla_insert"\n'
        'kind = "no-xpu-kernel"\nfunction = "app/models/k3/xpu/ops.py::kimi_mla_insert"\nreason = "by hand"\n')
    assert run_kpatch(root, "verify", *cache).exit_code == ExitCode.CONFLICT


@pytest.mark.parametrize(("content", "error"), [
    ("version = 1\n[[accepted]]\nop = \"_C.x\"\n", "accepted entry 1 must have exactly pair, op, kind, function, "
                                                    "reason (non-empty strings)"),
    ("version = 2\n", "not a verify baseline of version 1"),
    ("version = [\n", "not a readable verify baseline"),
])
def test_a_malformed_baseline_is_bad_input_naming_the_file_and_changes_nothing(tmp_path: Path, content: str,
                                                                               error: str) -> None:
    root, cache = applied(tmp_path)
    (root / "verify-baseline.toml").write_text(content)
    result = run_kpatch(root, "verify", *cache, "--update-baseline", "r")
    assert result.exit_code == ExitCode.BAD_INPUT
    assert str(root / "verify-baseline.toml") in result.output and error in result.output
    assert (root / "verify-baseline.toml").read_text() == content


def test_update_baseline_needs_a_reason(tmp_path: Path) -> None:
    root, cache = applied(tmp_path)
    result = run_kpatch(root, "verify", *cache, "--update-baseline", " ")
    assert result.exit_code == ExitCode.BAD_INPUT and "--update-baseline needs a reason" in result.output
    assert not (root / "verify-baseline.toml").exists()


@pytest.mark.parametrize("value", ['"../outside.toml"', '"/abs.toml"', '"baseline.txt"', "3"])
def test_the_baseline_setting_must_name_a_toml_file_inside_the_project(tmp_path: Path, value: str) -> None:
    toml = tmp_path / "kpatch.toml"
    toml.write_text('version = 1\n\n[[upstream]]\nname = "k"\nurl = "https://example.invalid/k.git"\n'
                    'branch = "main"\nbase = "v1"\npatches = "patches/k"\n\n[verify]\nbaseline = ' + value + "\n")
    with pytest.raises(ConfigError, match=r"kpatch.toml:11: 'baseline' must be a relative path to a .toml file"):
        load(toml)
    toml.write_text(toml.read_text().replace("baseline = " + value, 'baseline = "ci/accepted.toml"'))
    assert load(toml).baseline == "ci/accepted.toml"
