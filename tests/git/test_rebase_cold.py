"""A rebase with no worktree of the person's to move (a fresh project checkout, as every night in CI): the whole
worktree is checked out at the new base beside the stack's `git am` and moved into place at the end, with the
same result, conflicts, --continue, --abort and kill recovery as a worktree made after the rebase."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from tests.support.cli import kpatch
from tests.support.gitrepos import Project, git, make_project, mirror_dir
from tests.support.rebase_repos import FILES, RebaseProject, replace_line

NAMES = ("kernels", "app")


def _mirrors() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "kpatch" / "mirrors"


def _records() -> dict[str, tuple[str, bool]]:
    """Every worktree the mirrors know: its folder -> (the mirror, locked)."""
    found = {}
    for record in _mirrors().glob("*.git/worktrees/*"):
        folder = Path((record / "gitdir").read_text().strip()).parent
        found[str(folder)] = (record.parent.parent.name, (record / "locked").exists())
    return found


def _whole_and_clean(tree: Path) -> None:
    """A full checkout at HEAD: every file of HEAD on disk, none marked skip-worktree, nothing changed."""
    assert git(tree, "status", "--porcelain", "--untracked-files=all") == ""
    listed = git(tree, "ls-files", "-t").splitlines()
    assert listed and all(line.startswith("H ") for line in listed), [ln for ln in listed if not ln.startswith("H ")]
    assert len(listed) == len(git(tree, "ls-tree", "-r", "--name-only", "HEAD").splitlines())
    assert all((tree / line[2:]).is_file() for line in listed)


def _only_the_worktrees(root: Path, names: tuple[str, ...]) -> None:
    """The mirrors record exactly the person's worktrees `names`, none locked, and no scratch folder is left."""
    assert not (root / "work" / ".rebase").exists()
    assert _records() == {str(root / "work" / n): (mirror_dir(_mirrors().parent, n).name, False) for n in names}


def test_a_cold_rebase_moves_the_worktree_it_checked_out_beside_am_into_place(
        project: Project, tmp_path: Path, example_template: Path) -> None:
    cold = kpatch(project.root, "rebase", "--verbose")
    assert cold.exit_code == 0, cold.stderr
    for name in NAMES:  # checked out beside am, then moved: no second checkout of the whole tree
        beside = project.workdir / ".rebase" / ".worktrees" / name
        assert "reset --quiet --hard" in cold.stderr and f"cwd={beside})" in cold.stderr
        assert f"worktree add --quiet --force --detach -- {project.workdir / name} " not in cold.stderr
        _whole_and_clean(project.workdir / name)
    _only_the_worktrees(project.root, NAMES)
    # The same commits as a rebase that moved worktrees an apply made.
    reference = make_project(tmp_path / "reference", example_template)
    cache = {"KPATCH_CACHE_DIR": str(tmp_path / "reference-cache")}
    assert kpatch(reference.root, "apply", env=cache).exit_code == 0
    assert kpatch(reference.root, "rebase", env=cache).exit_code == 0
    for name in NAMES:
        assert git(project.workdir / name, "rev-parse", "HEAD") == git(reference.workdir / name, "rev-parse", "HEAD")
    assert kpatch(project.root, "export", "--check").exit_code == 0


@pytest.mark.parametrize("recovery", ["continue", "abort"])
def test_a_cold_rebase_stopped_at_a_conflict_keeps_its_checkout_until_continue_or_abort(
        rp: RebaseProject, recovery: str) -> None:
    before = rp.tracked()
    assert rp.run("rebase").exit_code == ExitCode.CONFLICT
    beside = rp.root / "work" / ".rebase" / ".worktrees" / "kernels"
    assert not (rp.root / "work" / "kernels").exists()
    kernels = mirror_dir(_mirrors().parent, "kernels").name
    assert (beside / "a.txt").is_file() and _records()[str(beside)] == (kernels, False)
    if recovery == "continue":
        scratch = rp.root / "work" / ".rebase" / "kernels"
        (scratch / "c.txt").write_text(replace_line(FILES["c"], 15, "c line 15 rewritten upstream, fixed by us"))
        git(scratch, "add", "c.txt")
        done = rp.run("rebase", "--continue")
        assert done.exit_code == 0, done.output
        for name in NAMES:
            _whole_and_clean(rp.root / "work" / name)
        assert "fixed by us" in (rp.root / "work" / "kernels" / "c.txt").read_text()
        _only_the_worktrees(rp.root, NAMES)
    else:
        assert rp.run("rebase", "--abort").exit_code == 0
        assert not any((rp.root / "work" / n).exists() for n in NAMES)
        assert rp.tracked() == before
        _only_the_worktrees(rp.root, ())


