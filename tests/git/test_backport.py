"""kpatch backport on the example upstreams: a main fix onto a release line (3-way, Backport-Of, Upstream-PR
kept), a patch the line has already (skipped, named), a backport that conflicts (the release commit that broke
it named; --abort, --continue), and a kill inside its journaled write (all old or all new)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from kpatch.examples.lines import LINE, RELEASE_CHANGE, LineProject, make_line_project
from tests.support.cli import KPATCH, environment, run_kpatch
from tests.support.gitrepos import git

GUARD = "0003-Guard-the-layernorm-kernel.patch"
WIDEN = "0004-Widen-the-cache-kernel.patch"


@pytest.fixture
def lp(tmp_path: Path) -> LineProject:
    return make_line_project(tmp_path)


def tree_hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def line_series(lp: LineProject) -> list[str]:
    return [n for n in (lp.root / "patches" / LINE / "kernels" / "series").read_text().splitlines()
            if n and not n.startswith("#")]


def test_a_main_fix_is_backported_with_backport_of_and_its_upstream_pr(lp: LineProject) -> None:
    main_before = tree_hashes(lp.root / "patches" / "kernels")
    result = run_kpatch(lp.root, "backport", f"kernels/{GUARD}", "--to", LINE, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)["result"]
    assert [(p["patch"], p["outcome"]) for p in payload["patches"]] == [(GUARD, "backported")]
    assert payload["committed"] is True and payload["source"] == "main" and payload["target"] == LINE
    assert line_series(lp)[-1] == GUARD
    text = (lp.root / "patches" / LINE / "kernels" / GUARD).read_text()
    assert f"Backport-Of: main:{GUARD}" in text
    assert "Upstream-PR: vllm-project/vllm-xpu-kernels#601" in text
    assert tree_hashes(lp.root / "patches" / "kernels") == main_before  # the source line untouched
    assert not (lp.root / f"work-{LINE}" / ".rebase").exists()  # no scratch left
    applied = run_kpatch(lp.root, "apply", "--line", LINE)
    assert applied.exit_code == 0, applied.output
    log = git(lp.root / f"work-{LINE}" / "kernels", "log", "--format=%s", "-3")
    assert log.splitlines()[0] == "Guard the layernorm kernel"


def test_a_patch_already_on_the_line_is_skipped_and_named(lp: LineProject) -> None:
    assert run_kpatch(lp.root, "backport", f"kernels/{GUARD}", "--to", LINE).exit_code == 0
    before = tree_hashes(lp.root / "patches" / LINE)
    again = run_kpatch(lp.root, "backport", f"kernels/{GUARD}", "kernels/0001-Add-the-kimi-op.patch", "--to", LINE,
                       "--json")
    assert again.exit_code == 0, again.output
    patches = json.loads(again.stdout)["result"]["patches"]
    assert [p["outcome"] for p in patches] == ["skipped", "skipped"]
    assert f"as {GUARD} (Backport-Of: main:{GUARD})" in patches[0]["why"]
    assert "as 0001-Add-the-kimi-op.patch (same patch-id)" in patches[1]["why"]
    assert tree_hashes(lp.root / "patches" / LINE) == before
    widen = lp.root / "patches" / "kernels" / WIDEN  # a main-only patch: its Lines: trailer keeps it off the line
    widen.write_text(widen.read_text().replace("Upstream-Status: pending\n", "Upstream-Status: pending\nLines: main\n"))
    off = run_kpatch(lp.root, "backport", f"kernels/{WIDEN}", "--to", LINE, "--json")
    assert off.exit_code == 0, off.output
    assert [(p["outcome"], p["why"]) for p in json.loads(off.stdout)["result"]["patches"]] == [
        ("skipped", f"not for line {LINE} (Lines: main)")]
    assert tree_hashes(lp.root / "patches" / LINE) == before


def test_a_conflicting_backport_names_the_release_commit_that_broke_it(lp: LineProject) -> None:
    before = tree_hashes(lp.root / "patches" / LINE)
    result = run_kpatch(lp.root, "backport", f"kernels/{WIDEN}", "--to", LINE, "--json")
    assert result.exit_code == ExitCode.CONFLICT, result.output
    payload = json.loads(result.stdout)["result"]
    stopped = payload["patches"][0]
    assert stopped["outcome"] == "conflict" and stopped["culprit"]["sha"] == lp.culprit
    assert stopped["culprit"]["subject"] == "Rework the cache kernel for 0.9"
    assert stopped["hunks"][0]["path"] == "csrc/cache.cpp"
    assert tree_hashes(lp.root / "patches" / LINE) == before  # nothing written yet
    human = run_kpatch(lp.root, "apply", "--line", LINE)
    assert human.exit_code == ExitCode.WORKTREE
    assert f"run 'kpatch backport --continue --to {LINE}' or 'kpatch backport --abort --to {LINE}'" in human.output
    assert run_kpatch(lp.root, "backport", "--abort", "--to", LINE).exit_code == 0
    assert tree_hashes(lp.root / "patches" / LINE) == before
    assert not (lp.root / f"work-{LINE}" / ".rebase").exists()


def test_continue_after_resolving_a_conflicting_backport_writes_it(lp: LineProject) -> None:
    text = run_kpatch(lp.root, "backport", f"kernels/{WIDEN}", "--to", LINE)
    assert text.exit_code == ExitCode.CONFLICT
    assert lp.culprit[:12] in text.output and f"backport --continue --to {LINE}" in text.output
    scratch = lp.root / f"work-{LINE}" / ".rebase" / "kernels"
    resolved = RELEASE_CHANGE.replace("// cache: reworked for the release 21", "// cache: widened by us 21")
    (scratch / "csrc" / "cache.cpp").write_text(resolved)
    git(scratch, "add", "csrc/cache.cpp")
    went = run_kpatch(lp.root, "backport", "--continue", "--to", LINE, "--json")
    assert went.exit_code == 0, went.output
    on_line = "0003-Widen-the-cache-kernel.patch"  # numbered in the line's stack; Backport-Of names main's file
    assert line_series(lp)[-1] == on_line
    written = (lp.root / "patches" / LINE / "kernels" / on_line).read_text()
    assert f"Backport-Of: main:{WIDEN}" in written and "+// cache: widened by us 21" in written
    assert run_kpatch(lp.root, "apply", "--line", LINE).exit_code == 0


@pytest.mark.parametrize("recovery", ["abort", "continue"])
def test_a_kill_inside_the_journaled_write_leaves_it_all_old_or_all_new(lp: LineProject, recovery: str) -> None:
    folder = lp.root / "patches" / LINE
    before = tree_hashes(folder)
    args = [*KPATCH, "backport", f"kernels/{GUARD}", "--to", LINE]
    # The journal's steps, by path: the line's run state, the new patch file, the series; killed after the second.
    env = environment({"KPATCH_TEST_KILL_AT": "journal:2"})
    killed = subprocess.run(args, cwd=lp.root, env=env, capture_output=True, text=True, check=False)
    assert killed.returncode == -9, killed.stderr
    assert tree_hashes(folder) != before  # killed halfway through the write
    busy = run_kpatch(lp.root, "backport", f"kernels/{GUARD}", "--to", LINE)
    assert busy.exit_code == ExitCode.WORKTREE and f"'kpatch backport --continue --to {LINE}'" in busy.output
    if recovery == "abort":
        assert run_kpatch(lp.root, "backport", "--abort", "--to", LINE).exit_code == 0
        assert tree_hashes(folder) == before
    else:
        assert run_kpatch(lp.root, "backport", "--continue", "--to", LINE).exit_code == 0
        assert line_series(lp)[-1] == GUARD
        assert f"Backport-Of: main:{GUARD}" in (folder / "kernels" / GUARD).read_text()
    assert run_kpatch(lp.root, "apply", "--line", LINE).exit_code == 0
    assert (lp.root / f"work-{LINE}" / "kernels").is_dir()


def test_status_lines_shows_each_patch_on_each_line(lp: LineProject) -> None:
    assert run_kpatch(lp.root, "backport", f"kernels/{GUARD}", "--to", LINE).exit_code == 0
    widen = lp.root / "patches" / "kernels" / WIDEN
    widen.write_text(widen.read_text().replace("Upstream-Status: pending\n", "Upstream-Status: pending\nLines: main\n",
                                               1))
    result = run_kpatch(lp.root, "status", "--lines", "--json")
    assert result.exit_code == 0, result.output
    matrix = json.loads(result.stdout)["result"]
    assert matrix["lines"] == ["main", LINE]
    kernels = {row["patch"]: [(c["presence"], c["file"]) for c in row["cells"]] for row in matrix["rows"]
               if row["upstream"] == "kernels"}
    assert kernels == {
        "0001-Add-the-kimi-op.patch": [("on the line", "0001-Add-the-kimi-op.patch")] * 2,
        "0002-Test-the-kimi-op.patch": [("on the line", "0002-Test-the-kimi-op.patch")] * 2,
        GUARD: [("on the line", GUARD), ("backported", GUARD)],
        WIDEN: [("on the line", WIDEN), ("not applicable", None)],
    }
    human = run_kpatch(lp.root, "status", "--lines")
    assert human.exit_code == 0 and "backported" in human.output and "not applicable" in human.output
    widen.write_text(widen.read_text().replace("Lines: main\n", ""))
    missing = json.loads(run_kpatch(lp.root, "status", "--lines", "--json").stdout)["result"]
    assert [c["presence"] for r in missing["rows"] if r["patch"] == WIDEN for c in r["cells"]] == ["on the line",
                                                                                                  "missing"]


def test_a_line_whose_own_stack_does_not_apply_is_named_and_nothing_changes(lp: LineProject) -> None:
    """The line's stack carries main's cache patch as it was written before the release reworked that file: it
    no longer applies on the line's base, so a backport cannot build the stack top; it says so, and the run state,
    patch folders and work folder are as they were."""
    import shutil

    line = lp.root / "patches" / LINE / "kernels"
    shutil.copy(lp.root / "patches" / "kernels" / WIDEN, line / "0003-Widen-the-cache-kernel.patch")
    with (line / "series").open("a") as series:
        series.write("0003-Widen-the-cache-kernel.patch\n")
    before = tree_hashes(lp.root / "patches")
    result = run_kpatch(lp.root, "backport", f"kernels/{GUARD}", "--to", LINE)
    assert result.exit_code == ExitCode.WORKTREE, result.output
    said = f"line {LINE}: its own stack of kernels does not apply on its base (0003-Widen-the-cache-kernel.patch"
    assert said in result.output
    assert tree_hashes(lp.root / "patches") == before
    assert not (lp.root / ".kpatch" / "lines" / LINE / "state.json").exists()
    assert not (lp.root / f"work-{LINE}" / ".rebase").exists()
