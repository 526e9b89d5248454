"""`kpatch demo`: the whole pipeline on example upstreams kpatch builds itself, offline, in a folder of its own."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from kpatch.errors import UsageError
from kpatch.examples.demo import BackendChoice, DemoResult, OnStep, choose_backend, run_demo
from kpatch.output.ui import UI, setup_logging
from kpatch.project.workspace import default_cache_dir


def choose(backend: str, base_image: str | None) -> BackendChoice:
    """Which backend the demo builds and tests with, and why (docker needs an engine with a local base image)."""
    if backend == "local" and base_image:
        raise UsageError("--base-image goes with the docker backend, not --backend local")
    return choose_backend(backend, base_image)


def demo(folder: Path | None, ui: UI, choice: BackendChoice, *, keep: bool, on_step: OnStep) -> DemoResult:
    """Run the demo in `folder` (empty or new; kept) or in a temp folder that is removed unless `keep`."""
    if folder is not None:
        folder = folder.resolve()
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise UsageError(f"demo folder {folder} is not empty: give a new or empty --dir")
        folder.mkdir(parents=True, exist_ok=True)
        kept = True
    else:
        folder, kept = Path(tempfile.mkdtemp(prefix="kpatch-demo-")).resolve(), keep
    # The log goes to the usual cache, so the path an error names still exists after the folder is removed.
    ui.log_file = setup_logging(default_cache_dir() / "logs", "demo")
    ui.note(f"building example upstreams and stacks in {folder}")
    try:
        return run_demo(folder, ui, choice, kept=kept, on_step=on_step)
    finally:
        if not kept:
            shutil.rmtree(folder, ignore_errors=True)
