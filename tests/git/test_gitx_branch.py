"""gitx.branch: chosen files of a checkout committed on its HEAD and pushed as a branch, the checkout untouched."""

from __future__ import annotations

from pathlib import Path

from kpatch.gitx import branch
from tests.support.gitrepos import git


def _checkout(tmp_path: Path) -> tuple[Path, Path]:
    top, origin = tmp_path / "project", tmp_path / "origin.git"
    (top / "patches" / "k").mkdir(parents=True)
    (top / "kpatch.toml").write_text("version = 1\n")
    (top / "patches" / "k" / "0001-a.patch").write_text("a\n")
    (top / "patches" / "k" / "0002-b.patch").write_text("b\n")
    (top / "README").write_text("readme\n")
    (top / ".gitignore").write_text("pylock.toml\n*.orig\n")
    git(tmp_path, "init", "--quiet", "--initial-branch=main", str(top))
    git(top, "add", "--all")
    git(top, "commit", "--quiet", "-m", "stacks")
    git(tmp_path, "init", "--quiet", "--bare", str(origin))
    git(top, "remote", "add", "origin", str(origin))
    return top, origin


def test_the_refreshed_files_become_one_commit_and_the_checkout_stays_as_it_was(tmp_path: Path) -> None:
    top, origin = _checkout(tmp_path)
    head = git(top, "rev-parse", "HEAD")
    (top / "kpatch.toml").write_text("version = 1\n# new bases\n")
    (top / "patches" / "k" / "0002-b.patch").unlink()  # a dropped patch
    (top / "patches" / "k" / "0001-a.patch.orig").write_text("editor backup\n")  # ignored inside the folder
    (top / "pylock.toml").write_text("lock\n")  # ignored, but named: it goes in
    (top / "README").write_text("someone's unstaged edit\n")
    git(top, "add", "README")  # ... and staged: the commit must not take it, the index must keep it
    snap = branch.snapshot(top, [top / "kpatch.toml", top / "patches" / "k", top / "pylock.toml",
                                 top / "patches" / ".rerere"], "nightly\n")
    assert snap.commit is not None and snap.parent == head
    assert snap.files == ("kpatch.toml", "patches/k/0002-b.patch", "pylock.toml")
    assert git(top, "rev-parse", "HEAD") == head and git(top, "diff", "--cached", "--name-only") == "README"
    branch.push(top, snap.commit, str(origin), "kpatch/nightly", {})
    assert git(origin, "rev-parse", "kpatch/nightly") == snap.commit
    assert git(origin, "ls-tree", "-r", "--name-only", "kpatch/nightly").split() == [
        ".gitignore", "README", "kpatch.toml", "patches/k/0001-a.patch", "pylock.toml"]
    assert git(origin, "show", "kpatch/nightly:README") == "readme"
    assert (branch.current_branch(top), branch.remote_url(top, "origin")) == ("main", str(origin))


def test_files_equal_to_head_make_no_commit(tmp_path: Path) -> None:
    top, _ = _checkout(tmp_path)
    snap = branch.snapshot(top, [top / "kpatch.toml", top / "patches" / "k"], "nightly\n")
    assert (snap.commit, snap.files) == (None, ())


def test_a_folder_outside_any_checkout_has_none(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    assert branch.checkout_of(tmp_path / "plain") is None
