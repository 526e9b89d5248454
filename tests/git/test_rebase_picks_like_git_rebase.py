"""The picks made without a worktree (gitx/treepicks.py) against what they replace: `git rebase` with kpatch's
options in the sparse scratch worktree (gitx/picks.py), and the whole rebase against git am alone."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kpatch.examples.upstreams import commit, init_repo, write_stack
from kpatch.gitx import Repository
from kpatch.gitx.mirror import Mirror
from kpatch.gitx.picks import PICK_CONFIG, PICK_OPTIONS
from kpatch.gitx.treepicks import pick as tree_pick
from tests.support.cli import run_kpatch
from tests.support.example_toml import one_upstream
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


def _project(root: Path, *, am_only: bool, conflict: bool = True) -> Path:
    """An upstream whose .gitattributes says `*.dat binary` (git merges no .dat file); a stack of two patches,
    the first touching .gitattributes, the second a line of a.dat; upstream changes another line of a.dat (or,
    without `conflict`, another file). Applied; with `am_only`, the run state's stack hash dropped (git am alone
    rebases)."""
    upstream = root / "up"
    init_repo(upstream)
    data = numbered("d", 30)
    base = commit(upstream, {".gitattributes": "*.dat binary\n", "a.dat": data}, "import", 0)
    project = root / "project"
    write_stack(upstream, base, project / "patches" / "up", [
        ({".gitattributes": "*.dat binary\n*.txt text\n"}, "Say txt is text\n"),
        ({"a.dat": replace_line(data, 25, "d line 25 fixed")}, "Fix a.dat\n")])
    if conflict:
        commit(upstream, {"a.dat": replace_line(data, 3, "d line 3 upstream")}, "Touch a.dat", 100)
    else:
        commit(upstream, {"b.txt": "b\n"}, "Add b.txt", 100)
    (project / "kpatch.toml").write_text(one_upstream(upstream, base))
    assert _kpatch(project, "apply")[0] == 0
    if am_only:
        path = project / ".kpatch" / "state.json"
        state = json.loads(path.read_text())
        state["settled"]["up"]["stack_hash"] = None
        path.write_text(json.dumps(state))
    return project


def _kpatch(project: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = run_kpatch(project, *args, "--json", "--cache-dir", str(project.parent / "cache"))
    return result.exit_code, json.loads(result.stdout)["result"] if result.stdout.strip() else {}


def test_a_stack_that_touches_gitattributes_rebases_as_git_am_does(tmp_path: Path) -> None:
    """git rebase (and git am) in the scratch worktree merge with the .gitattributes it has on disk (a patch's
    path is checked out there); git merge-tree in the bare mirror reads none. The a.dat patch is a conflict for
    git am (a binary file, changed on both sides), so it must be one with the fast path too, and the patch files
    the same."""
    fast = _project(tmp_path / "fast", am_only=False)
    am = _project(tmp_path / "am", am_only=True)
    code, payload = _kpatch(fast, "rebase")
    am_code, am_payload = _kpatch(am, "rebase")
    assert am_code != 0  # git am: a.dat cannot be merged
    classes = [[(p["name"], p["class"]) for s in r["stacks"] for p in s["patches"]] for r in (payload, am_payload)]
    assert (code, classes[0]) == (am_code, classes[1])


def test_a_stack_that_touches_gitattributes_is_written_as_git_am_writes_it(tmp_path: Path) -> None:
    """Nothing to merge: the fast path and git am alone both rebase the stack, and the patch files are the same
    bytes (format-patch in the scratch worktree writes a.dat's change as a binary patch, as its .gitattributes
    says; in the bare mirror it would be a text diff)."""
    fast = _project(tmp_path / "fast", am_only=False, conflict=False)
    am = _project(tmp_path / "am", am_only=True, conflict=False)
    assert _kpatch(fast, "rebase")[0] == _kpatch(am, "rebase")[0] == 0
    files = [{p.name: p.read_bytes() for p in (root / "patches" / "up").iterdir()} for root in (fast, am)]
    assert b"GIT binary patch" in files[1]["0002-Fix-a.dat.patch"]
    assert files[0] == files[1]
