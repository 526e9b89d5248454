"""Scrolling: when the chain (rebase, build, verify, test) is red at the upstream heads, find the LAST upstream
commit at which it is green, so the stacks never fall further behind than the first break.

Per upstream, in kpatch.toml's order (kernels first), the others held at their pins (the pinned base, or the last
green commit an earlier upstream's search found), search the first-parent commits of base..head in rounds: each
round tries `runners` commits at once (kway.plan; 1: a bisection, log2 steps), each step a whole chain through the
night's own stage functions, in this process or on local worker processes (workers.py); the build cache makes
unchanged wheels hits. A red test step is retried once at the same commit: passing then, it is FLAKY (green,
reported, never a culprit).

The steps rebase the project's own files; each starts from the files as they were before the night (kept in
scratch, under .kpatch/), and the end leaves them as a night leaves them: rebased onto the last green commits
(with their lock kept) when the search moved past the pins, else onto the heads, as a failed night does.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from kpatch.dashboard.night import (
    Failure,
    Report,
    Scroll,
    Selection,
    Stage,
    StageRun,
    StageStatus,
    StepResult,
    Suite,
)
from kpatch.engine.rebase import abort_rebase
from kpatch.files import write_atomic
from kpatch.nightly import stages
from kpatch.nightly.stages import TAIL, Settings, Show, timed
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace

MAX_STEPS = 8  # [nightly] max-steps when kpatch.toml does not say
SCRATCH = "scroll"  # under .kpatch/: the files as they were before the night
KEPT_TOML, KEPT_STATE = "kpatch.toml", "state"  # in a kept copy (Saved.keep), beside the numbered trees


@dataclass(frozen=True)
class Limits:
    max_steps: int = MAX_STEPS
    budget: float | None = None  # seconds of wall clock for the whole search; None: none
    runners: int = 1  # commits a round tries at once ([nightly] runners, --runners); 1: a bisection


@dataclass(frozen=True)
class Attempt:
    """One run of the chain at one combination of upstream commits."""

    result: StepResult
    stage: Stage | None  # the failing stage (red), the retried test stage (flaky), None (green)
    summary: str
    failure: Failure | None
    suites: tuple[Suite, ...]
    flaky: tuple[str, ...]
    lock: bytes | None  # the lock the build wrote (green): kept when this is the proposed combination
    selection: tuple[Selection, ...] = ()  # test selection: what ran first, and why


class Saved:
    """kpatch.toml, patches/ (each stack's folder and .rerere) and the run state as they were before the night,
    copied to scratch; `restore` puts them back byte for byte."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.folder = ws.kpatch_dir / SCRATCH
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        self.toml = ws.stack.path.read_bytes()
        self.state = ws.state_bytes()
        self.trees = [u.patches for u in ws.stack.upstreams] + [ws.stack.resolutions]
        for n, tree in enumerate(self.trees):
            if tree.is_dir():
                shutil.copytree(tree, self.folder / str(n), symlinks=True)

    def restore(self) -> None:
        write_atomic(self.ws.stack.path, self.toml)
        self.ws.put_state_bytes(self.state)
        for n, tree in enumerate(self.trees):
            shutil.rmtree(tree, ignore_errors=True)
            if (self.folder / str(n)).is_dir():
                shutil.copytree(self.folder / str(n), tree, symlinks=True)

    def restore_into(self, root: Path) -> None:
        """The same files, as they were, into a copy of the project at `root` (a local worker's)."""
        top = self.ws.stack.root
        write_atomic(root / self.ws.stack.path.relative_to(top), self.toml)
        state = root / self.ws.state_file.relative_to(top)
        if self.state is None:
            state.unlink(missing_ok=True)
        else:
            state.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(state, self.state, durable=False)
        for n, tree in enumerate(self.trees):
            if not tree.is_relative_to(top):
                continue
            there = root / tree.relative_to(top)
            shutil.rmtree(there, ignore_errors=True)
            if (self.folder / str(n)).is_dir():
                shutil.copytree(self.folder / str(n), there, symlinks=True)

    def keep(self, folder: Path) -> None:
        """A copy of these files in `folder`, whole (the CI's plan carries it to the jobs of its matrix)."""
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(self.folder, folder, symlinks=True, ignore=shutil.ignore_patterns("worker-*"))
        write_atomic(folder / KEPT_TOML, self.toml, durable=False)
        if self.state is not None:
            write_atomic(folder / KEPT_STATE, self.state, durable=False)

    @classmethod
    def kept(cls, ws: Workspace, folder: Path) -> Saved:
        """The files `keep` put in `folder`, as the Saved of the night that kept them (for the project `ws`)."""
        saved = cls.__new__(cls)
        saved.ws, saved.folder = ws, folder
        saved.toml = (folder / KEPT_TOML).read_bytes()
        saved.state = (folder / KEPT_STATE).read_bytes() if (folder / KEPT_STATE).is_file() else None
        saved.trees = [u.patches for u in ws.stack.upstreams] + [ws.stack.resolutions]
        return saved

    def drop(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def chain(ws: Workspace, ui: UI, settings: Settings, show: Show, onto: Mapping[str, str],
          bases: Mapping[str, str] | None = None) -> Attempt:
    """The night's stages at `onto` (upstream -> commit), stopping at the first that fails; a failing test
    stage is run once more (same lock) to tell a flaky test from a break. `bases` (upstream -> the pinned base)
    gives the upstream diffs test selection orders the tests by."""
    diffs = {name: (base, onto[name]) for name, base in (bases or {}).items() if name in onto and onto[name] != base}
    try:
        rebased = timed(ui, Stage.REBASE, lambda: stages.rebase(ws, ui, show, onto=onto, discard=True))
        if rebased.run.status is StageStatus.FAILED:
            return _red(rebased.run, rebased.failure, None)
        built = timed(ui, Stage.BUILD, lambda: stages.build(ws, ui, show, settings))
        if built.run.status is StageStatus.FAILED or built.found is None:
            return _red(built.run, built.failure, None)
        lock = built.found.lock
        verified = timed(ui, Stage.VERIFY, lambda: stages.verify(ws, ui, show, lock))
        if verified.run.status is StageStatus.FAILED:
            return _red(verified.run, verified.failure, None)
        selections: list[Selection] = []
        tested = timed(ui, Stage.TEST, lambda: stages.test(ws, ui, show, settings, lock,
                                                           stages.select_tests(ws, ui, lock, diffs, selections)))
        suites = tested.found or stages.Tested(())
        if tested.run.status is not StageStatus.FAILED:
            return Attempt(StepResult.GREEN, None, "the whole chain passed", None, suites.suites, (), _lock(lock),
                           tuple(selections))
        assert tested.failure is not None
        retried = retry_test(ws, ui, show, settings, lock, suites, tested.failure, diffs)
        if retried.flaky is not None:
            return Attempt(StepResult.FLAKY, Stage.TEST, f"flaky: {', '.join(retried.flaky)} passed on the retry",
                           None, retried.tested.suites, retried.flaky, _lock(lock), tuple(selections))
        return _red(tested.run, retried.failure, retried.tested, retried.selections)
    finally:
        _abort_in_progress(ws)


def _red(run: StageRun, failure: Failure | None, tested: stages.Tested | None,
         selections: Sequence[Selection] = ()) -> Attempt:
    """A step whose stage `run` failed: its failure with the failing suite's log tail (when it has none)."""
    if failure is not None and not failure.log_tail:
        failure = replace(failure, log_tail=_tail(tested.log if tested else None))
    return Attempt(StepResult.RED, run.stage, run.summary, failure, tested.suites if tested else (), (), None,
                   tuple(selections))


@dataclass(frozen=True)
class Retried:
    """The failed test stage run once more at the same commit: the tests that failed and then passed (None: it
    failed again), the suites and failure the night keeps (the first run's when it failed again: the retry
    compares with that run's results, saved as the last ones, so it would call nothing newly failing)."""

    flaky: tuple[str, ...] | None
    tested: stages.Tested
    failure: Failure | None
    selections: tuple[Selection, ...] = ()  # what the retry's test selection chose


def retry_test(ws: Workspace, ui: UI, show: Show, settings: Settings, lock: Path, tested: stages.Tested,
               failure: Failure, diffs: Mapping[str, tuple[str, str]] | None = None) -> Retried:
    """Run the failed test stage once more against the same lock (see `Retried`)."""
    failing = tuple(t.split(": ", 1)[0] for s in tested.suites for t in s.failing) or \
        tuple(s.upstream for s in tested.suites if s.outcome != "passed")
    selections: list[Selection] = []
    with ui.group("kpatch nightly: test (retry at the same commit)"):
        again = timed(ui, Stage.TEST, lambda: stages.test(ws, ui, show, settings, lock,
                                                          stages.select_tests(ws, ui, lock, diffs or {}, selections)))
    if again.run.status is StageStatus.FAILED:
        log = (again.found.log if again.found else None) or tested.log
        return Retried(None, replace(tested, log=log), failure, tuple(selections))
    ui.warn(f"flaky: {', '.join(failing)} failed, then passed on the retry")
    return Retried(failing or ("(a suite)",), again.found or tested, None, tuple(selections))


@dataclass(frozen=True)
class Trial:
    """One step a round asks for: the chain with `upstream` at `commit`, every upstream at `onto`."""

    upstream: str
    commit: str
    onto: Mapping[str, str]


@dataclass(frozen=True)
class Ran:
    """One step of a round as its runner ran it: the attempt (None: it could not run, `problem` says why), how
    long it took, and where it ran."""

    attempt: Attempt | None
    seconds: float
    where: str
    problem: str | None = None


Runner = Callable[[Sequence[Trial]], list[Ran]]  # a round's steps -> what each did, in the same order


def in_process(ws: Workspace, ui: UI, settings: Settings, show: Show, saved: Saved,
               bases: Mapping[str, str]) -> Runner:
    """The steps one after the other in this process, on the project itself (each from the saved files)."""
    def run(trials: Sequence[Trial]) -> list[Ran]:
        done = []
        for trial in trials:
            began = time.monotonic()
            saved.restore()
            with ui.group(f"kpatch nightly: scroll {trial.upstream} at {trial.commit[:12]}"):
                attempt = chain(ws, ui, settings, show, trial.onto, bases)
            done.append(Ran(attempt, round(time.monotonic() - began, 3), "this process"))
        return done
    return run


def settle(ws: Workspace, ui: UI, saved: Saved, onto: Mapping[str, str]) -> None:
    """Leave the project as a night leaves it: the files as they were, then rebased onto `onto` (the last green
    commits, or the heads); no build."""
    saved.restore()
    with ui.group("kpatch nightly: scroll (the stacks onto the proposed commits)"):
        run = timed(ui, Stage.REBASE, lambda: stages.rebase(ws, ui, lambda _stage, _result: None, onto=onto,
                                                            discard=True)).run
    if run.status is StageStatus.FAILED:
        ui.warn(f"scroll: the stacks could not be rebased back onto {', '.join(c[:12] for c in onto.values())}: "
                f"{run.summary}")
        _abort_in_progress(ws)
    saved.drop()


def conclude(ws: Workspace, ui: UI, report: Report, found: Scroll, lock: bytes | None, saved: Saved,
             kept: Path) -> Report:
    """The night's report with its search, the project left as a night leaves it: the stacks rebased onto the
    last green commits (their lock kept, for the pull request), or onto the heads when nothing past the pins is
    green (as a red night leaves them)."""
    onto = {p.upstream: p.commit for p in found.last_green} if found.advanced else \
        {m.upstream: m.new_base for m in report.moves}
    settle(ws, ui, saved, onto)
    summary = report.summary
    if found.advanced:
        summary += "; the last green: " + ", ".join(f"{p.upstream} {p.commit[:12]}" for p in found.last_green)
    if found.culprit is not None:
        c = found.culprit
        summary += f"; culprit: {c.upstream} {c.commit[:12]} \"{c.subject}\""
    if not found.complete:
        summary += f"; the search stopped early ({found.stopped})"
    report = replace(report, scroll=found, summary=summary)
    if lock is not None:
        write_atomic(kept, lock)
        report = replace(report, kept_lock=str(kept))
    return report


def heads_attempt(failure: Failure | None, suites: Sequence[Suite]) -> Attempt:
    """The night's own red run at the heads, as a search step would have seen it."""
    stage = failure.stage if failure else Stage.TEST
    return Attempt(StepResult.RED, stage, failure.message if failure else "", failure, tuple(suites), (), None)


def _lock(lock: Path) -> bytes | None:
    return lock.read_bytes() if lock.is_file() else None


def _tail(path: Path | None) -> tuple[str, ...]:
    if path is None or not path.is_file():
        return ()
    return tuple(path.read_text(encoding="utf-8", errors="replace").splitlines()[-TAIL:])


def _abort_in_progress(ws: Workspace) -> None:
    """A step's rebase that stopped at a conflict is dropped (the next step starts from the saved files)."""
    if ws.read_state().operation is not None:
        abort_rebase(ws, UI(quiet=True))
