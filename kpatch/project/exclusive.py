"""One writer at a time: an exclusive lock per project, held by every command that writes it, and one per mirror
in the shared cache, held only while the mirror itself is written (a fetch).

The lock is an `flock` on a file that also names its holder (pid, command, start time), so a second writer
fails at once with a clear message (or, given `wait`, waits for it), and a holder that died (even by SIGKILL)
can never leave it stuck: the kernel releases the lock with the process. Readers (`status`) take no lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from kpatch.errors import WorktreeError
from kpatch.files import named

WAIT_FOREVER = float("inf")
_POLL = 0.05  # seconds between two tries of a lock waited for
_DYING = 10.0  # seconds a lock whose named holder is dead is waited for: what its killed children take to end
_NAMING = 2.0  # seconds a lock held by no one named is waited for: a holder between its flock and its name, or
# between wiping its name and closing the file (a loaded machine stretches both)


@contextmanager
def exclusive(locks: list[Path], command: str, *, wait: float | None = None,
              on_wait: Callable[[str], None] = lambda _said: None) -> Iterator[list[str]]:
    """Hold every lock in `locks` (taken in sorted order); yield notes about holders that died holding one.

    A lock another kpatch holds fails at once (WorktreeError, exit 3), or with `wait` (seconds; WAIT_FOREVER) is
    waited for, `on_wait` told once whom it waits for."""
    notes: list[str] = []
    with ExitStack() as stack:
        for path in sorted(set(locks)):
            notes += stack.enter_context(_hold(path, command, wait, on_wait))
        yield notes


@contextmanager
def _hold(path: Path, command: str, wait: float | None = None,
          on_wait: Callable[[str], None] = lambda _said: None) -> Iterator[list[str]]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        _take(fd, path, wait, on_wait)
        previous = _read(fd)
        notes = []
        if previous.get("pid"):
            notes.append(f"took over the lock {path} from kpatch pid {previous['pid']} "
                         f"({previous.get('command', '?')}), which ended without releasing it")
        os.ftruncate(fd, 0)
        try:
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "command": command, "since": int(time.time())}).encode(), 0)
        except OSError as err:  # a full disk: the error line names the lock
            raise named(err, path) from None
        try:
            yield notes
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def _take(fd: int, path: Path, wait: float | None, on_wait: Callable[[str], None]) -> None:
    """flock `fd`: at once, or within `wait` seconds. A lock whose named holder is dead is waited for a little
    (_DYING) before it is reported: a child that kpatch forked, killed with it, frees it once it has ended."""
    deadline = time.monotonic() + (wait or 0.0)
    grace: float | None = None
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            now = time.monotonic()
            if wait is None or now >= deadline:
                dead = _dead_holder(fd)
                if dead or not _read(fd).get("pid"):  # dead, or releasing it (its name already wiped) / taking it
                    grace = now + (_DYING if dead else _NAMING) if grace is None else grace
                    if now < grace:
                        time.sleep(_POLL)
                        continue
                holder = _describe(_holder(fd)) + (", which has ended: a process it started holds the lock still"
                                                   if dead else "")
                waited = f"; waited {wait:g} s" if wait else ""
                advice = "wait for it to finish, or run again with --wait" if not wait else "wait longer (--wait)"
                raise WorktreeError(f"another kpatch is writing here ({holder}{waited}): {advice} "
                                    f"(lock {path})") from None
            if not told:
                told = True
                limit = "" if wait == WAIT_FOREVER else f" (at most {wait:g} s)"
                on_wait(f"waiting for another kpatch to finish ({_describe(_holder(fd))}){limit}: lock {path}")
            time.sleep(_POLL)


def _dead_holder(fd: int) -> bool:
    """Whether the holder the lock file names is a process that no longer exists."""
    pid = _read(fd).get("pid")
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _holder(fd: int) -> dict[str, object]:
    """Who holds the lock. It writes its name just after it takes the lock: a reader that came in between waits
    for the name a little (a loaded machine can stretch that gap), then says it does not know."""
    deadline = time.monotonic() + 1.0
    while not (holder := _read(fd)).get("pid") and time.monotonic() < deadline:
        time.sleep(0.02)
    return holder


def _read(fd: int) -> dict[str, object]:
    try:
        raw = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
    except (ValueError, UnicodeDecodeError, OSError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _describe(holder: dict[str, object]) -> str:
    if not holder.get("pid"):
        return "another process"
    since = holder.get("since")
    when = time.strftime("%H:%M:%S", time.localtime(since)) if isinstance(since, int) else "?"
    return f"pid {holder['pid']}: kpatch {holder.get('command', '?')}, since {when}"
