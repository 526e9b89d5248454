"""Three simulated nights of the real nightly on the example project: the carry history a dashboard is drawn from.

Night 1: the upstreams gain harmless commits; everything applies, builds and tests. Night 2: the kernels upstream
reworks the line the kernels' first patch extends: the night stops at rebase with a conflict and its culprit; a
person aborts the rebase and upstream reverts the rework. Night 3: the demo's moves (the kernels merge that first
patch, dropped as upstream; the app rewrites a line, resolved by the recorded resolution); it passes again.

Each night is `kpatch nightly --no-publish` (this host's backend, offline); all three run today, so each night's
records are moved back to their own day afterwards (two days ago, yesterday, today): the file then holds what
three real nights would have left.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from kpatch import config, forge
from kpatch.dashboard import history
from kpatch.dashboard.night import Outcome
from kpatch.engine.rebase import abort_rebase
from kpatch.examples.moves import move_upstreams, ship_resolution
from kpatch.examples.upstreams import KERNEL_FILES, ExampleProject, commit, make_example_project
from kpatch.files import write_atomic
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace

BINDINGS = "csrc/torch_bindings.cpp"
_SILU = '  ops.impl("silu_and_mul", torch::kXPU, &silu_and_mul);\n}'
REWORKED = KERNEL_FILES[BINDINGS].replace(_SILU, '  ops.impl("silu_and_mul", torch::kXPU, &silu_and_mul_v2);\n'
                                                 '  ops.def("gelu(Tensor! out, Tensor input) -> ()");\n}')
REWORK_SUBJECT = "Rework the silu registration"


@dataclass(frozen=True)
class Nights:
    project: ExampleProject
    history: Path
    reports: Path  # the last night's report.md and report.json
    outcomes: tuple[Outcome, ...]


def simulate(folder: Path, ui: UI) -> Nights:
    """Build the example project in `folder` (empty) and run three nights on it; the history is in reports/."""
    example = make_example_project(folder)
    ship_resolution(example)
    reports = example.root / "reports" / "nightly"
    path = reports / history.NAME
    today = datetime.now(UTC).date()
    when = 3000
    outcomes = []
    with forge.offline("the simulated nights run offline"):
        for night in range(3):
            if night == 0:
                for n in range(3):
                    commit(example.kernels, {"NEWS.txt": f"entry {n}\n"}, f"News {n}", (when := when + 1))
                    commit(example.app, {"NEWS.txt": f"entry {n}\n"}, f"Docs {n}", (when := when + 1))
            elif night == 1:
                commit(example.kernels, {"NEWS.txt": "entry 3\n"}, "News 3", (when := when + 1))
                commit(example.kernels, {BINDINGS: REWORKED}, REWORK_SUBJECT, (when := when + 1))
                commit(example.kernels, {"NEWS.txt": "entry 4\n"}, "News 4", (when := when + 1))
            else:
                with _workspace(example, folder) as ws:
                    abort_rebase(ws, ui)  # the person's answer to night 2 ...
                revert = f'Revert "{REWORK_SUBJECT}"'
                commit(example.kernels, {BINDINGS: KERNEL_FILES[BINDINGS]}, revert, (when := when + 1))  # upstream's
                move_upstreams(example)
            outcomes.append(_night(example, folder, ui, reports))
            _redate(path, today - timedelta(days=2 - night))
    return Nights(project=example, history=path, reports=reports, outcomes=tuple(outcomes))


def _night(example: ExampleProject, folder: Path, ui: UI, reports: Path) -> Outcome:
    # imported where used: the nightly loads for the demo's simulated nights only
    from kpatch.nightly import run
    from kpatch.nightly.stages import Settings

    with _workspace(example, folder) as ws:
        tgt = run.target(ws, os.environ, dry_run=True)
        options = run.Options(report_dir=reports, dry_run=True, settings=Settings(backend="local"), publish=False)
        with ws.writer("nightly") as notes:
            ui.notes(notes)
            return run.night(ws, ui, options, tgt, os.environ, lambda _stage, _result: None).report.outcome


@contextmanager
def _workspace(example: ExampleProject, folder: Path) -> Iterator[Workspace]:
    yield Workspace.create(config.load(example.root / config.CONFIG_NAME), folder / "cache", None)


def _redate(path: Path, day: date) -> None:
    """Move the records of the night that just ran (today's) to `day`, keeping their time of day."""
    records = [_from_today(r, day.isoformat()) for r in history.read_records(path)]
    write_atomic(path, "".join(history.to_line(r) + "\n" for r in records).encode("utf-8"))


def _from_today(record: history.Record, day: str) -> history.Record:
    today = datetime.now(UTC).date().isoformat()
    if record.date != today:
        return record
    return replace(record, date=day, started=day + record.started[10:])

