"""Which backend runs the test suites: the build image (docker, `testing.run`) or this host (`testing.local`).

Apart from both so that neither imports the other (local runs the suites with run's parts)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kpatch.errors import KpatchError
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace
from kpatch.testing import env as testenv
from kpatch.testing.local import run_local
from kpatch.testing.run import TestRun, run


def run_suites(ws: Workspace, ui: UI, *, names: tuple[str, ...] = (), devices: tuple[str, ...] = (),
               timeout: float | None = None, lock: Path | None = None, reports: Path | None = None,
               backend: str = "auto", tests: Mapping[str, tuple[str, ...]] | None = None) -> TestRun:
    """The suites in the build image (docker) or on this host (local); the lock defaults to dist/pylock.toml and
    the reports to reports/, next to kpatch.toml. `tests` (upstream -> test files, in order) reaches a suite's
    command as $KPATCH_TESTS (test selection)."""
    lock = lock or ws.dist_dir / "pylock.toml"
    if backend == "auto":
        backend = _backend_of(ui, lock)
    runner = run_local if backend == "local" else run
    return runner(ws, ui, names=names, devices=devices, timeout=timeout, lock=lock,
                  reports=reports or ws.reports_dir, tests=tests or {})


def _backend_of(ui: UI, lock: Path) -> str:
    """--backend auto: where the pair of `lock` was built (on this host: local; in an image: docker), said as a
    note; a lock that cannot be read goes to the docker path, whose checks name what is wrong with it."""
    try:
        pair = testenv.read_pair(lock)
    except KpatchError:
        return "docker"
    if not pair.image_digest or pair.image_digest.startswith("local:"):
        ui.note(f"backend: local, on this host (the pair in {lock.name} was built on this host)")
        return "local"
    ui.note(f"backend: docker (the pair in {lock.name} was built in the image {pair.image})")
    return "docker"
