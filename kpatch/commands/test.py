"""`kpatch test`: the upstreams' test suites in the build image, against the pair installed from its lock."""

from __future__ import annotations

from pathlib import Path

from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace
from kpatch.testing import run as testrun


def test(ws: Workspace, ui: UI, *, names: tuple[str, ...], devices: tuple[str, ...], timeout: float | None,
         lock: Path | None, reports: Path | None, backend: str = "docker") -> testrun.TestRun:
    """Run the suites; the lock defaults to dist/pylock.toml and the reports to reports/, next to kpatch.toml."""
    runner = testrun.run
    if backend == "local":
        from kpatch.testing.local import run_local as runner
    return runner(ws, ui, names=names, devices=devices, timeout=timeout,
                  lock=lock or ws.stack.root / "dist" / "pylock.toml", reports=reports or ws.stack.root / "reports")
