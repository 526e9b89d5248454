"""One step of the search on a local worker: `python -m kpatch.nightly.worker SPEC` (kpatch/nightly/workers.py
starts it). SPEC (spec.json) names the worker's copy of the project, the night's cache, the combination to run and
where its result goes; the step is the night's own chain (scroll.chain), run under the writer lock the night holds
for it. Exit 0 once the result is written, whatever the step's verdict; anything else is the worker's failure."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from kpatch import config
from kpatch.errors import KpatchError
from kpatch.nightly import scroll, workers
from kpatch.nightly.stages import Settings
from kpatch.output.ui import UI
from kpatch.project import workspace
from kpatch.project.workspace import Workspace


def run(spec_path: Path) -> int:
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    if spec.get("version") != workers.SPEC_VERSION:
        print(f"error: {spec_path}: spec version {spec.get('version')!r}, this kpatch reads "
              f"{workers.SPEC_VERSION}", file=sys.stderr)
        return 2
    stack = config.load(Path(spec["project"]) / config.CONFIG_NAME)
    ws = Workspace.create(stack, Path(spec["cache"]), Path(spec["workdir"]))
    ui = UI(command="nightly")
    # imported where used: a worker process loads the night's runner when it runs a step
    from kpatch.nightly.run import target

    target(ws, os.environ, dry_run=True)  # its token (the rebase asks GitHub about Upstream-PRs) never in a log
    given = spec["settings"]
    settings = Settings(backend=given["backend"], image=given["image"], base_image=given["base_image"],
                        devices=tuple(given["devices"]), timeout=given["timeout"])
    workspace._HELD.add(ws.kpatch_dir)  # the night holds the writer locks (its project's and the cache's) for us
    began = time.monotonic()
    attempt = scroll.chain(ws, ui, settings, lambda _stage, _result: None, spec["onto"], spec["bases"])
    workers.write_result(Path(spec["result"]), attempt, time.monotonic() - began, Path(spec["lock"]))
    ui.note(f"step result: {attempt.result.value} ({attempt.summary}) -> {spec['result']}")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m kpatch.nightly.worker SPEC", file=sys.stderr)
        return 2
    try:
        return run(Path(argv[1]))
    except KpatchError as err:
        print(f"error: {err}", file=sys.stderr)
        return int(err.exit_code)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
