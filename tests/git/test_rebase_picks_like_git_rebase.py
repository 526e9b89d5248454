"""The picks made without a worktree (gitx/treepicks.py) against what they replace: `git rebase` with kpatch's
options in the sparse scratch worktree (gitx/picks.py), and the whole rebase against git am alone."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kpatch.gitx import Repository
from kpatch.gitx.mirror import Mirror
from kpatch.gitx.picks import PICK_CONFIG, PICK_OPTIONS
from kpatch.gitx.treepicks import pick as tree_pick
from tests.support.rebase_repos import numbered, replace_line


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Up", "GIT_AUTHOR_EMAIL": "up@x.invalid", "GIT_COMMITTER_NAME": "Up",
           "GIT_COMMITTER_EMAIL": "up@x.invalid", "GIT_AUTHOR_DATE": "@1700000000 +0000",
           "GIT_COMMITTER_DATE": "@1700000000 +0000"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, input=stdin, capture_output=True,
                          check=True).stdout.decode().strip()


@pytest.mark.parametrize(("author", "message"), [
    (b"Dev <dev@x.invalid> 01700000100 +0000", b"Fix a\n"),  # git writes the committer date as 1700000100
    (b"Dev <dev@x.invalid> 1700000100 +0060", b"Fix a\n"),  # git writes the committer zone as +0100
    (b"Dev <dev@x.invalid> 1700000100 +0000", b"\n\nFix a\n"),  # the sequencer drops the leading blank lines
    (b"Dev <dev@x.invalid> 1700000100 +0000", b"Fix a\0 and more\n"),  # the sequencer ends the message at NUL
], ids=["date-leading-zero", "zone-minutes-60", "message-leading-blank-lines", "message-with-nul"])
def test_a_commit_the_sequencer_rewrites_is_not_picked_to_other_bytes(tmp_path: Path, author: bytes,
                                                                       message: bytes) -> None:
    """A commit whose author date or message `git rebase` would write otherwise is either picked to the very
    commit `git rebase` makes or left to it (None): never to other bytes."""
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q", "-b", "main")
    (work / "a.txt").write_text(numbered("a"))
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", "import")
    base = _git(work, "rev-parse", "HEAD")
    (work / "a.txt").write_text(replace_line(numbered("a"), 2, "upstream"))
    _git(work, "commit", "-q", "-a", "-m", "upstream")
    head = _git(work, "rev-parse", "HEAD")
    (work / "a.txt").write_text(replace_line(numbered("a"), 25, "stack"))
    _git(work, "add", "a.txt")
    tree = _git(work, "write-tree")
    text = b"tree %s\nparent %s\nauthor %s\ncommitter Dev <dev@x.invalid> 1700000100 +0000\n\n%s" % (
        tree.encode(), base.encode(), author, message)
    original = _git(work, "hash-object", "-t", "commit", "-w", "--stdin", stdin=text)
    _git(work, "update-ref", "refs/heads/stack", original)
    mirror = Mirror(tmp_path / "mirror", "up")
    _git(tmp_path, "clone", "-q", "--bare", str(work), str(mirror.path))

    without = tree_pick(mirror, head, [original], lambda _: None)
    mirror.add_scratch(tmp_path / "scratch", head, ["a.txt"])
    scratch = Repository(tmp_path / "scratch")
    # The rebase as gitx/picks.py runs it (its todo is this one pick); HEAD is the commit it made.
    scratch.run([*PICK_CONFIG, "rebase", *PICK_OPTIONS, "--onto", head, base, original],
                env={"GIT_SEQUENCE_EDITOR": "true"})
    rebased = scratch.head()
    assert rebased not in (head, original)
    assert without is None or without.picked == (rebased,), (
        _git(mirror.path, "cat-file", "commit", without.picked[0] or ""),
        _git(mirror.path, "cat-file", "commit", rebased))