@pytest.mark.parametrize(("point", "recovery"), [("rebase:beside:kernels", "continue"),
                                                 ("rebase:beside:kernels", "abort"),
                                                 ("worktree:move", "continue"), ("worktree:move", "abort")])
def test_a_kill_while_a_cold_rebase_checks_out_or_moves_the_worktree_recovers(
        project: Project, tmp_path: Path, example_template: Path, point: str, recovery: str) -> None:
    toml = (project.root / "kpatch.toml").read_bytes()
    killed = kpatch(project.root, "rebase", env={"KPATCH_TEST_KILL_AT": point})
    assert killed.exit_code == -signal.SIGKILL
    if point.startswith("rebase:beside"):  # the checkout beside died with kpatch, still locked "initializing"
        beside = project.workdir / ".rebase" / ".worktrees" / "kernels"
        assert _records()[str(beside)] == (mirror_dir(_mirrors().parent, "kernels").name, True)
    else:  # the record already names work/kernels; the folder is still beside
        assert not (project.workdir / "kernels").exists()
    ran = kpatch(project.root, "rebase", f"--{recovery}")
    assert ran.exit_code == 0, ran.stderr
    if recovery == "abort" and point.startswith("rebase:beside"):
        assert (project.root / "kpatch.toml").read_bytes() == toml
        assert not any((project.workdir / n).exists() for n in NAMES)
        _only_the_worktrees(project.root, ())
        return
    if recovery == "abort":  # after the commit point: abort puts the files back; no worktree was placed yet
        assert (project.root / "kpatch.toml").read_bytes() == toml
        placed = tuple(n for n in NAMES if (project.workdir / n).exists())
        _only_the_worktrees(project.root, placed)
        return
    reference = make_project(tmp_path / "reference", example_template)
    assert kpatch(reference.root, "rebase", env={"KPATCH_CACHE_DIR": str(tmp_path / "reference-cache")}).exit_code == 0
    for name in NAMES:
        _whole_and_clean(project.workdir / name)
        assert git(project.workdir / name, "rev-parse", "HEAD") == git(reference.workdir / name, "rev-parse", "HEAD")
    _only_the_worktrees(project.root, NAMES)
    assert subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=mirror_dir(_mirrors().parent, "kernels"),
                          check=True, capture_output=True, text=True).stdout.count("prunable") == 0


def test_a_cold_rebase_in_a_fresh_mirror_merges_a_patch_whose_preimage_only_the_fork_had(tmp_path: Path) -> None:
    """A patch whose 3-way fallback needs the blob an earlier patch of the stack made (a fork's blob: no upstream
    has it) stopped as a conflict ("Repository lacks necessary blobs") in a rebase from a fresh checkout with a
    fresh mirror, and merged in one after `kpatch apply` (whose am wrote that blob): the blobs are made first."""
    from tests.support.many_patches import Upstreamed, make_long_project

    later = {"kernels": Upstreamed(three_way=(60,))}
    found = {}
    for how in ("warm", "cold"):
        project = make_long_project(tmp_path / how, {"kernels": 80}, later)
        env = {"KPATCH_CACHE_DIR": str(tmp_path / how / "cache")}
        if how == "warm":
            assert kpatch(project.root, "apply", env=env).exit_code == 0
        ran = kpatch(project.root, "rebase", "--json", env=env)
        assert ran.exit_code == 0, ran.stderr
        found[how] = [p["class"] for p in json.loads(ran.stdout)["result"]["stacks"][0]["patches"]]
    assert found["cold"] == found["warm"] and found["cold"][60] == "three-way"
