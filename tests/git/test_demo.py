"""`kpatch demo`: the whole pipeline on example upstreams it builds itself; here on the local backend (no engine)."""

from __future__ import annotations

import re
import tempfile
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from kpatch.cli import main
from kpatch.errors import ExitCode
from tests.support.gitrepos import git
from tests.support.json_envelope import checked

NO_ENGINE = "unix:///nonexistent/docker.sock"


def test_demo_without_an_engine_runs_everything_on_this_host_and_keeps_dir(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    folder = tmp_path / "d"
    result = CliRunner().invoke(main, ["demo", "--dir", str(folder)])
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("backend: local (local backend, because no Docker engine at " + NO_ENGINE)
    assert "start one" in first  # and says how
    steps = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("== ")]
    assert steps == ["example", "apply", "upstream", "rebase", "build-wheels", "verify", "test", "release", "release"]
    project = folder / "project"
    # the rebase dropped the merged kernels patch and took the recorded resolution for the app's conflict
    assert "# dropped 0001-Add-the-kimi-op.patch: upstream" in (project / "patches/kernels/series").read_text()
    resolved = (project / "work/app/app/models/k3/nvidia/metadata.py").read_text()
    assert "assert t.device.type != 'cpu', \"block tables live on the GPU\"" in resolved
    dist = sorted(p.suffix for p in (project / "dist").iterdir())
    assert dist == [".toml", ".whl", ".whl"]
    assert sorted(p.name for p in (project / "reports").glob("*.xml")) == ["app.xml", "kernels.xml"]
    # the last step released the set into site/: its index lists both wheels, its notes carry both test runs
    assert sorted(p.name for p in (project / "site" / "stable" / "simple").iterdir()) == [
        "app", "index.html", "index.json", "vllm-xpu-kernels"]
    (notes,) = (project / "site" / "stable" / "releases").glob("*/NOTES.md")
    assert "kpatch test kernels: 6 passed, 0 failed" in notes.read_text()
    assert (project / "reports" / "nightly" / "history.jsonl").is_file()  # its rebase began the carry history
    # the release line: release/0.9 cut from an older commit, carrying the kimi op (main has it upstream), main's test
    # of the op backported onto it and applied there; main's stacks and worktrees as the rebase left them
    kernels = folder / "upstreams" / "kernels"
    cut = git(kernels, "rev-parse", "release/0.9")
    git(kernels, "merge-base", "--is-ancestor", cut, "main")  # an older commit of main (raises if not)
    assert cut != git(kernels, "rev-parse", "main") and cut == git(kernels, "rev-parse", "v0.9^{commit}")
    assert '[line."0.9".kernels]' in (project / "kpatch.toml").read_text()
    test = "0002-Test-the-kimi-op.patch"
    assert [n for n in (project / "patches/kernels/series").read_text().splitlines() if not n.startswith("#")] == [
        test]
    assert git(project / "work" / "kernels", "log", "--format=%s", "-1") == "Test the kimi op"
    line = project / "patches" / "0.9" / "kernels"
    assert [n for n in (line / "series").read_text().splitlines() if not n.startswith("#")] == [
        "0001-Add-the-kimi-op.patch", test]
    assert f"Backport-Of: main:{test}" in (line / test).read_text()
    assert "Lines: 0.9" in (line / "0001-Add-the-kimi-op.patch").read_text()
    assert git(project / "work-0.9" / "kernels", "log", "--format=%s", "-2").splitlines() == [
        "Test the kimi op", "Add the kimi op"]
    assert git(project / "work-0.9" / "kernels", "rev-parse", "HEAD~2") == cut
    step = result.stdout[result.stdout.index("== release line"):result.stdout.index("\nsummary")]
    assert f"$ kpatch backport kernels/{test} --to 0.9" in step and "$ kpatch status --lines" in step
    # what the step says it cut and declared is what the upstream and kpatch.toml hold
    assert f"kernels: branch release/0.9 and tag v0.9 at {cut[:12]}" in step, step
    toml = tomllib.loads((project / "kpatch.toml").read_text())
    bases = {toml["line"]["0.9"][name]["base"] for name in ("kernels", "app")}
    assert f'[line."0.9".kernels], [line."0.9".app], branch release/0.9, base {", ".join(sorted(bases))}\n' in step
    assert re.search(rf"\n  {test}\s+on the line\s+backported\n", step), step
    assert re.search(r"\n  0.9:0001-Add-the-kimi-op.patch\s+not applicable\s+on the line\n", step), step
    assert "demo passed" in result.stdout and f"everything is in {folder}" in result.stdout


