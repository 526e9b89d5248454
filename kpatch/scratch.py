"""kpatch's temp folders (mails being read, patches being exported, trial indexes, a replay's project): each named
for the kpatch process that made it, `kpatch-<kind>-<pid>-<random>` in the temp folder, so that what a killed kpatch
left (patch text) is found and removed by the next kpatch that writes (`sweep`), and by no other: a folder whose
process still runs is never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kpatch import killseam

# A folder `folder` made: kind, then the pid of its kpatch. mkdtemp's random part holds no "-", so no other name
# (an older kpatch's `kpatch-mail-<random>`) reads as one.
_NAME = re.compile(r"^kpatch-([a-z]+)-([0-9]+)-[^-/]+$")


@contextmanager
def folder(kind: str) -> Iterator[Path]:
    """A new private temp folder for `kind` (lowercase letters: `mail`, `export`...), removed when the block
    ends. Test seam: `KPATCH_TEST_KILL_AT=scratch:<kind>` SIGKILLs kpatch at the end of the block, the folder
    still full."""
    made = make(kind)
    try:
        yield made
        killseam.reached(f"scratch:{kind}")
    finally:
        shutil.rmtree(made, ignore_errors=True)


def make(kind: str) -> Path:
    """A new private temp folder for `kind`, which the caller removes (`folder` removes its own)."""
    assert re.fullmatch("[a-z]+", kind), kind
    return Path(tempfile.mkdtemp(prefix=f"kpatch-{kind}-{os.getpid()}-"))


def sweep(where: Path | None = None) -> list[Path]:
    """Remove every kpatch temp folder in `where` (the temp folder) whose kpatch is dead, that this user owns;
    return them. One that cannot be removed is left for the next time."""
    where = Path(tempfile.gettempdir()) if where is None else where
    swept: list[Path] = []
    try:
        entries = list(os.scandir(where))
    except OSError:
        return swept
    for entry in entries:
        match = _NAME.match(entry.name)
        if match is None or int(match.group(2)) == os.getpid() or _alive(int(match.group(2))):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():  # a link, or another user's
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.lexists(entry.path):
            swept.append(Path(entry.path))
    return swept


def _alive(pid: int) -> bool:
    """Whether process `pid` exists (a reused pid counts as alive: its folder waits for a later sweep)."""
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def owner_alive(name: str) -> bool:
    """Whether the kpatch that made temp folder `name` (`kpatch-<kind>-<pid>-*`) may still be running: a name of
    another form counts as alive (it is never taken for a dead kpatch's)."""
    match = _NAME.match(name)
    return match is None or int(match.group(2)) == os.getpid() or _alive(int(match.group(2)))
