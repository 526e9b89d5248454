"""`kpatch nightly`: the whole night under one writer lock (no other kpatch writes while it runs)."""

from __future__ import annotations

import os

from kpatch.nightly import run
from kpatch.nightly.stages import Show
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace


def nightly(ws: Workspace, ui: UI, options: run.Options, show: Show) -> run.Night:
    run.check_report_dir(options.report_dir)
    tgt = run.target(ws, os.environ, options.dry_run)
    with ws.writer("nightly") as notes:
        ui.notes(notes)
        return run.night(ws, ui, options, tgt, os.environ, show)


def publish_saved(ws: Workspace, ui: UI, options: run.Options) -> run.Night:
    """`kpatch nightly --publish-saved`: GitHub hears of a night another job ran (see run.publish_saved)."""
    tgt = run.target(ws, os.environ, options.dry_run)
    with ws.writer("nightly") as notes:
        ui.notes(notes)
        return run.publish_saved(ws, ui, options, tgt, os.environ)
