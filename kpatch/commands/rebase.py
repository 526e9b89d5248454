"""`kpatch rebase`: all stacks onto their upstreams' new heads, one transaction; `--continue` / `--abort`."""

from __future__ import annotations

from collections.abc import Mapping

from kpatch.engine import rebase as engine
from kpatch.engine.rebase import RebaseResult
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace


def rebase(ws: Workspace, ui: UI, onto: Mapping[str, str], *, force: bool, discard: bool) -> RebaseResult:
    with ws.writer("rebase", ui):
        return engine.rebase(ws, ui, onto, force=force, discard=discard)


def continue_rebase(ws: Workspace, ui: UI) -> RebaseResult:
    with ws.writer("rebase --continue", ui):
        return engine.continue_rebase(ws, ui)


def abort_rebase(ws: Workspace, ui: UI) -> tuple[str, ...]:
    with ws.writer("rebase --abort", ui):
        return engine.abort_rebase(ws, ui)
