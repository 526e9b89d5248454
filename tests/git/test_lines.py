"""Release lines on the example upstreams: a line applied and rebased beside main, each in its own folders."""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from kpatch.examples.lines import BRANCH, LINE, LineProject, make_line_project, release_commit
from kpatch.gitx import Repository
from tests.support.cli import run_kpatch


@pytest.fixture
def lp(tmp_path: Path) -> LineProject:
    return make_line_project(tmp_path)


def files(root: Path, *folders: str) -> dict[str, str]:
    """sha256 of every file under the given folders of the project (git internals left out)."""
    found = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and ".git" not in path.parts:
                found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def heads(workdir: Path) -> dict[str, str]:
    return {name: Repository(workdir / name).head() for name in ("kernels", "app")}


def test_two_lines_apply_side_by_side_and_rebasing_one_leaves_the_other_untouched(lp: LineProject) -> None:
    root = lp.root
    assert run_kpatch(root, "apply").exit_code == 0
    line = run_kpatch(root, "apply", "--line", LINE, "--json")
    assert line.exit_code == 0, line.output
    stacks = json.loads(line.stdout)["result"]["stacks"]
    assert [s["worktree"] for s in stacks] == [str(root / f"work-{LINE}" / n) for n in ("kernels", "app")]
    assert Repository(root / f"work-{LINE}" / "kernels").out(["merge-base", "--is-ancestor", lp.kernels_cut,
                                                               "HEAD"]) == ""
    # main keeps today's paths: its run state in .kpatch/state.json, the line's beside it
    assert (root / ".kpatch" / "state.json").is_file()
    assert (root / ".kpatch" / "lines" / LINE / "state.json").is_file()
    main_before = files(root, ".kpatch/state.json", "patches/kernels", "patches/app") | \
        {f"HEAD:{k}": v for k, v in heads(root / "work").items()}
    toml_before = tomllib.loads((root / "kpatch.toml").read_text())

    new = release_commit(lp.example.kernels, {"csrc/release-notes.txt": "0.9.1\n"}, "Release 0.9.1 notes", 600)
    rebased = run_kpatch(root, "rebase", "--line", LINE, "--json")
    assert rebased.exit_code == 0, rebased.output
    assert json.loads(rebased.stdout)["result"]["committed"] is True

    toml_after = tomllib.loads((root / "kpatch.toml").read_text())
    assert toml_after["line"][LINE]["kernels"]["base"] == new  # the line's base moved to its branch head
    assert toml_after["upstream"] == toml_before["upstream"]  # main's tables as they were
    assert files(root, ".kpatch/state.json", "patches/kernels", "patches/app") | \
        {f"HEAD:{k}": v for k, v in heads(root / "work").items()} == main_before
    assert Repository(root / f"work-{LINE}" / "kernels").out(["merge-base", "--is-ancestor", new, "HEAD"]) == ""
    status = run_kpatch(root, "status", "--json")
    assert status.exit_code == 0
    assert json.loads(status.stdout)["result"]["upstreams"][0]["base"] == toml_before["upstream"][1]["base"]


def test_an_unknown_line_is_a_one_line_usage_error(lp: LineProject) -> None:
    result = run_kpatch(lp.root, "apply", "--line", "0.8")
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "unknown line '0.8'" in result.output and "main, 0.9" in result.output
    assert not (lp.root / "work").exists() and not (lp.root / ".kpatch").exists()


def test_a_line_base_the_upstream_lacks_names_the_base_and_where_to_get_it(lp: LineProject) -> None:
    toml = lp.root / "kpatch.toml"
    toml.write_text(toml.read_text().replace('[line."0.9".kernels]\nbranch = "release/0.9"\nbase = "v0.9"',
                                             '[line."0.9".kernels]\nbranch = "release/0.9"\nbase = "v0.9.7"'))
    before = toml.read_bytes()
    result = run_kpatch(lp.root, "apply", "--line", LINE)
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    error = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(error) == 1
    assert "line 0.9: upstream kernels's base 'v0.9.7' is not in" in error[0]
    assert "newest tag there: v" in error[0] and "--url kernels=PATH" in error[0]
    assert f"{toml}:" in error[0]
    assert toml.read_bytes() == before and not (lp.root / f"work-{LINE}" / "kernels").exists()


def test_a_line_workdir_inside_mains_is_refused(lp: LineProject) -> None:
    assert run_kpatch(lp.root, "apply").exit_code == 0
    result = run_kpatch(lp.root, "apply", "--line", LINE, "--workdir", str(lp.root / "work" / "x"))
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "line main's work folder" in result.output
    assert BRANCH  # the line follows the release branch (see kpatch/examples/lines.py)


