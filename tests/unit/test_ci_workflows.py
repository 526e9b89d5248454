"""The GitHub Actions workflows: what issue 12 asks of them, and that ci/lint-workflows really fails on findings."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
NIGHTLY = ROOT / "ci" / "nightly.yml"  # the scheduled nightly: one chain per release line
LINE = ROOT / "ci" / "nightly-line.yml"  # one line's chain (a reusable workflow the nightly calls)
WORKFLOWS = [NIGHTLY, LINE, *sorted((ROOT / ".github" / "workflows").glob("*.yml"))]
ROUNDS = 4  # the search's rounds in the nightly (scripts/nightly_rounds.py)
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w.-]+)*@[0-9a-f]{40}$")  # owner/repo[/sub-action]@sha


def _load(path: Path) -> dict[Any, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def _steps(workflow: dict[Any, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def _calls(path: Path) -> bool:
    return any("uses" in job for job in _load(path)["jobs"].values())


@pytest.mark.parametrize("path", [p for p in WORKFLOWS if not _calls(p) or _steps(_load(p))], ids=lambda p: p.name)
def test_every_action_is_pinned_by_commit_sha_with_its_release_named(path: Path) -> None:
    uses = [(step["uses"], line) for step in _steps(_load(path)) if "uses" in step
            for line in path.read_text().splitlines() if f"uses: {step['uses']}" in line]
    assert uses, "no action used"
    for action, line in uses:
        assert PINNED.match(action), action
        assert re.search(r"#\s*v\d+\.\d+\.\d+$", line), f"no release comment: {line.strip()}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_job_gets_permissions_it_did_not_ask_for(path: Path) -> None:
    workflow = _load(path)
    assert workflow["permissions"] == {}
    assert all("permissions" in job for job in workflow["jobs"].values())


def test_the_nightly_runs_on_schedule_and_by_hand_never_two_at_once() -> None:
    nightly = _load(NIGHTLY)
    triggers = nightly[True]  # YAML 1.1 reads the key `on` as True
    assert set(triggers) == {"schedule", "workflow_dispatch"} and triggers["schedule"][0]["cron"]
    assert nightly["concurrency"] == {"group": "kpatch-nightly", "cancel-in-progress": False}


def _run(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job.get("steps", []))


def _uses(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [step for step in job.get("steps", []) if step.get("uses", "").startswith(f"{action}@")]


def test_the_gpu_job_builds_tests_and_uploads_everything_with_no_secret_and_a_read_only_token() -> None:
    """It builds and tests unreviewed upstream heads on a persistent runner: no secret, no environment, no write
    permission, and it asks GitHub nothing (--no-publish)."""
    job = _load(LINE)["jobs"]["nightly"]
    assert job["runs-on"] == ["self-hosted", "linux", "x64", "intel-gpu"]
    assert job["permissions"] == {"contents": "read"} and "environment" not in job
    assert "secrets." not in yaml.safe_dump(job) and "github.token" not in yaml.safe_dump(job)
    assert 'kpatch nightly --line "${LINE}" --report "${REPORTS}" --no-publish' in _run(job)
    assert "--publish-saved" not in _run(job)
    cached = [step["with"]["path"] for step in _uses(job, "actions/cache")]
    assert cached == [".kpatch-cache/mirrors", ".kpatch-cache/wheels"]
    upload, plan, stacks = _uses(job, "actions/upload-artifact")
    assert upload["if"] == "always()"
    assert plan["with"]["name"] == "kpatch-scroll-plan-${{ github.run_id }}-${{ inputs.line }}-1"
    assert "searching" in plan["if"]
    assert upload["with"]["path"].splitlines() == ["${{ env.REPORTS }}/", ".kpatch-cache/logs/",
                                                   "${{ env.DIST }}/*.whl", "${{ env.DIST }}/pylock.toml"]
    assert stacks["with"]["path"].splitlines() == ["${{ env.REPORTS }}/report.json",
                                                   "${{ env.REPORTS }}/history.jsonl", "kpatch.toml", "pylock.toml",
                                                   "patches/"]
    checkouts = _uses(job, "actions/checkout")
    assert checkouts and all(step["with"].get("persist-credentials") is False for step in checkouts)


def test_the_gpu_job_carries_the_carry_history_from_night_to_night_red_nights_too() -> None:
    """Restored before the night (the newest entry: the previous night's), saved after it whatever its outcome,
    under a key of its own run (a cache entry never changes); the publish job gets it in the stacks artifact."""
    steps = _load(LINE)["jobs"]["nightly"]["steps"]
    names = [step.get("uses", "").split("@")[0] or step.get("run", "") for step in steps]
    restore, save = names.index("actions/cache/restore"), names.index("actions/cache/save")
    night = next(i for i, n in enumerate(names) if n.startswith("kpatch nightly "))
    assert restore < night < save
    for step in (steps[restore], steps[save]):
        assert step["with"]["path"] == "${{ env.REPORTS }}/history.jsonl"
        assert step["with"]["key"] == "${{ env.CACHE_KEY }}history-${{ github.run_id }}-${{ github.run_attempt }}"
    assert steps[restore]["with"]["restore-keys"].splitlines() == ["${{ env.CACHE_KEY }}history-"]
    assert steps[save]["if"].startswith("always()")
    publish = _run(_load(LINE)["jobs"]["publish"])
    assert 'cp "${NIGHT}/${REPORTS}/history.jsonl" "${REPORTS}/history.jsonl"' in publish


def test_only_the_small_publish_job_holds_the_token_and_it_runs_no_build() -> None:
    jobs = _load(LINE)["jobs"]
    job = jobs["publish"]
    assert job["needs"] == ["nightly", *(f"collect-{n}" for n in range(1, ROUNDS + 1))]
    assert all(f"needs.{name}.outputs.stacks == 'true'" in job["if"] for name in job["needs"])
    assert job["environment"] == "nightly"
    assert job["permissions"] == {"contents": "write", "pull-requests": "write", "issues": "write"}
    assert str(job["runs-on"]).startswith("ubuntu-")
    run = _run(job)
    assert 'kpatch nightly --line "${LINE}" --report "${REPORTS}" --publish-saved\n' in run and "--dry-run" in run
    for word in ("--no-publish", "build-wheels", "kpatch test", "kpatch verify"):
        assert word not in run
    assert not _uses(job, "actions/cache")  # nothing the GPU job could have written reaches it but the artifact
    (download,) = _uses(job, "actions/download-artifact")
    assert download["with"]["name"] == "kpatch-nightly-stacks-${{ github.run_id }}-${{ inputs.line }}"
    checkouts = _uses(job, "actions/checkout")
    assert checkouts and all(step["with"].get("persist-credentials") is False for step in checkouts)
    holders = [name for name, other in jobs.items() if "secrets." in yaml.safe_dump(other)
               or ("write" in str(other.get("permissions", {})) and name != "unreported")]
    assert holders == ["publish"]


def test_kpatch_is_installed_from_a_lock_with_hashes() -> None:
    """Not `pip install .` with whatever versions PyPI has that night."""
    lock = ROOT / "ci" / "nightly-requirements.txt"
    pins = [line for line in lock.read_text().splitlines() if line and not line[0].isspace()
            and not line.startswith("#")]
    assert pins and all(re.match(r"^[a-z0-9._-]+==[^ ]+ \\$", pin) for pin in pins), pins
    assert {pin.split("==")[0] for pin in pins} >= {"click", "rich", "gitpython", "docker", "pygithub",
                                                    "packaging", "tomli-w", "tomlkit", "setuptools"}
    for path, name in ((NIGHTLY, "lines"), (LINE, "nightly"), (LINE, "publish")):
        run = _run(_load(path)["jobs"][name])
        assert "pip install --quiet --require-hashes --no-deps -r ci/nightly-requirements.txt" in run
        assert "pip install --quiet --no-deps --no-build-isolation ." in run


def test_the_caches_are_keyed_on_what_they_hold_not_on_the_run() -> None:
    steps = _uses(_load(LINE)["jobs"]["nightly"], "actions/cache")
    keys = [step["with"]["key"] for step in steps]
    assert keys == ["kpatch-mirrors-${{ hashFiles('kpatch.toml') }}",
                    "${{ env.CACHE_KEY }}wheels-${{ hashFiles('kpatch.toml', 'pylock.toml', 'patches/**') }}"]
    assert not any("run_id" in key or "kpatch/wheels/data" in key for key in keys)


def test_everything_but_the_gpu_jobs_runs_on_hosted_runners() -> None:
    gpu = {"nightly", *(f"{kind}-{n}" for kind in ("step", "collect") for n in range(1, ROUNDS + 1))}
    for path in WORKFLOWS:
        for name, job in _load(path)["jobs"].items():
            if "uses" in job:  # a call of the line's workflow: its jobs say where they run
                continue
            if path.name != "nightly-line.yml" or name not in gpu:
                assert str(job["runs-on"]).startswith("ubuntu-"), (path, name)


def test_the_search_rounds_are_what_the_generator_writes_in_every_copy_of_the_nightly() -> None:
    ran = subprocess.run([sys.executable, str(ROOT / "scripts" / "nightly_rounds.py"), "--check"], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stderr


def test_each_round_is_a_matrix_of_step_jobs_from_the_plan_with_no_secret_then_a_collecting_job() -> None:
    """The steps build and test unreviewed upstream commits on the GPU runners: no secret, no environment, a
    read-only token, their results passed on as artifacts; the last round's collecting job stops the search."""
    jobs = _load(LINE)["jobs"]
    for n in range(1, ROUNDS + 1):
        planner = "nightly" if n == 1 else f"collect-{n - 1}"
        step, collect = jobs[f"step-{n}"], jobs[f"collect-{n}"]
        assert step["needs"] == planner and f"needs.{planner}.outputs.searching == 'true'" in step["if"]
        assert step["strategy"]["matrix"] == f"${{{{ fromJSON(needs.{planner}.outputs.matrix) }}}}"
        assert step["strategy"]["fail-fast"] is False
        for job in (step, collect):
            assert job["runs-on"] == ["self-hosted", "linux", "x64", "intel-gpu"]
            assert job["permissions"] == {"contents": "read"} and "environment" not in job
            assert "secrets." not in yaml.safe_dump(job) and "github.token" not in yaml.safe_dump(job)
            assert all(step["with"].get("persist-credentials") is False for step in _uses(job, "actions/checkout"))
            assert not _uses(job, "actions/cache") and not _uses(job, "actions/cache/save")  # restore only
        assert 'kpatch nightly --line "${LINE}" --run-step "${REPORTS}/scroll/plan.json" "${STEP}"' in _run(step)
        (upload,) = _uses(step, "actions/upload-artifact")
        assert upload["with"]["name"] == \
            f"kpatch-scroll-step-${{{{ github.run_id }}}}-${{{{ inputs.line }}}}-{n}@${{{{ matrix.step }}}}"
        assert collect["needs"] == [planner, f"step-{n}"]
        final = " --final" if n == ROUNDS else ""
        assert f'kpatch nightly --line "${{LINE}}" --collect "${{REPORTS}}/scroll" --report "${{REPORTS}}"{final}\n' \
            in _run(collect)
        downloads = [d["with"].get("name") or d["with"]["pattern"] for d in _uses(collect, "actions/download-artifact")]
        assert downloads == [f"kpatch-scroll-plan-${{{{ github.run_id }}}}-${{{{ inputs.line }}}}-{n}",
                             f"kpatch-scroll-step-${{{{ github.run_id }}}}-${{{{ inputs.line }}}}-{n}@*"]
    assert f"step-{ROUNDS + 1}" not in jobs


def test_ci_runs_dot_ci_run_on_pull_requests() -> None:
    ci = _load(ROOT / ".github" / "workflows" / "ci.yml")
    assert "pull_request" in ci[True]
    assert any(".ci/run" in step.get("run", "") for step in _steps(ci))


@pytest.fixture
def lint_copy(tmp_path: Path) -> Path:
    """A copy of the files ci/lint-workflows reads, to break on purpose."""
    for name in ("ci/lint-workflows", "ci/nightly.yml", "ci/nightly-line.yml", ".github/actionlint.yaml",
                 ".github/workflows/ci.yml", ".github/workflows/nightly.yml", ".github/workflows/nightly-line.yml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    return tmp_path


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHON": sys.executable, "HOME": str(root)}
    return subprocess.run(["bash", str(root / "ci" / "lint-workflows")], capture_output=True, text=True, env=env,
                          check=False, timeout=120)


def test_lint_passes_on_the_real_workflows(lint_copy: Path) -> None:
    result = _lint(lint_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "found nothing in 5 files" in result.stdout


@pytest.mark.parametrize(("change", "finding"), [
    (("@3d3c42e5aac5ba805825da76410c181273ba90b1  # v7.0.1", "@v7"), "unpinned-uses"),
    (("permissions: {}\n", "permissions: write-all\n"), "excessive-permissions"),
    (('run: sudo --preserve-env=CI env "PATH=${PATH}" bash .ci/run',
      "run: echo ${{ github.event.pull_request.title }}"), "template-injection"),
    (("runs-on: ubuntu-24.04", "runs-on: [self-hosted, gpu-box]"), 'label "gpu-box" is unknown'),
])
def test_lint_fails_on_a_finding(lint_copy: Path, change: tuple[str, str], finding: str) -> None:
    ci = lint_copy / ".github" / "workflows" / "ci.yml"
    assert change[0] in ci.read_text()
    ci.write_text(ci.read_text().replace(change[0], change[1], 1))
    result = _lint(lint_copy)
    assert result.returncode != 0 and finding in result.stdout + result.stderr, result.stdout + result.stderr


@pytest.mark.parametrize(("name", "change"), [("nightly.yml", ("17 2 * * *", "0 3 * * *")),
                                              ("nightly-line.yml", ("timeout-minutes: 360", "timeout-minutes: 300"))])
def test_lint_fails_when_a_nightly_copy_drifts(lint_copy: Path, name: str, change: tuple[str, str]) -> None:
    copy = lint_copy / ".github" / "workflows" / name
    assert change[0] in copy.read_text()
    copy.write_text(copy.read_text().replace(*change))
    result = _lint(lint_copy)
    assert result.returncode == 1
    assert f"error: .github/workflows/{name} differs from ci/{name}" in result.stderr