def test_demo_json_names_each_step_and_removes_its_temp_folder(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    result = CliRunner().invoke(main, ["demo", "--backend", "local", "--json"])
    assert result.exit_code == 0, result.output
    envelope = checked(result.stdout, "demo")
    report = envelope["result"]
    assert envelope["ok"] and envelope["command"] == "demo" and envelope["error"] is None
    assert report["backend"]["backend"] == "local" and not report["kept"]
    assert [s["name"] for s in report["steps"]] == ["example", "apply", "upstream moves", "rebase", "build-wheels",
                                                    "verify", "test", "release", "release line"]
    classes = {p["name"]: p["class"] for s in report["rebase"]["stacks"] for p in s["patches"]}
    assert classes == {"0001-Add-the-kimi-op.patch": "upstream", "0002-Test-the-kimi-op.patch": "clean",
                       "0001-Route-k3-to-the-XPU-path.patch": "clean",
                       "0002-XPU-Make-the-block-table-assert-device-generic.patch": "three-way"}
    assert [s["outcome"] for s in report["test"]["suites"]] == ["passed", "passed"]
    assert Path(report["lock"]).name == "pylock.toml" and len(report["wheels"]) == 2
    assert report["release"]["channel"] == "stable" and report["release"]["package"] == "app"
    assert [(p["patch"], p["outcome"]) for p in report["line"]["backport"]["patches"]] == [
        ("0002-Test-the-kimi-op.patch", "backported")]
    assert report["line"]["matrix"]["lines"] == ["main", "0.9"]
    assert list(temp.iterdir()) == []  # the demo's folder is gone, wheels and lock with it


def test_demo_keep_keeps_its_temp_folder_even_when_a_step_fails(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """--keep keeps the temp folder whatever the outcome (here a build that cannot start: no package index, which
    also keeps the test short); --quiet prints the summary alone."""
    _offline_index(tmp_path, monkeypatch)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    result = CliRunner().invoke(main, ["demo", "--backend", "local", "--keep", "--quiet"])
    assert result.exit_code == ExitCode.BUILD, result.output
    kept = list(temp.glob("kpatch-demo-*"))
    assert len(kept) == 1 and (kept[0] / "project" / "kpatch.toml").is_file()
    assert (kept[0] / "project" / "work" / "kernels").is_dir()  # applied and rebased before the build failed
    assert "== " not in result.stdout and "summary" in result.stdout  # --quiet: the summary alone


def test_demo_refuses_a_folder_in_use(tmp_path: Path) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "keep.txt").write_text("mine")
    result = CliRunner().invoke(main, ["demo", "--backend", "local", "--dir", str(used)])
    assert result.exit_code == ExitCode.BAD_INPUT and "is not empty" in result.stderr
    assert [p.name for p in used.iterdir()] == ["keep.txt"]


def test_demo_docker_backend_without_an_engine_says_how_to_start_one(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    result = CliRunner().invoke(main, ["demo", "--backend", "docker", "--dir", str(tmp_path / "d")])
    assert result.exit_code == ExitCode.BUILD
    assert result.stderr.startswith(f"error: --backend docker: no Docker engine at {NO_ENGINE}")
    assert "dockerd" in result.stderr and not (tmp_path / "d").exists()


def test_demo_base_image_goes_with_docker_only(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["demo", "--backend", "local", "--base-image", "x", "--dir", str(tmp_path)])
    assert result.exit_code == ExitCode.BAD_INPUT and "--base-image" in result.stderr


def test_demo_stops_at_the_first_failing_step_and_says_which(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _offline_index(tmp_path, monkeypatch)  # the local backend cannot make its build environment
    result = CliRunner().invoke(main, ["demo", "--backend", "local", "--dir", str(tmp_path / "d")])
    assert result.exit_code == ExitCode.BUILD, result.output
    assert "== build-wheels FAILED" in result.stdout
    assert "cannot make the local build environment" in result.stdout
    assert "== verify" not in result.stdout
    assert re.search(r"\ndemo FAILED at build-wheels in [0-9.]+ s$", result.stdout.rstrip())


def test_a_demo_whose_build_fails_shows_the_cause_and_the_log_in_its_summary(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """An offline machine (no package index) cannot make the local build environment: the summary says so with
    the last lines pip printed and the log's path, and so does --json."""
    _offline_index(tmp_path, monkeypatch)
    result = CliRunner().invoke(main, ["demo", "--backend", "local", "--dir", str(tmp_path / "d"), "--quiet"])
    assert result.exit_code == ExitCode.BUILD, result.output
    lines = result.stdout.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("  build-wheels failed: ")))
    assert "cannot make the local build environment" in lines[at] and "last lines:" in lines[at]
    tail = lines[at + 1:lines.index(next(line for line in lines[at:] if line.startswith("  log: ")))]
    assert tail and all(line.startswith("    ") for line in tail)
    assert any("127.0.0.1" in line or "pip" in line.lower() for line in tail), tail
    log = Path(lines[at + 1 + len(tail)].removeprefix("  log: "))
    assert log.is_file() and "cannot make the local build environment" in log.read_text()
    assert lines[-1].startswith("demo FAILED at build-wheels")
    as_json = CliRunner().invoke(main, ["demo", "--backend", "local", "--dir", str(tmp_path / "j"), "--json"])
    envelope = checked(as_json.stdout, "demo")
    report = envelope["result"]
    assert not envelope["ok"] and envelope["error"]["message"].startswith("demo failed at build-wheels")
    failed = next(s for s in report["steps"] if s["status"] == "failed")
    assert failed["name"] == "build-wheels" and failed["detail"] and Path(report["log"]).is_file()


def _offline_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No package index (a closed port), no pip configuration and no seed yet: the local backend cannot start."""
    monkeypatch.setenv("KPATCH_PYTHON_ENVS", str(tmp_path / "no-seed-yet"))
    for name, value in {"PIP_CONFIG_FILE": "/dev/null", "PIP_FIND_LINKS": "", "PIP_RETRIES": "0",
                        "PIP_TIMEOUT": "1", "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
                        "PIP_EXTRA_INDEX_URL": ""}.items():
        monkeypatch.setenv(name, value)


# --- kpatch demo --adopt: a fork branch and a quilt folder adopted into an empty project -----------------------


def test_demo_adopt_inits_imports_a_fork_branch_and_a_quilt_folder_and_applies_them(tmp_path: Path,
                                                                                     monkeypatch: pytest.MonkeyPatch
                                                                                     ) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)  # it builds nothing: no engine is asked
    folder = tmp_path / "d"
    result = CliRunner().invoke(main, ["demo", "--adopt", "--dir", str(folder)])
    assert result.exit_code == 0, result.output
    steps = [line.split(" ok ")[0].removeprefix("== ") for line in result.stdout.splitlines()
             if line.startswith("== ")]
    assert steps == ["example", "init", "import kernels", "import app", "apply"]
    summary = result.stdout[result.stdout.index("\nsummary\n"):]
    assert "kpatch import kernels --from FORK@xpu: 2 commits as patches, byte-identical to the stack" in summary
    assert "kpatch import app --series quilt-app/" in summary and "4 patches applied, kernels first" in summary
    assert re.search(r"\nadoption demo passed in [0-9.]+ s$", result.stdout.rstrip())
    project = folder / "project"
    # the fork's branch and the quilt folder are what the team carried; the project is init's, filled by import
    assert git(folder / "forks" / "kernels", "rev-parse", "--abbrev-ref", "HEAD") == "xpu"
    assert sorted(p.name for p in (folder / "quilt-app").iterdir()) == [
        "0001-Route-k3-to-the-XPU-path.diff", "0002-XPU-Make-the-block-table-assert-device-generic.diff", "series"]
    assert not (folder / "quilt-app" / "0001-Route-k3-to-the-XPU-path.diff").read_text().startswith("From ")
    series = (project / "patches" / "app" / "series").read_text().splitlines()
    assert [line for line in series if line and not line.startswith("#")] == [
        "0001-Route-k3-to-the-XPU-path.patch", "0002-XPU-Make-the-block-table-assert-device-generic.patch"]
    assert 'requires = ["kernels"]' in (project / "kpatch.toml").read_text()
    for name in ("kernels", "app"):  # each worktree holds its stack as two commits on the base
        assert git(project / "work" / name, "rev-list", "--count", "v1.0..HEAD") == "2"


def test_demo_adopt_json_lists_the_steps_and_removes_its_temp_folder(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    result = CliRunner().invoke(main, ["demo", "--adopt", "--json"])
    assert result.exit_code == 0, result.output
    report = checked(result.stdout, "demo")["result"]
    assert [s["name"] for s in report["steps"]] == ["example", "init", "import kernels", "import app", "apply"]
    assert [i["upstream"] for i in report["imports"]] == ["kernels", "app"] and report["identical"] == ["kernels"]
    assert sum(s["applied"] for s in report["applied"]["stacks"]) == 4
    assert list(temp.iterdir()) == []


@pytest.mark.parametrize("option", [["--backend", "local"], ["--base-image", "x"]])
def test_demo_adopt_refuses_build_options_and_makes_nothing(tmp_path: Path, option: list[str]) -> None:
    result = CliRunner().invoke(main, ["demo", "--adopt", *option, "--dir", str(tmp_path / "d")])
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert f"{option[0]} does not go with --adopt" in result.stderr and not (tmp_path / "d").exists()


# --- kpatch demo --scroll: a red night scrolls to the last green commit and names the culprit -----------------


def test_demo_adopt_and_scroll_are_two_demos_and_together_are_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["demo", "--adopt", "--scroll", "--dir", str(tmp_path / "d")])
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert "--adopt and --scroll are two demos" in result.stderr and not (tmp_path / "d").exists()


def test_demo_runners_without_scroll_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["demo", "--runners", "3", "--dir", str(tmp_path / "d")])
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert "--runners goes with --scroll" in result.stderr and not (tmp_path / "d").exists()


def test_demo_scroll_on_three_local_workers_tries_three_commits_at_once_and_names_the_same_culprit(
        tmp_path: Path) -> None:
    from tests.support.cli import run_kpatch

    result = run_kpatch(None, "demo", "--scroll", "--runners", "3", "--backend", "local", "--dir",
                        str(tmp_path / "d"), "--json")
    assert result.exit_code == 0, result.output
    report = checked(result.stdout, "demo")["result"]
    moves = [m["commit"] for m in report["moves"]]
    scroll = report["scroll"]
    assert report["outcome"] == "failed" and scroll["complete"] and scroll["advanced"]
    # one round of three from the red head: the four commits below it cut into four parts
    assert [(s["round"], s["where"], s["commit"], s["result"]) for s in scroll["steps"]] == [
        (1, "worker 1", moves[0], "green"), (1, "worker 2", moves[1], "green"), (1, "worker 3", moves[2], "red")]
    assert scroll["culprit"]["commit"] == moves[2]
    assert {p["upstream"]: p["commit"] for p in scroll["last_green"]}["app"] == moves[1]
    assert "(3 steps in 1 round(s) of up to 3, " in report["steps"][-1]["summary"]
