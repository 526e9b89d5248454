"""Commit chosen files of a checkout onto a branch and push it, without touching the checkout's HEAD or index.

The commit is built in a private index (`GIT_INDEX_FILE`) from HEAD plus the files as they are on disk, so the
person's branch, staged changes and worktree stay exactly as they were. The push authenticates through the
environment it is given (`GIT_CONFIG_*` carrying an `http.extraheader`), never through a URL or argv.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kpatch.gitx.repo import literal
from kpatch.gitx.runner import COMMITTER, run


@dataclass(frozen=True)
class Snapshot:
    """HEAD plus the chosen files: the commit made of them, or None when they do not differ from HEAD."""

    top: Path  # the checkout's top folder
    parent: str  # HEAD
    commit: str | None
    files: tuple[str, ...]  # paths (from the top folder) that differ from HEAD


def checkout_of(path: Path) -> Path | None:
    """The top folder of the git checkout holding `path`, or None when it is in none (or the checkout has no
    commit yet)."""
    proc = run(["rev-parse", "--show-toplevel"], path, check=False)
    if proc.status != 0 or run(["rev-parse", "--verify", "--quiet", "HEAD"], path, check=False).status != 0:
        return None
    return Path(proc.text.strip())


def current_branch(top: Path) -> str | None:
    """The branch HEAD is on, or None when it is detached."""
    proc = run(["symbolic-ref", "--quiet", "--short", "HEAD"], top, check=False)
    return (proc.text.strip() or None) if proc.status == 0 else None


def remote_url(top: Path, name: str) -> str | None:
    """The URL of remote `name` as configured in the checkout, or None."""
    proc = run(["config", "--get", f"remote.{name}.url"], top, check=False)
    return (proc.text.strip() or None) if proc.status == 0 else None


def snapshot(top: Path, paths: Sequence[Path], message: str) -> Snapshot:
    """A commit on HEAD whose tree is HEAD's with `paths` (files or folders, deletions included) as on disk.

    Files named here go in even when a .gitignore matches them (they were asked for); inside folders the
    checkout's ignore rules hold (no editor backups in patches/).
    """
    parent = run(["rev-parse", "--verify", "HEAD^{commit}"], top).text.strip()
    top = top.resolve()
    files = [str(p.resolve().relative_to(top)) for p in paths if p.is_file()]
    folders = [str(p.resolve().relative_to(top)) for p in paths if p.is_dir()]
    with tempfile.TemporaryDirectory(prefix="kpatch-index-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        run(["read-tree", parent], top, env=env)
        if files:
            run(["add", "--force", "--", *literal(files)], top, env=env)
        if folders:
            run(["add", "--all", "--", *literal(folders)], top, env=env)
        tree = run(["write-tree"], top, env=env).text.strip()
    changed = run(["diff-tree", "-r", "-z", "--name-only", "--no-renames", parent, tree], top).text
    differ = tuple(name for name in changed.split("\0") if name)
    if not differ:
        return Snapshot(top=top, parent=parent, commit=None, files=())
    author = {"GIT_AUTHOR_NAME": COMMITTER[0], "GIT_AUTHOR_EMAIL": COMMITTER[1]}
    commit = run(["commit-tree", "-p", parent, "-F", "-", tree], top, stdin=message.encode("utf-8"),
                 env=author).text.strip()
    return Snapshot(top=top, parent=parent, commit=commit, files=differ)


def push(top: Path, commit: str, destination: str, branch: str, env: Mapping[str, str]) -> None:
    """Force `branch` at `destination` to `commit` (the branch is kpatch's own: each night replaces it).

    Reads the user's git config (credentials, proxies) with kpatch's transports pinned, like a fetch; `env`
    adds what authenticates (a token as an extra header), which no process listing or log shows.
    """
    run(["push", "--force", "--quiet", "--", destination, f"{commit}:refs/heads/{branch}"], top, env=env,
        user_config=True)
