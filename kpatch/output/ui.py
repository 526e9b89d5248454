"""All output: the one rich Console (made on first use), progress bars, --json (the run's log file: runlog).

Off a terminal (pipes, CI logs, --json) lines go out as plain text and rich is not imported (kpatch.output.plainout).

Everything shown or logged passes through `shown`: no credential in a URL, no token, ever (`redact_text`), and no
control character a terminal would obey, whoever wrote the text (`printable`: an upstream's commit subject).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kpatch import __version__
from kpatch.output import plainout
from kpatch.output.printable import shown
from kpatch.output.redact import redact_text
from kpatch.output.runlog import keep_log

if TYPE_CHECKING:
    from rich.console import Console

JSON_VERSION = 2  # of the --json envelope and every command's result: +1 when a field is renamed or removed

log = logging.getLogger("kpatch")
log.addHandler(logging.NullHandler())  # before the log file exists nothing reaches logging's last resort
logging.raiseExceptions = False  # a full or read-only log folder never turns into tracebacks on stderr


def escape(text: str) -> str:
    """Text made safe for rich markup."""
    return plainout.escape(text)


class UI:
    """Human output on stdout (or JSON when asked), progress and notes on stderr, everything in the log."""

    def __init__(self, *, json_mode: bool = False, quiet: bool = False, verbose: bool = False,
                 command: str = "kpatch") -> None:
        self.json_mode = json_mode
        self.command = command  # named in the --json envelope
        self.quiet = quiet  # results and errors only: no notes, no progress
        self.log_file: Path | None = None
        _verbose(verbose)  # the log file's debug lines (git commands, timings) also on stderr

    @cached_property
    def out(self) -> Console | plainout.PlainConsole:
        return self._rich_out if plainout.is_terminal(sys.stdout) else plainout.PlainConsole(stderr=False)

    @cached_property
    def err(self) -> Console | plainout.PlainConsole:
        return self._rich_err if plainout.is_terminal(sys.stderr) else plainout.PlainConsole(stderr=True)

    @cached_property
    def _rich_out(self) -> Console:
        # imported where used: rich (~40 ms) only on a terminal
        from rich.console import Console

        # Piped output (CI logs, grep) gets wide lines instead of tables cut at 80 columns.
        return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200,
                       **_colour(sys.stdout))

    @cached_property
    def _rich_err(self) -> Console:
        from rich.console import Console

        return Console(stderr=True, highlight=False, soft_wrap=True, **_colour(sys.stderr))

    def note(self, message: str) -> None:
        """A step or remark for a person: stderr, and the log."""
        message = shown(message)
        log.info(message)
        if not self.quiet:
            self.err.print(message, markup=False)

    def notes(self, messages: Sequence[str]) -> None:
        for message in messages:
            self.note(message)

    def warn(self, message: str) -> None:
        message = shown(message)
        log.warning(message)
        self.err.print(f"[yellow]warning:[/] {escape(message)}")

    def error(self, message: str, exit_code: int, *, final: bool = True) -> None:
        """An `error:` line; the command's final one also goes to stdout as JSON under --json."""
        first, *rest = shown(message).splitlines() or ["unknown error"]
        log.error(first)
        self.err.print(f"[bold red]error:[/] {escape(first)}")
        if self.json_mode and final:  # the lines that follow the first (a failed build's last lines), the log
            self._envelope(None, {"message": first, "exit_code": int(exit_code), "detail": rest,
                                  "log": str(self.log_file) if self.log_file else None})

    def detail(self, text: str) -> None:
        """Lines that follow an error (a log tail, a hint): stderr, verbatim."""
        self.err.print(shown(text), markup=False)

    def line(self, text: str) -> None:
        self.out.print(shown(text))

    def plain(self, text: str) -> None:
        """A line printed as it is (no markup)."""
        self.out.print(shown(text), markup=False)

    def json(self, payload: Any) -> None:
        print(redact_text(json.dumps(to_jsonable(payload), indent=2, sort_keys=False)))

    def result(self, result: Any, *, exit_code: int = 0, message: str = "") -> None:
        """A command's one --json document: the envelope around its result; a non-zero `exit_code` also fills
        its error (`message`, and the run's log, kept now)."""
        error = None
        if exit_code:
            self.log_file = keep_log() if self.log_file else None
            error = {"message": redact_text(message), "exit_code": int(exit_code), "detail": [],
                     "log": str(self.log_file) if self.log_file else None}
        self._envelope(to_jsonable(result), error)

    def _envelope(self, result: Any, error: dict[str, Any] | None) -> None:
        """{"kpatch": schema version, "kpatch_version", "command", "ok", "result", "error"}: the shape of every
        --json output (docs/json.md; kpatch/commands/schemas/<command>.json)."""
        self.json({"kpatch": JSON_VERSION, "kpatch_version": __version__, "command": self.command,
                   "ok": error is None, "result": result, "error": error})

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        """A foldable log section under GitHub Actions (`::group::`), nothing elsewhere; in the log file too."""
        title = shown(title)
        log.info("-- %s", title)
        if os.environ.get("GITHUB_ACTIONS") != "true":
            yield
            return
        # Workflow commands go to stdout, as GitHub documents; under --json stdout is the JSON alone, and the
        # runner reads commands from stderr too.
        stream = sys.stderr if self.json_mode else sys.stdout
        sys.stderr.flush()
        print(f"::group::{title}", file=stream, flush=True)
        try:
            yield
        finally:
            sys.stderr.flush()
            print("::endgroup::", file=stream, flush=True)

    def step_summary(self, markdown: str) -> None:
        """Append markdown to the job summary ($GITHUB_STEP_SUMMARY) under GitHub Actions."""
        path = os.environ.get("GITHUB_STEP_SUMMARY")
        if os.environ.get("GITHUB_ACTIONS") != "true" or not path:
            return
        try:
            with Path(path).open("a", encoding="utf-8") as summary:
                summary.write(shown(markdown).rstrip("\n") + "\n\n")
        except OSError as err:
            self.warn(f"cannot append to the job summary {path}: {err.strerror}")

    @contextmanager
    def progress(self, description: str, total: int) -> Iterator[Callable[[int], None]]:
        """A progress bar (only on a terminal) whose callback takes the number of steps done so far."""
        description = shown(description)
        if self.quiet or self.json_mode or not self.err.is_terminal:
            self.note(description)  # CI logs and pipes get the step as a plain line
            yield lambda _done: None
            return
        log.info("%s (%d steps)", description, total)
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=self._rich_err, transient=True) as bar:
            task = bar.add_task(description, total=total)
            yield lambda done: bar.update(task, completed=done)


