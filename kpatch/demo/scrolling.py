"""`kpatch demo --scroll`: a red night scrolls to the last green upstream commit and names the culprit.

The example project pinned at its upstreams' heads and applied; then the app upstream moves by five commits, the
third of which plants a test break (a sampler test that can never pass); then one real night (`kpatch nightly
--dry-run --no-publish`, on the demo's backend): the heads are red at the test stage, the search bisects the five
commits (two steps: the second commit green, the third red), proposes the second as the app's pin and names the
third as the culprit. It is the main demo's "upstream moves" story for a test break, in a mode of its own: the
search builds and tests the pair three times more than the main demo does (measured in docs/nightly.md).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from kpatch import config, forge
from kpatch.config.edit import with_new_bases
from kpatch.dashboard.night import Report, Scroll
from kpatch.demo.pipeline import BackendChoice, OnStep, Outcome, Step, Steps, StepsOutcome, _apply, in_folder
from kpatch.engine.apply import ApplyResult
from kpatch.examples.moves import APP_MAINTAINER, UpstreamMove
from kpatch.examples.upstreams import ExampleProject, commit, make_example_project
from kpatch.files import write_atomic
from kpatch.gitx import out
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace

BREAK_FILE = "tests/test_sampler.py"
BREAK = "def test_the_sampler_keeps_the_top_token():\n    assert sorted([3, 1, 2])[0] == 3, 'planted break'\n"
BREAK_SUBJECT = "Tighten the sampler"


@dataclass(frozen=True)
class ScrollResult(StepsOutcome):
    folder: Path
    kept: bool
    backend: BackendChoice
    steps: tuple[Step, ...]
    applied: ApplyResult | None
    moves: tuple[UpstreamMove, ...]
    outcome: str | None  # the night's: "failed" (the heads are red), or how else it ended
    summary: str | None  # the night's one line
    scroll: Scroll | None  # the search for the last green upstream commits
    report: Path | None  # the night's report.md
    seconds: float


def demo_scroll(folder: Path | None, ui: UI, choice: BackendChoice, *, keep: bool, on_step: OnStep,
                runners: int = 1) -> ScrollResult:
    """The scrolling demo in `folder` (empty or new; kept) or a temp folder removed unless `keep`; `runners` > 1:
    the search tries that many commits at once per round, on local worker processes."""

    def body(where: Path, kept: bool) -> ScrollResult:
        with forge.offline("the demo runs offline"):
            return run_scroll(where, ui, choice, kept=kept, on_step=on_step, runners=runners)

    return in_folder(folder, ui, keep=keep, body=body)


def run_scroll(folder: Path, ui: UI, choice: BackendChoice, *, kept: bool, on_step: OnStep,
               runners: int = 1) -> ScrollResult:
    started = time.monotonic()
    run = _Scroll(folder, ui, choice, on_step, runners)
    for name, body in (("example", run.example), ("apply", run.apply), ("upstream moves", run.moves),
                       ("nightly", run.nightly)):
        if not run.step(name, body):
            break
    night: Report | None = run.results.get("nightly")
    return ScrollResult(folder=folder, kept=kept, backend=choice, steps=tuple(run.steps),
                        applied=run.results.get("apply"), moves=run.results.get("upstream moves") or (),
                        outcome=night.outcome.value if night else None, summary=night.summary if night else None,
                        scroll=night.scroll if night else None, report=run.report if night else None,
                        seconds=round(time.monotonic() - started, 2))


class _Scroll(Steps):
    def __init__(self, folder: Path, ui: UI, choice: BackendChoice, on_step: OnStep, runners: int = 1) -> None:
        super().__init__(folder, ui, on_step)
        self.choice = choice
        self.runners = runners
        self.project: ExampleProject | None = None
        self.report = folder / "project" / "reports" / "nightly" / "report.md"

    @property
    def ws(self) -> Workspace:
        return Workspace.create(config.load(self._example().root / config.CONFIG_NAME), self.folder / "cache", None)

    def _example(self) -> ExampleProject:
        assert self.project is not None, "the example step runs first"
        return self.project

    def example(self) -> Outcome:
        self.project = make_example_project(self.folder)
        heads = {name: out(["rev-parse", "main"], path) for name, path in (("kernels", self.project.kernels),
                                                                            ("app", self.project.app))}
        toml = self.project.root / config.CONFIG_NAME
        write_atomic(toml, with_new_bases(toml, heads))  # the stacks pinned at today's heads
        return self.project, True, ("two upstreams with history, a project with a stack of 2 patches for each, "
                                    "pinned at the upstreams' heads")

    def apply(self) -> Outcome:
        return _apply(self.ws, self.ui)

    def moves(self) -> Outcome:
        app = self._example().app
        made = []
        for n, (files, subject) in enumerate([({"NEWS.txt": "entry 0\n"}, "News 0"),
                                              ({"NEWS.txt": "entry 1\n"}, "News 1"),
                                              ({BREAK_FILE: BREAK}, BREAK_SUBJECT),
                                              ({"NEWS.txt": "entry 2\n"}, "News 2"),
                                              ({"NEWS.txt": "entry 3\n"}, "News 3")]):
            sha = commit(app, files, subject, 2000 + n, APP_MAINTAINER)
            made.append(UpstreamMove("app", sha, subject, "plants a test break" if files.get(BREAK_FILE) else
                                     "harmless"))
        return tuple(made), True, "new upstream commits: app +5, the third plants a test break"

    def nightly(self) -> Outcome:
        # imported where used: the nightly loads for demo --scroll only
        from kpatch.nightly import run
        from kpatch.nightly.scroll import Limits
        from kpatch.nightly.stages import Settings

        ws = self.ws
        settings = Settings(backend=self.choice.backend.value, base_image=self.choice.base_image)
        options = run.Options(report_dir=self.report.parent, dry_run=True, settings=settings, publish=False,
                              limits=Limits(max_steps=ws.stack.max_steps, budget=ws.stack.budget,
                                            runners=self.runners))
        with ws.writer("nightly") as notes:
            self.ui.notes(notes)
            tgt = run.target(ws, os.environ, dry_run=True)
            report = run.night(ws, self.ui, options, tgt, os.environ, lambda _stage, _result: None).report
        return report, _scrolled(report), scroll_summary(report)


def _scrolled(report: Report) -> bool:
    """The demo's point: the heads red, the search complete, a commit past the pin proposed, a culprit named."""
    found = report.scroll
    return bool(found and found.complete and found.advanced and found.culprit)


def scroll_summary(report: Report) -> str:
    """One line: the heads' verdict, then the last green commit and the culprit the search found."""
    found = report.scroll
    if found is None:
        return f"the night {report.outcome.value} without a search: {report.summary}"
    rounds = f" in {found.rounds} round(s) of up to {found.runners}" if found.runners > 1 else ""
    steps = f"{len(found.steps)} steps{rounds}, {found.seconds:.1f} s"
    if found.culprit is None:
        return f"heads red at {report.failure.stage.value if report.failure else '?'}; no culprit found ({steps})"
    green = next(p.commit for p in found.last_green if p.upstream == found.culprit.upstream)
    subjects = {s.commit: s.subject for s in found.steps}
    culprit = found.culprit
    return (f"heads red at {culprit.stage.value}; scrolled {culprit.upstream} to the last green commit "
            f"{green[:12]} \"{subjects.get(green, '?')}\", culprit {culprit.commit[:12]} \"{culprit.subject}\" "
            f"({steps})")
