"""A full or read-only disk in the middle of a command: undo what it did, so that nothing changed.

A kill leaves its run recorded for `--continue` or `--abort`; a disk that cannot be written is known while
kpatch still runs, so the command takes its own `--abort` path at once and puts the run state file back
byte for byte. Only when even that cannot write does the run stay recorded, and the error says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kpatch.errors import STORAGE_ERRNOS, KpatchError, StorageError
from kpatch.project.workspace import Workspace

log = logging.getLogger("kpatch")


@contextmanager
def undone_on_storage_error(ws: Workspace, command: str, undo: Callable[[], object]) -> Iterator[None]:
    """Run the body; when a full or read-only disk stops it, `undo` (the command's abort) and re-raise."""
    recorded = ws.state_bytes()
    try:
        yield
    except OSError as err:
        if err.errno not in STORAGE_ERRNOS:
            raise
        failure = StorageError(f"cannot write {err.filename or 'a file'}: {err.strerror}")
        raise _roll_back(ws, command, undo, recorded, failure) from None
    except StorageError as err:
        raise _roll_back(ws, command, undo, recorded, err) from None


def _roll_back(ws: Workspace, command: str, undo: Callable[[], object], recorded: bytes | None,
               failure: StorageError) -> StorageError:
    try:
        if ws.read_state().operation is not None or ws.pending_journal():
            undo()
        ws.put_state_bytes(recorded)
    except (KpatchError, OSError) as again:
        log.warning("undoing the %s after '%s' failed: %s", command, failure, again)
        return StorageError(f"{failure}; undoing the partial {command} failed too: once kpatch can write there, "
                            f"run 'kpatch {command} --abort'")
    log.info("the partial %s was undone after: %s", command, failure)
    return failure
