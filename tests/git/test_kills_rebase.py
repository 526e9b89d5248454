"""Every interrupted rebase recoverable: SIGKILL at random moments of a rebase, each followed by --continue or
--abort, a kill inside the `rebase --continue` that commits a resolution, and reproducible commits after any
--continue. (The apply's kills and the named kill points are in test_kills.py; the two files run side by side.)
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from tests.support.cli import KPATCH
from tests.support.gitrepos import committer_is_author, git, kill_inside_git_am, mirror_dir
from tests.support.killing import Runner
from tests.support.rebase_kills import RebaseKills
from tests.support.rebase_repos import FILES, RebaseProject, make_rebase_project, replace_line

REBASE_KILLS = int(os.environ.get("KPATCH_TEST_REBASE_KILLS", "4"))


def resolve_c(rp: RebaseProject) -> None:
    tree = rp.root / "work" / ".rebase" / "kernels"
    (tree / "c.txt").write_text(replace_line(FILES["c"], 15, "c line 15 rewritten upstream, fixed by us"))
    git(tree, "add", "c.txt")


def test_rebase_continue_and_recorded_resolutions_keep_commits_reproducible(tmp_path: Path) -> None:
    """The same rebase with the same (recorded) resolution gives the same SHAs, today and tomorrow."""
    rp = make_rebase_project(tmp_path / "first")
    assert rp.run("rebase").exit_code == ExitCode.CONFLICT
    resolve_c(rp)
    time.sleep(1.1)
    assert rp.run("rebase", "--continue").exit_code == 0
    kernels = rp.root / "work" / "kernels"
    assert committer_is_author(kernels, rp.kernels_new)  # by hand: "Fix d" follows the resolved "Fix c"
    first = git(kernels, "rev-parse", "HEAD")
    # Again from scratch, a second later: the recorded resolution resolves it and the SHAs are the same.
    again = make_rebase_project(tmp_path / "second")
    for path in (rp.root / "patches" / ".rerere").rglob("*"):
        target = again.root / path.relative_to(rp.root)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file():
            target.write_bytes(path.read_bytes())
    time.sleep(1.1)
    result = again.run("rebase")
    assert result.exit_code == 0, result.output
    assert git(again.root / "work" / "kernels", "rev-parse", "HEAD") == first


def test_kills_of_a_rebase_end_fully_old_or_fully_new(tmp_path: Path) -> None:
    """A rebase of 250 patches (clean, three-way, upstream, one conflict a recorded resolution resolves) killed
    at random moments: after --continue everything is the clean rebase's, after --abort everything is old. Then
    the same from a fresh checkout (no worktree, no run state: the worktrees are checked out beside git am and
    moved into place at the end), where old means no worktree at all."""
    harness = RebaseKills.prepare(tmp_path, random.Random(20))
    for which, kills in (("rebase", harness), ("cold rebase", harness.cold())):
        result = kills.run(REBASE_KILLS)
        assert result.problems() == [], result.summary(which)
        assert {c.recovery for c in result.inside} == {"continue", "abort"}


@pytest.mark.parametrize("recovery", ["continue", "abort"])
def test_kill_during_rebase_continue_after_a_resolved_conflict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               recovery: str) -> None:
    """Killed while `rebase --continue` commits the resolution and applies the patches after it: the next
    --continue keeps the resolution and ends exactly where an uninterrupted one ends; --abort ends old."""
    def stopped(folder: Path) -> RebaseProject:
        monkeypatch.setenv("KPATCH_CACHE_DIR", str(folder / "cache"))
        rp = make_rebase_project(folder)
        assert rp.run("apply").exit_code == 0
        assert rp.run("rebase").exit_code == ExitCode.CONFLICT
        resolve_c(rp)
        return rp

    reference = stopped(tmp_path / "reference")
    assert reference.run("rebase", "--continue").exit_code == 0
    rp = stopped(tmp_path / "killed")
    old = rp.tracked(), {n: Runner.head(rp.root / "work" / n) for n in ("kernels", "app")}
    kill_inside_git_am([*KPATCH, "rebase", "--continue"], rp.root,
                       mirror_dir(tmp_path / "killed" / "cache", "kernels"), tmp_path / "in-am")
    state = json.loads((rp.root / ".kpatch" / "state.json").read_text())
    assert state["operation"]["stacks"]["kernels"]["phase"] == "resuming"
    done = rp.run("rebase", f"--{recovery}")
    assert done.exit_code == 0, done.output
    now = rp.tracked(), {n: Runner.head(rp.root / "work" / n) for n in ("kernels", "app")}
    if recovery == "abort":
        assert now == old
    else:
        assert now[1] == {n: Runner.head(reference.root / "work" / n) for n in ("kernels", "app")}
        moved = str(reference.root.parent).encode(), str(rp.root.parent).encode()  # URLs in kpatch.toml
        assert now[0] == {k: v.replace(*moved) for k, v in reference.tracked().items()}
    assert not (rp.root / "work" / ".rebase").exists()
