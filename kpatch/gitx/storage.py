"""Telling a full or read-only disk from other git failures, and naming the place git could not write.

git does not always say why a write failed: `worktree add` on a full disk only says "Could not reset index
file to revision 'HEAD'", `git am` stops as if the patch did not apply. So when git fails, the places it
writes (its working folder and the absolute paths it was given) are looked at: a read-only file system,
or one with almost no room left, behind a failed write is what the user is told about.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

_SAID = re.compile(r"No space left on device|Read-only file system|Disk quota exceeded")
# How git words a write it could not make (no errno text); only then is the disk looked at.
_WRITE_FAILED = re.compile(r"unable to (?:write|create|create temporary|add cache entry)|could not (?:write|create|"
                           r"reset index|open '[^']*' for writing|commit|lock)|cannot (?:write|create|mkdir)|"
                           r"failed to (?:write|create|mkdir)|short write|write error|Unable to create '",
                           re.IGNORECASE)
LOW_SPACE = 1 << 20  # bytes: less than this free behind a failed write is a full disk


def place_problem(path: Path) -> str | None:
    """'read-only file system' or 'no space left on device (N KiB free)' for the disk holding `path`, else None."""
    folder = next((p for p in (path, *path.parents) if p.exists()), None)
    if folder is None:
        return None
    try:
        probe = os.statvfs(folder)
    except OSError:
        return None
    if probe.f_flag & os.ST_RDONLY:
        return "read-only file system"
    free = probe.f_bavail * probe.f_frsize
    if free < LOW_SPACE:
        return f"no space left on device ({free // 1024} KiB free)"
    return None


def storage_problem(args: Sequence[str], stderr: str, cwd: Path | None, also: Sequence[Path] = (), *,
                    look: bool = False) -> str | None:
    """Why a failed `git <args>` is a full or read-only disk, naming the place; None when it is not.

    The places looked at: `cwd` (where git works), `also` (e.g. a worktree's git folder), the paths in `args`;
    only when git's message says a write failed, or always with `look` (git am hides the write that failed
    behind its 3-way fallback's "local changes would be overwritten").
    """
    said = _SAID.search(stderr)
    if not said and not look and not _WRITE_FAILED.search(stderr):
        return None
    verb = _verb(args)
    places = ([cwd] if cwd else []) + list(also) + [Path(a) for a in args if a.startswith("/")]
    for place in places:
        problem = place_problem(place)
        if problem:
            return f"{problem}: git {verb} could not write {place}"
    if said:
        quoted = re.findall(r"'(/[^']+)'", stderr)
        where = next((q for q in quoted if not q.startswith("/usr/")), None) or str(places[0] if places else cwd)
        return f"{said.group(0).lower()}: git {verb} could not write {where}"
    return None


def _verb(args: Sequence[str]) -> str:
    """The git command's name in `args` (after any `-c key=value`), with its subcommand ("worktree add")."""
    words = [w for i, w in enumerate(args) if w != "-c" and (i == 0 or args[i - 1] != "-c")]
    first = next((i for i, w in enumerate(words) if not w.startswith("-")), None)
    if first is None:
        return "git"
    following = words[first + 1] if first + 1 < len(words) else ""
    return f"{words[first]} {following}" if following.isalpha() else words[first]
