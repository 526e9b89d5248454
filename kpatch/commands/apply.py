"""`kpatch apply`: every stack onto its base, kernels first; `--continue` / `--abort` after a conflict."""

from __future__ import annotations

from collections.abc import Mapping

from kpatch.engine import apply as engine
from kpatch.engine.apply import ApplyResult
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace


def apply(ws: Workspace, ui: UI, onto: Mapping[str, str], *, discard: bool) -> ApplyResult:
    with ws.writer("apply", ui):
        return engine.apply(ws, ui, onto, discard=discard)


def continue_apply(ws: Workspace, ui: UI) -> ApplyResult:
    with ws.writer("apply --continue", ui):
        return engine.continue_apply(ws, ui)


def abort_apply(ws: Workspace, ui: UI) -> tuple[str, ...]:
    with ws.writer("apply --abort", ui):
        return engine.abort_apply(ws, ui)
