"""The run's log file: everything of a run at debug level, redacted like all output; a reader's kept only when it
fails; at most $KPATCH_LOG_KEEP of them in the log folder."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path

from kpatch.output.printable import shown

log = logging.getLogger("kpatch")


class _Redacting(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return shown(super().format(record))


LOG_KEEP = "KPATCH_LOG_KEEP"  # how many run logs <cache>/logs keeps (the newest); 0: none is written
LOG_KEEP_DEFAULT = 20
_BUFFERED_MAX = 50_000  # records a reader keeps in memory until it knows whether its log is wanted


def log_keep(environ: Mapping[str, str] = os.environ) -> int:
    """$KPATCH_LOG_KEEP, else 20: a whole number, 0 or more (ValueError naming it otherwise)."""
    value = environ.get(LOG_KEEP, "").strip()
    if not value:
        return LOG_KEEP_DEFAULT
    if not value.isdigit():
        raise ValueError(f"{LOG_KEEP}={value!r}: give how many run logs to keep, a whole number (0: none)")
    return int(value)


class _RunLog(logging.Handler):
    """The run's log file. A reader's (deferred) records wait in memory and are written only if `keep` is called
    (the command failed); a writer's go to the file at once. Opening the file prunes the folder to the newest
    $KPATCH_LOG_KEEP run logs."""

    def __init__(self, path: Path, keep: int, *, deferred: bool) -> None:
        super().__init__()
        self.path, self.keep_count = path, keep
        self.records: list[logging.LogRecord] | None = [] if deferred else None
        self.file: logging.FileHandler | None = None
        self._kpatch = True  # marks the run's log file among other handlers

    def open(self) -> bool:
        """Create the file (pruning older logs); False when the folder cannot be written."""
        if self.file is not None:
            return True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.file = logging.FileHandler(self.path, encoding="utf-8")
        except OSError:
            return False
        self.file.setFormatter(_Redacting("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        prune_logs(self.path.parent, self.keep_count)
        for record in self.records or []:
            self.file.handle(record)
        self.records = None
        return True

    def emit(self, record: logging.LogRecord) -> None:
        if self.records is not None:
            if len(self.records) < _BUFFERED_MAX:
                self.records.append(record)
        elif self.file is not None:
            self.file.handle(record)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
        super().close()


_RUN_LOG: _RunLog | None = None


def prune_logs(folder: Path, keep: int) -> None:
    """Delete all but the newest `keep` run logs (`kpatch-<stamp>-...log`; crash logs stay) in `folder`."""
    try:
        logs = sorted(folder.glob("kpatch-[0-9]*.log"), key=lambda p: (p.stat().st_mtime, p.name))
    except OSError:
        return
    for old in logs[:max(len(logs) - keep, 0)]:
        with suppress(OSError):  # another kpatch pruned it first, or a read-only folder: the log costs nothing else
            old.unlink()


def setup_logging(log_dir: Path, command: str, *, deferred: bool = False) -> Path | None:
    """Log everything of this run at debug level to a new file under `log_dir`; return its path.

    deferred (a command that only reads): the file is written only if `keep_log` is called, when the command
    fails. At most $KPATCH_LOG_KEEP run logs (default 20) are kept; 0 writes none. A log folder that cannot be
    written (full or read-only disk) costs the log, never the command.
    """
    global _RUN_LOG
    keep = log_keep()
    if keep == 0:
        return None
    path = log_dir / f"kpatch-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{command}.log"
    handler = _RunLog(path, keep, deferred=deferred)
    if not deferred and not handler.open():
        return None
    for name in ("kpatch", "git", "github", "urllib3"):  # kpatch's own, GitPython's, PyGithub's and its HTTP's
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if getattr(h, "_kpatch", False)]:
            logger.removeHandler(old)
            old.close()
        logger.addHandler(handler)
    _RUN_LOG = handler
    log.setLevel(logging.DEBUG)
    log.propagate = False
    return path


def keep_log() -> Path | None:
    """Write the run's log now if it was deferred (the command failed); its path, or None if there is none."""
    if _RUN_LOG is None or not _RUN_LOG.open():
        return None
    return _RUN_LOG.path