def test_the_shipped_033_line_names_the_kernels_tag_it_cannot_find_and_where_to_get_it(tmp_path: Path) -> None:
    """The repository's own kpatch.toml: the kernels at v0.1.15.4 on line 0.33, fetched from a copy that stops at
    v0.1.13.1 (as the snapshot at hand does): one line, exit 2, nothing made."""
    from kpatch.examples.upstreams import commit, init_repo
    from kpatch.gitx import run

    root = Path(__file__).resolve().parents[2]
    project = tmp_path / "project"
    project.mkdir()
    (project / "kpatch.toml").write_bytes((root / "kpatch.toml").read_bytes())
    (project / "kpatch" / "config").mkdir(parents=True)
    kernels = tmp_path / "vllm-xpu-kernels"
    init_repo(kernels)
    commit(kernels, {"README.md": "kernels\n"}, "initial import", 0)
    run(["tag", "v0.1.13.1"], kernels)
    result = run_kpatch(project, "apply", "--line", "0.33", "--url", f"vllm-xpu-kernels={kernels}")
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert "line 0.33: upstream vllm-xpu-kernels's base 'v0.1.15.4' is not in" in errors[0]
    assert "(newest tag there: v0.1.13.1)" in errors[0]
    assert "get a clone of https://github.com/vllm-project/vllm-xpu-kernels.git that has it" in errors[0]
    assert "--url vllm-xpu-kernels=PATH" in errors[0]
    assert not (project / "work-0.33").exists()
    matrix = run_kpatch(project, "status", "--lines", "--json")
    assert matrix.exit_code == 0, matrix.output


def test_a_line_builds_and_verifies_its_own_pair_in_its_own_dist(lp: LineProject) -> None:
    """build-wheels, verify and test with --line: the line's worktrees, its lock in dist-<line>/; main's dist/ is
    not made."""
    root = lp.root
    assert run_kpatch(root, "apply", "--line", LINE).exit_code == 0
    built = run_kpatch(root, "build-wheels", "--line", LINE, "--backend", "local", "--json")
    assert built.exit_code == 0, built.output
    assert (root / f"dist-{LINE}" / "pylock.toml").is_file() and not (root / "dist").exists()
    sources = {w["upstream"]: w for w in json.loads(built.stdout)["result"]["wheels"]}
    # built from the line's worktrees: versions from the line's tag v0.9 (main's would be 1.0)
    assert all(w["version"].startswith("0.9+kpatch.") for w in sources.values()), sources
    checked = run_kpatch(root, "verify", "--line", LINE, "--json")
    assert json.loads(checked.stdout)["result"]["lock"] == str(root / f"dist-{LINE}" / "pylock.toml")
    missing = run_kpatch(root, "verify", "--json")  # main has no lock: its own dist/ is asked for
    assert missing.exit_code != 0 and str(root / "dist" / "pylock.toml") in missing.output


