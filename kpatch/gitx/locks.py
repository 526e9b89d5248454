"""git's own lock files left behind by a killed git: found, checked that no process holds them, removed.

A git killed mid-write leaves `index.lock`, `HEAD.lock`, `packed-refs.lock`... and every later git call in that
repository fails on them, or (packed-refs) waits a second on each and then fails. kpatch holds its own
project lock while it writes, and the git processes it starts die with it, so a git lock file that no live
process has open is stale. Every writer removes them once, as it starts (`Workspace.writer`).

git closes packed-refs.lock as soon as it has made it, so a live git holding that one is not seen here: only a
writer that holds kpatch's locks may call this.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger("kpatch.git")

_TOP_LEVEL = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", "FETCH_HEAD.lock", "packed-refs.lock", "config.lock",
              "shallow.lock", "REBASE_HEAD.lock", "AUTO_MERGE.lock", "MERGE_RR.lock", "commit-graph.lock",
              "objects/info/commit-graphs/commit-graph-chain.lock")


def lock_files(git_dirs: Iterable[Path]) -> list[Path]:
    """git lock files present in these git folders (a worktree's own and the common one)."""
    found: list[Path] = []
    for folder in git_dirs:
        found += [folder / name for name in _TOP_LEVEL if (folder / name).exists()]
        refs = folder / "refs"
        if refs.is_dir():
            found += list(refs.rglob("*.lock"))
    return found


def clear_stale(git_dirs: Iterable[Path]) -> list[Path]:
    """Remove the lock files no live process holds open; return them (each is logged)."""
    candidates = lock_files(git_dirs)
    if not candidates:
        return []
    held = _open_files()
    removed = []
    for path in candidates:
        if held is not None and path.resolve() in held:
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        log.warning("removed stale git lock %s (its writer is gone)", path)
        removed.append(path)
    return removed


def _open_files() -> set[Path] | None:
    """Every file some process on this machine has open (Linux /proc), or None when that cannot be known."""
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return None
    held: set[Path] = set()
    for fd_dir in proc.glob("[0-9]*/fd"):
        try:
            for fd in os.scandir(fd_dir):
                try:
                    held.add(Path(fd.path).readlink())
                except OSError:
                    continue
        except OSError:
            continue
    return held