def _colour(stream: Any) -> dict[str, Any]:
    """No escape codes at all (colour, bold, links) when NO_COLOR is set (no-color.org) or `stream` is no terminal,
    unless FORCE_COLOR is (force-color.org: colour on pipes too); NO_COLOR wins over FORCE_COLOR. rich alone would
    keep bold under NO_COLOR."""
    if os.environ.get("NO_COLOR"):
        return {"color_system": None, "force_terminal": False}
    if os.environ.get("FORCE_COLOR"):
        return {"force_terminal": True, "color_system": "standard"}
    if not _is_tty(stream):
        return {"color_system": None, "force_terminal": False}
    return {}


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream (click's test runner)
        return False


class _DebugToStderr(logging.Handler):
    """--verbose: kpatch's debug log lines (git commands, docker steps, timings) on stderr as they come.

    Installed once; each new UI turns it on or off, so one verbose command does not make the next one verbose.
    """

    enabled = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.enabled and record.levelno < logging.INFO:  # notes and warnings are printed already
            sys.stderr.write(shown(f"debug: {record.name}: {record.getMessage()}") + "\n")


_DEBUG = _DebugToStderr()


def _verbose(on: bool) -> None:
    _DebugToStderr.enabled = on
    if on and _DEBUG not in log.handlers:
        log.addHandler(_DEBUG)
        log.setLevel(logging.DEBUG)


def columns(rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    """Rows as aligned text columns (two spaces apart), without trailing spaces."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [(indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))).rstrip()
            for row in rows]


def count(number: int, noun: str, plural: str | None = None) -> str:
    """`1 commit`, `2 commits`: a number and its noun, singular or plural as the number says."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def article(word: str) -> str:
    """`a rebase`, `an apply`."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def styled_columns(rows: Sequence[Sequence[str]], styles: Sequence[str | None], column: int = 0,
                   indent: str = "") -> list[str]:
    """Rows as `columns` lays them out (no trailing spaces), as markup: each row's cell `column` in its style
    (None: plain), every other cell escaped."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))] if rows else []
    lines = []
    for row, style in zip(rows, styles, strict=True):
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        text = "  ".join(cells).rstrip()
        start = sum(len(c) + 2 for c in cells[:column])
        cell = text[start:start + len(row[column])]
        styled = f"[{style}]{escape(cell)}[/]" if style and cell else escape(cell)
        lines.append(indent + escape(text[:start]) + styled + escape(text[start + len(cell):]))
    return lines


class _Activity:
    def __init__(self, ui: UI, description: str) -> None:
        self.ui, self.description, self.status = ui, description, None
        self.last = ""

    def __call__(self, line: str) -> None:
        line = shown(line)
        log.debug("%s | %s", self.description, line)
        self.last = line
        if self.status is not None:
            room = max(20, self.ui._rich_err.width - len(self.description) - 6)  # the spinner, ": ", a margin
            self.status.update(f"{self.description}: {escape(tail_words(line, room))}")

    def heartbeat(self, interval: float, stop: threading.Event) -> None:
        """Off a terminal (CI logs): a line every `interval` seconds, so a long quiet step is seen to be alive;
        the first one sooner (a third of it, 10 s at most: a 30 s silence reads as a hang)."""
        started = time.monotonic()
        wait = min(interval / 3, 10.0)
        while not stop.wait(wait):
            last = f"; last line: {tail_words(self.last, 120)}" if self.last.strip() else ""
            self.ui.note(f"{self.description}: still running after {time.monotonic() - started:.0f} s{last}")
            wait = interval


def tail_words(line: str, room: int) -> str:
    """The end of `line` in at most `room` characters, cut between words (`…` where it was cut), never mid-word
    unless one word alone is longer than the room."""
    line = line.strip()
    if len(line) <= room:
        return line
    cut = line[len(line) - room + 1:]
    space = cut.find(" ")
    return "…" + (cut[space + 1:] if 0 <= space < len(cut) - 1 else cut)


def heartbeat_interval() -> float:
    """Seconds between heartbeat lines off a terminal: KPATCH_HEARTBEAT (default 30; 0 turns them off)."""
    try:
        return max(0.0, float(os.environ.get("KPATCH_HEARTBEAT", "30")))
    except ValueError:
        return 30.0


@contextmanager
def activity(ui: UI, description: str) -> Iterator[Callable[[str], None]]:
    """A spinner showing the latest line of a long step (on a terminal), a heartbeat line at a steady interval
    off one; every line goes to the log file."""
    ui.note(description)
    reporter = _Activity(ui, description)
    if ui.quiet or ui.json_mode or not ui.err.is_terminal:
        interval = heartbeat_interval()
        if ui.quiet or not interval:
            yield reporter
            return
        stop = threading.Event()
        beat = threading.Thread(target=reporter.heartbeat, args=(interval, stop), daemon=True)
        beat.start()
        try:
            yield reporter
        finally:
            stop.set()
            beat.join()
        return
    with ui._rich_err.status(description) as status:
        reporter.status = status  # type: ignore[assignment]
        yield reporter


def to_jsonable(value: Any) -> Any:
    """Dataclasses, enums and paths -> plain JSON values. A field's JSON name is its name, or its metadata's
    "json" (`klass` is `class`)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.metadata.get("json", f.name): to_jsonable(getattr(value, f.name))
                for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    return value
