"""`kpatch report`: the carry dashboard from the history, as numbers and, with --html, as a page."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kpatch.dashboard import history, page
from kpatch.dashboard.summary import Dashboard, summarise
from kpatch.errors import UsageError


@dataclass(frozen=True)
class Written:
    board: Dashboard
    page: Path | None  # index.html, when --html was given


def report(source: Path, html: Path | None, title: str) -> Written:
    """Read the history (it must exist: an empty page hides a wrong path), draw the page if asked."""
    if not source.is_file():
        raise UsageError(f"no carry history at {source} (each 'kpatch nightly' and 'kpatch rebase' appends to it; "
                         "another one: --history FILE)")
    if html is not None and html.exists() and not html.is_dir():
        raise UsageError(f"--html {html}: a file is there, not a folder")
    board = summarise(history.read(source), str(source))
    return Written(board=board, page=page.write(html, board, title) if html is not None else None)
