"""Commit chosen files of a checkout onto a branch and push it, without touching the checkout's HEAD or index.

The commit is built in a private index (`GIT_INDEX_FILE`) from HEAD plus the files as they are on disk, so the
person's branch, staged changes and worktree stay exactly as they were. The push authenticates through the
environment it is given (`GIT_CONFIG_*` carrying an `http.extraheader`), never through a URL or argv.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kpatch import scratch
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
    with scratch.folder("index") as folder:
        env = {"GIT_INDEX_FILE": str(folder / "index")}
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


def remote_branch(top: Path, destination: str, branch: str, env: Mapping[str, str]) -> str | None:
    """The commit `branch` points at in `destination` (a fork), or None when it has no such branch."""
    proc = run(["ls-remote", "--heads", "--", destination, f"refs/heads/{branch}"], top, env=env, user_config=True)
    for line in proc.text.splitlines():
        sha, _, ref = line.partition("\t")
        if ref == f"refs/heads/{branch}":
            return sha
    return None


def push_lease(top: Path, commit: str, destination: str, branch: str, expected: str | None,
               env: Mapping[str, str]) -> str | None:
    """Set `branch` at `destination` to `commit` only if it still points at `expected` (None: it must not exist):
    git's --force-with-lease. None when it was pushed; else git's one-line reason."""
    lease = f"--force-with-lease=refs/heads/{branch}:{expected or ''}"
    proc = run(["push", "--quiet", lease, "--", destination, f"{commit}:refs/heads/{branch}"], top, env=env,
               user_config=True, check=False)
    if proc.status == 0:
        return None
    lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    return next((line for line in lines if "rejected" in line or line.startswith(("fatal:", "error:", "remote:"))),
                lines[0] if lines else f"git push exited {proc.status}")


def with_trailers(top: Path, text: bytes, trailers: Sequence[tuple[str, str]]) -> bytes:
    """A patch mail (or commit message) with `trailers` set: an existing trailer of the same key is replaced, a
    new one goes at the end of the trailer block (git interpret-trailers stops at the mail's `---`)."""
    args = ["interpret-trailers", "--if-exists", "replace", "--if-missing", "add"]
    for key, value in trailers:
        args += ["--trailer", f"{key}: {value}"]
    return run(args, top, stdin=text).stdout
