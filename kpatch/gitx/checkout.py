"""Where a folder's git checkout is, which commit it has and which worktree record it uses, read from git's own
files (no git process: this runs on `kpatch --version`, whose whole cost is start-up)."""

from __future__ import annotations

import os
from pathlib import Path


def git_dir(folder: Path, *, above: bool = True) -> Path | None:
    """The git folder of the checkout `folder` is in (a worktree's `.git` file followed), or None.

    above=False: only `folder`'s own `.git`, not one of a folder above it."""
    for candidate in [folder, *folder.parents] if above else [folder]:
        dot_git = candidate / ".git"
        try:
            if dot_git.is_dir():
                return dot_git
            if dot_git.is_file():
                text = dot_git.read_text(encoding="utf-8").strip()
                return (candidate / text[len("gitdir:"):].strip()) if text.startswith("gitdir:") else None
        except OSError:
            return None
    return None


def in_git_checkout(folder: Path) -> bool:
    """Whether `folder` is inside a git checkout (so `git diff` there can show what changed)."""
    return git_dir(folder) is not None


def head_commit(gitdir: Path) -> str | None:
    """The full SHA HEAD names in `gitdir` (a branch through its loose or packed ref), or None if unreadable."""
    try:
        head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref:"):
            return head or None
        ref = head[len("ref:"):].strip()
        common = gitdir
        if (gitdir / "commondir").is_file():  # a linked worktree: its branches live in the main git folder
            common = gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()
        for folder in (gitdir, common):
            if (folder / ref).is_file():
                return (folder / ref).read_text(encoding="utf-8").strip() or None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(encoding="utf-8").splitlines():
                sha, _, name = line.partition(" ")
                if name == ref and not line.startswith(("#", "^")):
                    return sha
    except OSError:
        return None
    return None


def source_commit() -> str | None:
    """The commit of the checkout kpatch itself runs from (None for an installed kpatch)."""
    gitdir = git_dir(Path(__file__).resolve().parents[2], above=False)  # kpatch/gitx/ -> the checkout
    return head_commit(gitdir) if gitdir else None


def shared_with(path: Path) -> Path | None:
    """The other folder whose git state the worktree at `path` uses, or None: a copy of a worktree (`cp -a` of a
    project) keeps its `.git` file, which names the original's record (`<mirror>/worktrees/<id>`: its HEAD, index and
    any `git am` in progress), and that record names the original's folder. Read from git's files, no process."""
    try:
        line = (path / ".git").read_text(errors="replace").strip() if (path / ".git").is_file() else ""
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    record = Path(line.removeprefix("gitdir:").strip())
    record = record if record.is_absolute() else path / record
    try:
        named = (record / "gitdir").read_text(errors="replace").strip()
    except OSError:
        return None  # no record (or not a worktree's): nothing is shared
    named_path = Path(named) if Path(named).is_absolute() else record / named
    owner = Path(os.path.realpath(named_path)).parent
    return None if owner == Path(os.path.realpath(path)) else owner


def names_worktree(record: Path, path: Path) -> bool:
    """True when the worktree record `record` (`<mirror>/worktrees/<id>`) is the one of the folder `path`."""
    try:
        return Path(os.path.realpath((record / "gitdir").read_text(errors="replace").strip())) == \
            Path(os.path.realpath(path / ".git"))
    except OSError:
        return False


def initializing(record: Path) -> bool:
    """`git worktree add` locks the worktree "initializing" until it is whole (kpatch itself never locks one)."""
    try:
        return (record / "locked").read_text(errors="replace").strip() == "initializing"
    except OSError:
        return False
