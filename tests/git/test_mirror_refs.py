"""A person's branches in a worktree are theirs: fetches keep the upstream's branches in a namespace of their own
(refs/remotes/upstream/*) and never touch refs/heads, which every worktree of a mirror shares.

kpatch runs as its own process (tests/support/cli.py); the repositories are real.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kpatch.examples.upstreams import commit
from tests.support.cli import kpatch
from tests.support.gitrepos import Project, git, mirror_dir


def mirror_of(project: Project, name: str) -> Path:
    return mirror_dir(project.root.parent / "home" / ".cache" / "kpatch", name)


def branches(repo: Path) -> dict[str, str]:
    listing = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads")
    return dict(line.split(" ", 1) for line in listing.splitlines())


@pytest.mark.parametrize("checked_out", [True, False])
def test_a_branch_made_in_a_worktree_survives_the_next_fetch(project: Project, checked_out: bool) -> None:
    """It used to be pruned by `fetch --prune +refs/heads/*:refs/heads/*` into the shared mirror: checked out,
    rebase exited 5 ("Needed a single revision") and status did from then on; not checked out, it was gone."""
    assert kpatch(project.root, "apply").exit_code == 0
    tree = project.workdir / "app"
    applied = git(tree, "rev-parse", "HEAD")
    git(tree, "switch", "-qc", "feature")
    mine = commit(tree, {"notes.txt": "my own work\n"}, "my own work", 50)
    if not checked_out:
        git(tree, "switch", "-q", "--detach", applied)
    ran = kpatch(project.root, "rebase")
    assert ran.exit_code == 0, ran.output
    assert branches(mirror_of(project, "app")).get("refs/heads/feature") == mine
    assert git(tree, "cat-file", "-t", mine) == "commit"
    status = kpatch(project.root, "status")
    assert status.exit_code == 0, status.output


def test_a_mirror_of_the_old_layout_keeps_a_persons_branch_and_drops_only_the_upstream_copies(
        project: Project) -> None:
    """Mirrors an older kpatch made hold the upstream's branches in refs/heads: the first fetch moves them under
    refs/remotes/upstream and drops each refs/heads copy that is exactly the upstream branch; a person's branch
    (a name upstream lacks, or one that moved on from the upstream's) stays."""
    assert kpatch(project.root, "apply").exit_code == 0
    mirror = mirror_of(project, "kernels")
    upstream_main = git(project.kernels, "rev-parse", "main")
    # The old layout: the upstream's branches in refs/heads, nothing under refs/remotes/upstream, no marker.
    git(mirror, "update-ref", "refs/heads/main", upstream_main)
    git(mirror, "update-ref", "-d", "refs/remotes/upstream/main")
    subprocess.run(["git", "config", "--unset", "kpatch.upstreamrefs"], cwd=mirror, check=False)
    tree = project.workdir / "kernels"
    git(tree, "switch", "-qc", "feature")
    mine = commit(tree, {"notes.txt": "my own work\n"}, "my own work", 50)
    ran = kpatch(project.root, "rebase")
    assert ran.exit_code == 0, ran.output
    assert branches(mirror) == {"refs/heads/feature": mine}
    assert git(mirror, "rev-parse", "refs/remotes/upstream/main") == upstream_main
    assert git(mirror, "config", "kpatch.upstreamrefs") == "refs/remotes/upstream/"


def test_a_persons_main_is_kept_and_rebase_moves_onto_the_upstreams_main(project: Project) -> None:
    """A person's `main` in a worktree is not the upstream's main: the fetch used to overwrite it (forced), and
    now leaves it; rebase resolves the branch in kpatch.toml from the upstream's namespace."""
    assert kpatch(project.root, "apply").exit_code == 0
    tree = project.workdir / "kernels"
    applied = git(tree, "rev-parse", "HEAD")
    git(tree, "switch", "-qc", "main")
    mine = commit(tree, {"notes.txt": "my own main\n"}, "my own main", 50)
    git(tree, "switch", "-q", "--detach", applied)
    ran = kpatch(project.root, "rebase")
    assert ran.exit_code == 0, ran.output
    assert branches(mirror_of(project, "kernels")) == {"refs/heads/main": mine}
    assert f'base = "{git(project.kernels, "rev-parse", "main")}"' in (project.root / "kpatch.toml").read_text()


def test_a_tag_made_in_a_worktree_survives_the_next_fetch_and_a_moved_upstream_tag_moves(project: Project) -> None:
    """The tags were fetched with `--prune +refs/tags/*:refs/tags/*`, which deleted a person's tag too."""
    assert kpatch(project.root, "apply").exit_code == 0
    tree = project.workdir / "app"
    git(tree, "tag", "my-work")
    mine = git(tree, "rev-parse", "my-work")
    moved = commit(project.app, {"moved.txt": "moved\n"}, "a commit the tag moves to", 60)
    git(project.app, "tag", "-f", "v2.0-rc", moved)
    ran = kpatch(project.root, "rebase")
    assert ran.exit_code == 0, ran.output
    mirror = mirror_of(project, "app")
    assert git(mirror, "rev-parse", "refs/tags/my-work") == mine
    assert git(mirror, "rev-parse", "refs/tags/v2.0-rc") == moved
    git(project.app, "tag", "-f", "v2.0-rc", f"{moved}~1")
    assert kpatch(project.root, "rebase").exit_code == 0
    assert git(mirror, "rev-parse", "refs/tags/v2.0-rc") == git(project.app, "rev-parse", f"{moved}~1")
