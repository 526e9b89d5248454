"""`kpatch status`: pins, mirror heads, commits behind, each patch and its state. Reads only, takes no lock."""

from __future__ import annotations

from kpatch.engine import status as engine
from kpatch.engine.status import StatusResult
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace


def status(ws: Workspace, ui: UI) -> StatusResult:
    return engine.status(ws, ui)
