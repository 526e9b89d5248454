"""All output: the one rich Console, progress bars, --json, and the run's log file."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

log = logging.getLogger("kpatch")


class UI:
    """Human output on stdout (or JSON when asked), progress and notes on stderr, everything in the log."""

    def __init__(self, *, json_mode: bool = False, quiet: bool = False) -> None:
        self.json_mode = json_mode
        self.quiet = quiet
        # Piped output (CI logs, grep) gets wide lines instead of tables cut at 80 columns.
        self.out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)
        self.log_file: Path | None = None

    def note(self, message: str) -> None:
        """A step or remark for a person: stderr, and the log."""
        log.info(message)
        if not self.quiet:
            self.err.print(message, markup=False)

    def warn(self, message: str) -> None:
        log.warning(message)
        self.err.print(f"[yellow]warning:[/] {escape(message)}")

    def error(self, message: str) -> None:
        log.error(message)
        self.err.print(f"[bold red]error:[/] {escape(message)}")

    def table(self, table: Any) -> None:
        self.out.print(table)

    def line(self, text: str) -> None:
        self.out.print(text)

    def json(self, payload: Any) -> None:
        print(json.dumps(to_jsonable(payload), indent=2, sort_keys=False))

    @contextmanager
    def progress(self, description: str, total: int) -> Iterator[Callable[[int], None]]:
        """A progress bar (only on a terminal) whose callback takes the number of steps done so far."""
        if self.quiet or self.json_mode or not self.err.is_terminal:
            self.note(description)  # CI logs and pipes get the step as a plain line
            yield lambda done: None
            return
        log.info("%s (%d steps)", description, total)
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=self.err, transient=True) as bar:
            task = bar.add_task(description, total=total)
            yield lambda done: bar.update(task, completed=done)


class _Activity:
    def __init__(self, ui: UI, description: str) -> None:
        self.ui, self.description, self.status = ui, description, None

    def __call__(self, line: str) -> None:
        log.debug("%s | %s", self.description, line)
        if self.status is not None:
            self.status.update(f"{self.description}: {escape(line[-100:])}")


@contextmanager
def activity(ui: UI, description: str) -> Iterator[Callable[[str], None]]:
    """A spinner showing the latest line of a long step (on a terminal); every line goes to the log file."""
    ui.note(description)
    reporter = _Activity(ui, description)
    if ui.quiet or ui.json_mode or not ui.err.is_terminal:
        yield reporter
        return
    with ui.err.status(description) as status:
        reporter.status = status  # type: ignore[assignment]
        yield reporter


def setup_logging(log_dir: Path, command: str) -> Path:
    """Log everything of this run at debug level to a new file under `log_dir`; return its path."""
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / f"kpatch-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{command}.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("kpatch")
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    root.propagate = False
    return path


def to_jsonable(value: Any) -> Any:
    """Dataclasses, enums and paths -> plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    return value
