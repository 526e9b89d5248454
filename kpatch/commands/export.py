"""`kpatch export`: worktree commits -> patch files and series (byte-stable); `--check` writes nothing."""

from __future__ import annotations

from collections.abc import Sequence

from kpatch.engine import export as engine
from kpatch.engine.export import ExportResult
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace


def export(ws: Workspace, ui: UI, names: Sequence[str], *, check: bool) -> ExportResult:
    if check:  # a reader: no lock, like status
        return engine.export(ws, ui, names, check=True)
    with ws.writer("export", ui):
        return engine.export(ws, ui, names, check=False)


def continue_export(ws: Workspace, ui: UI) -> ExportResult:
    with ws.writer("export --continue", ui):
        return engine.continue_export(ws, ui)


def abort_export(ws: Workspace, ui: UI) -> None:
    with ws.writer("export --abort", ui):
        engine.abort_export(ws, ui)