def test_two_lines_rebase_at_once_each_under_its_own_lock_and_both_bases_land(lp: LineProject) -> None:
    """main and the line rebased by two kpatch processes started together: neither waits for the other's writer
    lock, and kpatch.toml ends with both new bases (its short lock keeps either from writing the old text)."""
    import subprocess

    from kpatch.examples.upstreams import commit
    from tests.support.cli import KPATCH, environment

    root = lp.root
    assert run_kpatch(root, "apply").exit_code == 0
    assert run_kpatch(root, "apply", "--line", LINE).exit_code == 0
    main_head = commit(lp.example.kernels, {"csrc/main-notes.txt": "next\n"}, "Main moves on", 700)
    line_head = release_commit(lp.example.kernels, {"csrc/release-notes.txt": "0.9.1\n"}, "Release 0.9.1 notes", 701)
    env = environment()
    procs = [subprocess.Popen([*KPATCH, "rebase", *extra], cwd=root, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for extra in ([], ["--line", LINE])]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    toml = tomllib.loads((root / "kpatch.toml").read_text())
    kernels = next(u for u in toml["upstream"] if u["name"] == "kernels")
    assert kernels["base"] == main_head and toml["line"][LINE]["kernels"]["base"] == line_head
    assert Repository(root / "work" / "kernels").out(["merge-base", "--is-ancestor", main_head, "HEAD"]) == ""
    assert Repository(root / f"work-{LINE}" / "kernels").out(["merge-base", "--is-ancestor", line_head, "HEAD"]) == ""


def test_export_and_status_on_a_line_read_and_write_only_that_lines_stacks(lp: LineProject) -> None:
    root = lp.root
    assert run_kpatch(root, "apply", "--line", LINE).exit_code == 0
    main_patches = files(root, "patches/kernels", "patches/app")
    tree = root / f"work-{LINE}" / "kernels"
    (tree / "csrc" / "release-fix.txt").write_text("fixed on the release line only\n")
    Repository(tree).run(["add", "csrc/release-fix.txt"])
    Repository(tree).run(["-c", "user.name=Dev", "-c", "user.email=dev@example.invalid", "commit", "--quiet",
                          "-m", "Fix the release line only"])
    stale = run_kpatch(root, "export", "--line", LINE, "--check")
    assert stale.exit_code == ExitCode.CONFLICT
    assert run_kpatch(root, "export", "--line", LINE).exit_code == 0
    series = (root / "patches" / LINE / "kernels" / "series").read_text().splitlines()
    assert series[-1] == "0003-Fix-the-release-line-only.patch"
    assert files(root, "patches/kernels", "patches/app") == main_patches
    status = json.loads(run_kpatch(root, "status", "--line", LINE, "--json").stdout)["result"]
    kernels = next(u for u in status["upstreams"] if u["upstream"] == "kernels")
    assert kernels["branch"] == BRANCH and kernels["base"] == "v0.9"
    assert [p["name"] for p in kernels["patches"]][-1] == "0003-Fix-the-release-line-only.patch"


def test_a_resolution_recorded_by_a_line_rebase_is_kept_with_the_lines_stacks(lp: LineProject) -> None:
    from kpatch.examples.upstreams import KERNEL_FILES
    from tests.support.gitrepos import git

    root = lp.root
    assert run_kpatch(root, "apply", "--line", LINE).exit_code == 0
    ops = KERNEL_FILES["csrc/ops.h"]
    release_commit(lp.example.kernels, {"csrc/ops.h": ops + "void release_only();\n"}, "Add a release-only op", 650)
    stopped = run_kpatch(root, "rebase", "--line", LINE)
    assert stopped.exit_code == ExitCode.CONFLICT, stopped.output
    assert f"kpatch rebase --continue --line {LINE}" in run_kpatch(root, "apply", "--line", LINE).output
    scratch = root / f"work-{LINE}" / ".rebase" / "kernels"
    (scratch / "csrc" / "ops.h").write_text(ops + "void release_only();\nvoid kimi();\n")
    git(scratch, "add", "csrc/ops.h")
    went = run_kpatch(root, "rebase", "--continue", "--line", LINE)
    assert went.exit_code == 0, went.output
    kept = list((root / "patches" / LINE / ".rerere" / "kernels").glob("*/postimage"))
    assert len(kept) == 1 and "void kimi();" in kept[0].read_text()
    assert not (root / "patches" / ".rerere").exists()  # main's resolutions are main's


def _kernels_bases(root: Path) -> tuple[str, str]:
    """(main's kernels base, the line's kernels base) as kpatch.toml has them now."""
    toml = tomllib.loads((root / "kpatch.toml").read_text())
    return next(u for u in toml["upstream"] if u["name"] == "kernels")["base"], toml["line"][LINE]["kernels"]["base"]


def _killed_line_rebase(lp: LineProject, step: int) -> tuple[str, str, str]:
    """The line's rebase SIGKILLed after `step` steps of its journal (0: all staged, none written; 1: kpatch.toml
    holds its new base), then main rebased and committed: (the line's old base, the line's new base, main's new
    base)."""
    import signal
    import subprocess

    from kpatch.examples.upstreams import commit
    from tests.support.cli import KPATCH, environment

    root = lp.root
    assert run_kpatch(root, "apply").exit_code == 0
    assert run_kpatch(root, "apply", "--line", LINE).exit_code == 0
    old_line = _kernels_bases(root)[1]
    line_head = release_commit(lp.example.kernels, {"csrc/release-notes.txt": "0.9.1\n"}, "Release 0.9.1 notes", 701)
    main_head = commit(lp.example.kernels, {"csrc/main-notes.txt": "next\n"}, "Main moves on", 700)
    killed = subprocess.run([*KPATCH, "rebase", "--line", LINE], cwd=root, capture_output=True, text=True,
                            env=environment() | {"KPATCH_TEST_KILL_AT": f"journal:{step}"}, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert _kernels_bases(root)[1] == (line_head if step else old_line)  # the journal is pending
    assert (root / ".kpatch" / "lines" / LINE / "journal").is_dir()
    main = run_kpatch(root, "rebase")  # main's own line: its writer lock is free, it commits its base
    assert main.exit_code == 0, main.output
    assert _kernels_bases(root) == (main_head, line_head if step else old_line)
    return old_line, line_head, main_head


def test_a_line_rebase_abort_after_a_kill_restores_only_its_own_base_not_another_lines(lp: LineProject) -> None:
    old_line, _line_head, main_head = _killed_line_rebase(lp, 1)
    aborted = run_kpatch(lp.root, "rebase", "--line", LINE, "--abort")
    assert aborted.exit_code == 0, aborted.output
    assert _kernels_bases(lp.root) == (main_head, old_line)  # main's rebase kept, the line's undone
    assert not (lp.root / ".kpatch" / "lines" / LINE / "journal").exists()

