"""ci/nightly.yml runs every release line of kpatch.toml as its own chain of ci/nightly-line.yml: its `lines` job's
script run for real on the example project with a release line, and the line workflow's per-line folders, cache
keys and failure-issue names checked against what kpatch itself uses for that line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kpatch.config.load import load
from kpatch.examples.lines import LINE, LineProject, make_line_project
from kpatch.nightly.publish import ISSUE_TITLE, names_of
from kpatch.project.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
NIGHTLY = ROOT / "ci" / "nightly.yml"
LINE_WORKFLOW = ROOT / "ci" / "nightly-line.yml"
# the one expression form the line workflow computes a line's names with
CHOICE = re.compile(r"^\$\{\{ inputs\.line == 'main' && '([^']*)' \|\| format\('([^']*)', inputs\.line\) \}\}$")


def _load(path: Path) -> dict[Any, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def _evaluate(expression: str, line: str) -> str:
    """A `${{ inputs.line == 'main' && 'A' || format('B{0}C', inputs.line) }}` of the workflow, for `line`."""
    found = CHOICE.match(expression)
    assert found, f"not the one form the line workflow uses: {expression}"
    return found[1] if line == "main" else found[2].replace("{0}", line)


@pytest.fixture
def lp(tmp_path: Path) -> LineProject:
    return make_line_project(tmp_path)


def _lines_step() -> str:
    (step,) = [s for s in _load(NIGHTLY)["jobs"]["lines"]["steps"] if s.get("id") == "lines"]
    return str(step["run"])


def _run_lines(root: Path, tmp_path: Path, only: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """The `lines` job's script, run by bash in the project with this kpatch and python on PATH, as the job would."""
    output = tmp_path / "github-output"
    output.write_text("")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path), "ONLY": only,
           "RUNNER_TEMP": str(tmp_path), "GITHUB_OUTPUT": str(output)}
    ran = subprocess.run(["bash", "-e", "-c", _lines_step()], cwd=root, env=env, capture_output=True, text=True,
                         check=False, timeout=120)
    return ran, output.read_text()


def test_the_lines_job_lists_every_line_of_kpatch_toml_or_the_one_asked_for(lp: LineProject,
                                                                           tmp_path: Path) -> None:
    ran, output = _run_lines(lp.root, tmp_path, "")
    assert ran.returncode == 0, ran.stderr
    assert output == f'lines={json.dumps(["main", LINE])}\n'
    ran, output = _run_lines(lp.root, tmp_path, LINE)
    assert ran.returncode == 0 and output == f'lines={json.dumps([LINE])}\n', ran.stderr
    ran, output = _run_lines(lp.root, tmp_path, "0.8")
    assert ran.returncode != 0 and output == ""
    assert f"error: no release line '0.8' in kpatch.toml (lines: main, {LINE})" in ran.stderr


def test_the_nightly_calls_the_line_workflow_once_per_listed_line_with_only_the_token_it_needs() -> None:
    jobs = _load(NIGHTLY)["jobs"]
    night = jobs["night"]
    assert night["needs"] == "lines" and night["uses"] == "./.github/workflows/nightly-line.yml"
    assert night["strategy"] == {"fail-fast": False, "matrix": {"line": "${{ fromJSON(needs.lines.outputs.lines) }}"}}
    assert night["with"]["line"] == "${{ matrix.line }}"
    assert night["secrets"] == {"KPATCH_NIGHTLY_TOKEN": "${{ secrets.KPATCH_NIGHTLY_TOKEN }}"}  # not `inherit`
    assert jobs["lines"]["permissions"] == {"contents": "read"}
    called = _load(LINE_WORKFLOW)
    assert set(called[True]) == {"workflow_call"}  # YAML 1.1 reads the key `on` as True
    assert called[True]["workflow_call"]["inputs"]["line"]["required"] is True
    assert night["concurrency"] == {"group": "kpatch-nightly-line-${{ matrix.line }}", "cancel-in-progress": False}
    assert night["concurrency"]["group"] != _load(NIGHTLY)["concurrency"]["group"]  # no deadlock with the run's


@pytest.mark.parametrize("line", ["main", LINE])
def test_the_line_workflows_folders_are_the_ones_kpatch_uses_for_the_line(lp: LineProject, tmp_path: Path,
                                                                          line: str) -> None:
    env = _load(LINE_WORKFLOW)["env"]
    ws = Workspace.create(load(lp.root / "kpatch.toml").on_line(line), tmp_path / "cache", None)
    assert _evaluate(env["REPORTS"], line) == str(ws.nightly_dir.relative_to(lp.root))
    assert _evaluate(env["DIST"], line) == str(ws.dist_dir.relative_to(lp.root))
    assert _evaluate(env["KEPT_LOCK"], line) == str(ws.kept_lock.relative_to(lp.root))
    unreported = _load(LINE_WORKFLOW)["jobs"]["unreported"]["steps"][0]["env"]
    names = names_of(line)
    assert _evaluate(unreported["LABEL"], line) == names.label
    assert _evaluate(unreported["TITLE"], line) == ISSUE_TITLE + names.suffix


def test_each_lines_cache_keys_artifacts_and_commands_are_its_own() -> None:
    """Main keeps the keys it had before lines (its carry history is restored); no line's key prefix matches
    another line's keys; every artifact is named with the line and every `kpatch nightly` runs with --line."""
    workflow = _load(LINE_WORKFLOW)
    key = workflow["env"]["CACHE_KEY"]
    prefixes = {line: _evaluate(key, line) for line in ("main", "0", "0-1", "0.33", "0.33-rc")}
    assert prefixes["main"] + "history-" == "kpatch-history-"
    for one, mine in prefixes.items():
        for other, theirs in prefixes.items():
            if one != other:  # a restore prefix of one line never matches another line's history key
                assert not (theirs + "history-1-1").startswith(mine + "history-"), (one, other)
    steps = [step for job in workflow["jobs"].values() for step in job.get("steps", [])]
    artifacts = [step["with"].get("name") or step["with"]["pattern"] for step in steps
                 if step.get("uses", "").split("@")[0] in ("actions/upload-artifact", "actions/download-artifact")]
    assert artifacts and all("${{ inputs.line }}" in name for name in artifacts), artifacts
    runs = [line for step in steps for line in step.get("run", "").splitlines()
            if line.strip().startswith("kpatch nightly ")]
    assert runs and all('--line "${LINE}"' in run for run in runs), runs
    text = LINE_WORKFLOW.read_text()
    assert text.count("reports/nightly") == 1 and text.count("'dist'") == 1  # only in the line's env
