"""`kpatch report`: the carry dashboard from the history, as numbers and, with --html, as a page; on a project with
release lines, every line that has a history, one board each, on one page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kpatch.config.model import Stack
from kpatch.dashboard import history, page, record
from kpatch.dashboard.summary import Dashboard, summarise
from kpatch.errors import UsageError
from kpatch.project.places import line_reports_dir


@dataclass(frozen=True)
class LineBoard:
    """A release line's board (the line's own carry history)."""

    line: str
    board: Dashboard


@dataclass(frozen=True)
class Written:
    board: Dashboard  # the first line's (main, or --line's)
    page: Path | None  # index.html, when --html was given
    line: str = "main"  # the line `board` is
    lines: tuple[str, ...] = ("main",)  # every line the result (and the page) holds, `line` first
    others: tuple[LineBoard, ...] = ()  # the boards of the lines after the first, in kpatch.toml's order


def report(source: Path, html: Path | None, title: str, *, line: str = "main",
           others: Sequence[tuple[str, Path]] = ()) -> Written:
    """Read the history (it must exist: an empty page hides a wrong path), and the other lines' (`others`, each
    there), draw the page if asked: one page, a selector between the lines when there are several."""
    if not source.is_file():
        raise UsageError(f"no carry history at {source} (each 'kpatch nightly' and 'kpatch rebase' appends to it; "
                         "another one: --history FILE)")
    if html is not None and html.exists() and not html.is_dir():
        raise UsageError(f"--html {html}: a file is there, not a folder")
    board = summarise(history.read(source), str(source))
    more = tuple(LineBoard(name, summarise(history.read(path), str(path))) for name, path in others)
    boards = [LineBoard(line, board), *more]
    drawn = page.write(html, [(b.line, b.board) for b in boards], title) if html is not None else None
    return Written(board=board, page=drawn, line=line, lines=tuple(b.line for b in boards), others=more)


def with_history(stack: Stack, main_history: Path) -> tuple[str, Path, list[tuple[str, Path]]]:
    """Every line of kpatch.toml whose carry history is there, in its order (main first): the first line and its
    history, and the others'. A file already found (main's [dashboard] history naming a line's own) is shown
    once. No line has one: main's, which `report` then names as missing."""
    found: list[tuple[str, Path]] = []
    for name in stack.line_names:
        path = main_history if name == stack.line else \
            record.location(stack.on_line(name), line_reports_dir(stack.root, name) / "nightly")
        if path.is_file() and all(path.resolve() != seen.resolve() for _, seen in found):
            found.append((name, path))
    if not found:
        return stack.line, main_history, []
    (first, path), *others = found
    return first, path, others
