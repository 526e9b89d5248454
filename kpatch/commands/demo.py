"""`kpatch demo`: the everyday pipeline on example upstreams kpatch builds itself, fully offline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kpatch import config
from kpatch.commands.apply import apply
from kpatch.commands.export import export
from kpatch.commands.status import status
from kpatch.engine.apply import ApplyResult
from kpatch.engine.export import ExportResult
from kpatch.engine.status import StatusResult
from kpatch.errors import UsageError
from kpatch.examples import make_example_project
from kpatch.ui import UI, setup_logging
from kpatch.workspace import Workspace


@dataclass(frozen=True)
class DemoResult:
    folder: Path
    applied: ApplyResult
    status: StatusResult
    export_check: ExportResult

    @property
    def ok(self) -> bool:
        return self.applied.conflict is None and not self.export_check.stale


def demo(folder: Path, ui: UI) -> DemoResult:
    """Build example upstreams and stacks in `folder`, then apply, report and check the export round trip."""
    if folder.exists() and any(folder.iterdir()):
        raise UsageError(f"demo folder {folder} is not empty")
    folder.mkdir(parents=True, exist_ok=True)
    ui.note(f"building example upstreams and stacks in {folder}")
    example = make_example_project(folder)
    ws = Workspace.create(config.load(example.root / config.CONFIG_NAME), folder / "cache", None)
    ui.log_file = setup_logging(ws.log_dir, "demo")
    applied = apply(ws, ui, {}, discard=False)
    return DemoResult(folder=folder, applied=applied, status=status(ws, ui),
                      export_check=export(ws, ui, (), check=True))
