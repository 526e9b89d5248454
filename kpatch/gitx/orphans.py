"""git processes that outlived the kpatch that started them: found and stopped before anything else runs.

The parent-death signal kills the git kpatch starts, not what that git starts in turn: `git worktree add`
runs `git reset --hard` (and its checkout filters), fetch runs index-pack. When kpatch is killed, those keep
writing in its worktrees and mirrors (holding index.lock) while the next command recovers there. Every git
kpatch starts carries KPATCH_PARENT=<kpatch pid> in its environment, and so does everything it starts: a
process with it whose kpatch is gone is an orphan, and the next writer (holding the lock) stops it.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kpatch.gitx.runner import ORPHAN_MARKER as MARKER

log = logging.getLogger("kpatch.git")


@dataclass(frozen=True)
class Orphan:
    pid: int
    command: str
    cwd: str


def _start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks after boot), or None when there is no such live process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])  # a zombie is gone, only not reaped yet


def orphans(folders: Iterable[Path]) -> list[Orphan]:
    """Processes working inside `folders` that a kpatch started and that outlived it (Linux; elsewhere none)."""
    roots = [str(f.resolve()) for f in folders]
    marker = f"{MARKER}=".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            env = (entry / "environ").read_bytes()
            if marker not in env:
                continue
            cwd = str((entry / "cwd").readlink())
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if not any(cwd == r or cwd.startswith(r + "/") for r in roots):
            continue
        parent = next((int(v.split(b"=", 1)[1]) for v in env.split(b"\0") if v.startswith(marker)
                       and v.split(b"=", 1)[1].isdigit()), None)
        mine, born = _start_time(int(entry.name)), _start_time(parent) if parent else None
        # Its kpatch is gone (or the pid now belongs to a process started after this one).
        if parent != os.getpid() and mine is not None and (born is None or born > mine):
            found.append(Orphan(pid=int(entry.name), command=command[:200], cwd=cwd))
    return found


def stop_orphans(folders: Iterable[Path], wait: float = 5.0) -> list[Orphan]:
    """SIGKILL every orphan working in `folders` and wait until they are gone; return them (each is logged)."""
    found = orphans(folders)
    for orphan in found:
        log.warning("stopping git left running by a killed kpatch: pid %d in %s: %s", orphan.pid, orphan.cwd,
                    orphan.command)
        try:
            os.kill(orphan.pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + wait
    while found and any(_start_time(o.pid) is not None for o in found) and time.monotonic() < deadline:
        time.sleep(0.01)
    return found
