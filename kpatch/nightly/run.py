"""One night: rebase -> build -> verify -> test (stop at the first that fails), then the report, then GitHub.

The report is written before GitHub is asked anything and again with what GitHub answered, so a GitHub that is
down never costs the report; the exit code is the run's (the failing stage's), never the reporting's.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kpatch import __version__
from kpatch.dashboard.night import (
    Clock,
    Failure,
    Move,
    Outcome,
    PullLine,
    Report,
    Stage,
    StageRun,
    StageStatus,
    report_from_json,
)
from kpatch.dashboard.record import dashboard_issue, location, record_night
from kpatch.errors import UsageError
from kpatch.files import REPORT_FILE, read_input, write_atomic
from kpatch.forge import github
from kpatch.nightly import noop, render, rounds, scroll, stages
from kpatch.nightly.publish import publish
from kpatch.nightly.pulls import last_states, pull_lines
from kpatch.nightly.stages import TAIL, Built, Done, Named, Rebased, Settings, Show, Tested, Timed, Verified, timed
from kpatch.output.redact import add_secret
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace

_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
RETRY_DELAY = "KPATCH_GITHUB_RETRY_DELAY"  # seconds before the first GitHub retry (doubling); tests set 0


@dataclass(frozen=True)
class Options:
    report_dir: Path
    dry_run: bool
    settings: Settings
    publish: bool = True  # False (--no-publish): the report and refreshed files only; GitHub is not asked
    limits: scroll.Limits = field(default_factory=scroll.Limits)  # the search for the last green commits (red heads)
    scroll: bool = True  # False (--no-scroll): a red night stays at the pins, as before scrolling
    released_pairs: bool = False  # True (--released-pairs): say whether the newest released pair carries the fix
    plan_round: Path | None = None  # --plan-round DIR: the search's first round planned there, for the CI's matrix


@dataclass(frozen=True)
class Night:
    report: Report
    markdown: Path
    json: Path


def target(ws: Workspace, environ: Mapping[str, str], dry_run: bool) -> github.Target:
    """Where and as whom the night reports; the token is registered so no output, log or file shows it."""
    tgt = github.target(ws.stack.github, environ, dry_run=dry_run)
    if tgt.token is not None:
        add_secret(tgt.token.reveal())
        push = github.push_target(tgt)
        for value in (push.env.values() if push else ()):
            add_secret(value.rsplit(" ", 1)[-1])  # the header's base64 form, as git would send it
    return tgt


def check_report_dir(folder: Path) -> None:
    """Refuse, before anything runs, a report folder that cannot be one."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--report {folder}: a file is there, not a folder")
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"--report {folder}: cannot write there ({existing} is not a writable folder)")


def run_night(ws: Workspace, ui: UI, options: Options, show: Show) -> Night:
    """`kpatch nightly`: the whole night under one writer lock (no other kpatch writes while it runs)."""
    check_report_dir(options.report_dir)
    tgt = target(ws, os.environ, options.dry_run)
    with ws.writer("nightly", ui):
        return night(ws, ui, options, tgt, os.environ, show)


def publish_saved_night(ws: Workspace, ui: UI, options: Options) -> Night:
    """`kpatch nightly --publish-saved`: GitHub hears of a night another job ran (see publish_saved)."""
    tgt = target(ws, os.environ, options.dry_run)
    with ws.writer("nightly", ui):
        return publish_saved(ws, ui, options, tgt, os.environ)


def night(ws: Workspace, ui: UI, options: Options, tgt: github.Target, environ: Mapping[str, str],
          show: Show) -> Night:
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    began = time.monotonic()
    if tgt.dry_run and not options.dry_run and options.publish:
        ui.warn(f"{tgt.dry_run}: running as --dry-run (nothing is pushed, opened, commented on or closed)")
    kept = ws.kept_lock
    saved = scroll.Saved(ws) if options.scroll else None  # the files before the night, for the search's steps
    ran = _stages(ws, ui, options.settings, show, kept)
    if ran.outcome is Outcome.FAILED and ran.failure is not None and ran.failure.stage is Stage.TEST:
        ran = _retried(ws, ui, options.settings, show, ran)  # a flaky test is no red night
    if ran.outcome is Outcome.PASSED:
        assert ran.built is not None
        write_atomic(kept, ran.built.lock.read_bytes())
    released_set: tuple[str, ...] = ()
    if ran.outcome is Outcome.PASSED and ws.stack.release.nightly:
        # a green night's set on the nightly channel ([release] nightly = true)
        from kpatch.nightly.release import release_night

        assert ran.built is not None
        why = "--dry-run" if options.dry_run else tgt.dry_run
        released_set = (release_night(ws, ui, ran.built.lock, why),)
    report = _report(ui, started, ran, tgt, pull_lines(ran.named, ran.rebased.pull_states if ran.rebased else None,
                                                        last_states(location(ws.stack, options.report_dir),
                                                                    {pr for _, _, pr in ran.named})),
                     kept_lock=str(kept) if ran.outcome is Outcome.PASSED else None, notes=released_set)
    if ran.outcome is not Outcome.PASSED and saved is not None and report.failure is not None \
            and report.failure.stage is not Stage.REBASE:
        if options.plan_round is not None:  # the rounds run as the CI's matrix (matrix.py)
            from kpatch.nightly import matrix

            report = matrix.first_round(ws, ui, options.settings, report, saved, kept, options.limits,
                                        options.plan_round)
        else:
            report = _scrolled(ws, ui, options, show, report, saved, kept)
    if saved is not None:
        saved.drop()
    if options.released_pairs:
        from kpatch.nightly import released

        report = replace(report, notes=(*report.notes, *released.notes(ws)))
    reporting = time.monotonic()
    report = replace(report, clock=_clock(report, ran.fetch_seconds, writing=0.0, publish=0.0,
                                          total=reporting - began))
    render.write(options.report_dir, report)  # before GitHub: a GitHub that is down costs nothing
    record_night(ui, ws.stack, report, location(ws.stack, options.report_dir))  # the carry history (dashboard)
    report = replace(report, clock=_clock(report, ran.fetch_seconds, writing=time.monotonic() - reporting,
                                          publish=0.0, total=time.monotonic() - began))
    if options.publish:
        return _published(ws, ui, options, report, tgt, environ)
    return _written(ui, options, report)


def _clock(report: Report, fetch: float, *, writing: float, publish: float, total: float) -> Clock:
    """The night's clock from its stages' times (the rebase stage's fetch shown apart) and the reporting's."""
    seconds = {r.stage: r.seconds for r in report.stages}
    rebase = seconds.get(Stage.REBASE, 0.0)
    return Clock(fetch=round(fetch, 3), rebase=round(max(0.0, rebase - fetch), 3),
                 build=seconds.get(Stage.BUILD, 0.0), verify=seconds.get(Stage.VERIFY, 0.0),
                 test=seconds.get(Stage.TEST, 0.0), scroll=report.scroll.seconds if report.scroll else 0.0,
                 report=round(writing, 3), publish=round(publish, 3), total=round(total, 3))


def _scrolled(ws: Workspace, ui: UI, options: Options, show: Show, report: Report, saved: scroll.Saved,
              kept: Path) -> Report:
    """The heads are red past the rebase: search the night's range for the last green commits (scroll.conclude
    says where the stacks end)."""
    heads = scroll.heads_attempt(report.failure, report.suites)
    bases = {m.upstream: m.old_base for m in report.moves}
    runner = scroll.in_process(ws, ui, options.settings, show, saved, bases)
    if options.limits.runners > 1:  # each round's steps at once, on local worker processes
        from kpatch.nightly import workers

        runner = workers.local(ws, ui, options.settings, saved, bases)
    with ui.group("kpatch nightly: scroll"):
        found_scroll, lock = rounds.search(ws, ui, report.moves, heads, options.limits, runner)
    return scroll.conclude(ws, ui, report, found_scroll, lock, saved, kept)


def publish_saved(ws: Workspace, ui: UI, options: Options, tgt: github.Target,
                  environ: Mapping[str, str]) -> Night:
    """Report to GitHub a night another job ran (`nightly --no-publish`): its report.json in the report folder,
    its refreshed files (kpatch.toml, patches/, pylock.toml) in this checkout. Only this half needs the token."""
    path = options.report_dir / render.JSON
    try:
        report = report_from_json(json.loads(read_input(path, REPORT_FILE, UsageError)))
    except OSError as err:
        raise UsageError(f"--publish-saved: cannot read {path}: {err.strerror}") from None
    except (ValueError, KeyError, TypeError, AssertionError) as err:
        raise UsageError(f"--publish-saved: {path} is not a nightly report ({err})") from None
    if report.push is not None or report.github:
        raise UsageError(f"--publish-saved: {path} was published already (it has GitHub results)")
    if tgt.dry_run and not options.dry_run:
        ui.warn(f"{tgt.dry_run}: publishing as --dry-run (nothing is pushed, opened, commented on or closed)")
    return _published(ws, ui, options, replace(report, dry_run=tgt.dry_run), tgt, environ)


def _published(ws: Workspace, ui: UI, options: Options, report: Report, tgt: github.Target,
               environ: Mapping[str, str]) -> Night:
    with ui.group("kpatch nightly: GitHub"):
        kept = ws.kept_lock
        paths = [ws.stack.path, *(u.patches for u in ws.stack.upstreams), ws.stack.resolutions, kept]
        board = dashboard_issue(ui, location(ws.stack, options.report_dir)) if ws.stack.dashboard_issue else None
        began = time.monotonic()
        done = publish(ws, ui, report, tgt, environ, _retry(environ), paths, board)
        took = time.monotonic() - began
    clock = report.clock and replace(report.clock, publish=round(took, 3), total=round(report.clock.total + took, 3))
    return _written(ui, options, replace(report, push=done.push, github=done.results, clock=clock))


def _written(ui: UI, options: Options, report: Report) -> Night:
    md, js = render.write(options.report_dir, report)
    ui.step_summary(render.markdown(report))
    return Night(report=report, markdown=md, json=js)


NOOP = "no-op: no upstream moved, nothing changed in the stacks since the last lock"


@dataclass(frozen=True)
class Ran:
    """The night's stages as they ran: each stage's line and what it found (None: not reached, or it raised),
    the failure that ended them, and the parts of the rebase stage before the rebase (the fetch, the PRs named)."""

    runs: tuple[StageRun, ...]
    outcome: Outcome
    failure: Failure | None = None
    fetch_seconds: float = 0.0  # the rebase stage's fetch of the heads (the night's clock shows it apart)
    fetched: tuple[Move, ...] = ()  # the heads the fetch found (the moves when the rebase did not run)
    named: Named = ()  # (upstream, patch, PR) named before the rebase
    rebased: Rebased | None = None
    built: Built | None = None
    verified: Verified | None = None
    tested: Tested | None = None
    flaky: tuple[str, ...] = ()  # tests that failed once and passed on their retry


def _stages(ws: Workspace, ui: UI, settings: Settings, show: Show, kept: Path) -> Ran:
    """Run the stages in order; stop at the first that fails. A no-op night runs none after the fetch."""
    before = Ran((), Outcome.PASSED)

    def rebase() -> Done[Rebased] | None:
        nonlocal before
        began = time.monotonic()
        heads = noop.fetch_heads(ws, ui, kept)
        before = replace(before, fetch_seconds=time.monotonic() - began, fetched=tuple(heads.moves))
        if heads.changed is None:
            return None
        ui.note(f"not a no-op night: {heads.changed}")
        before = replace(before, named=stages.named_prs(ws))
        return stages.rebase(ws, ui, show, fetched=before.fetched, named=before.named)

    rebased = timed(ui, Stage.REBASE, rebase)
    if rebased.run.status is StageStatus.SKIPPED:
        seconds = rebased.run.seconds
        ui.note(f"no-op night: no upstream moved, nothing changed in the stacks ({seconds:.1f} s)")
        runs = (replace(rebased.run, summary=f"{NOOP} (fetched in {seconds:.1f} s)"),
                *(StageRun(s, StageStatus.SKIPPED, 0.0, 0, "no-op night") for s in (Stage.BUILD, Stage.VERIFY,
                                                                                    Stage.TEST)))
        return replace(before, runs=runs, outcome=Outcome.NOOP)
    ran = _then(before, rebased, rebased=rebased.found)
    if ran.outcome is Outcome.FAILED:
        return _not_reached(ran, Stage.BUILD, Stage.VERIFY, Stage.TEST)
    built = timed(ui, Stage.BUILD, lambda: stages.build(ws, ui, show, settings))
    ran = _then(ran, built, built=built.found)
    if ran.outcome is Outcome.FAILED or ran.built is None:
        return _not_reached(ran, Stage.VERIFY, Stage.TEST)
    lock = ran.built.lock
    verified = timed(ui, Stage.VERIFY, lambda: stages.verify(ws, ui, show, lock))
    ran = _then(ran, verified, verified=verified.found)
    if ran.outcome is Outcome.FAILED:
        return _not_reached(ran, Stage.TEST)
    tested = timed(ui, Stage.TEST, lambda: stages.test(ws, ui, show, settings, lock))
    return _then(ran, tested, tested=tested.found)


def _then(ran: Ran, stage: Timed[Any], **found: object) -> Ran:
    """`ran` with one more stage: its line, what it found, and its failure (which ends the night)."""
    failed = stage.run.status is StageStatus.FAILED
    return replace(ran, runs=(*ran.runs, stage.run), outcome=Outcome.FAILED if failed else ran.outcome,
                   failure=stage.failure if failed else ran.failure, **found)  # type: ignore[arg-type]


def _not_reached(ran: Ran, *rest: Stage) -> Ran:
    failed = ran.runs[-1].stage.value
    return replace(ran, runs=(*ran.runs, *(StageRun(s, StageStatus.SKIPPED, 0.0, 0, f"not reached: {failed} failed")
                                           for s in rest)))


def _retried(ws: Workspace, ui: UI, settings: Settings, show: Show, ran: Ran) -> Ran:
    """The failed test stage once more at the same commit: a night whose tests then pass is flaky, not red."""
    assert ran.built is not None and ran.failure is not None
    retry_began = time.monotonic()
    retried = scroll.retry_test(ws, ui, show, settings, ran.built.lock, ran.tested or Tested(()), ran.failure)
    took = time.monotonic() - retry_began
    runs = tuple(replace(r, seconds=round(r.seconds + took, 3)) if r.stage is Stage.TEST else r for r in ran.runs)
    if retried.flaky is None:
        return replace(ran, runs=runs, tested=retried.tested, failure=retried.failure)
    flaky = retried.flaky
    runs = tuple(replace(r, status=StageStatus.PASSED, exit_code=0,
                         summary=f"passed on the retry (flaky: {', '.join(flaky)}); {r.summary}")
                 if r.stage is Stage.TEST else r for r in runs)
    return replace(ran, runs=runs, outcome=Outcome.PASSED, tested=retried.tested, failure=None, flaky=flaky)


def _report(ui: UI, started: str, ran: Ran, tgt: github.Target, pulls: tuple[PullLine, ...],
            kept_lock: str | None, notes: tuple[str, ...]) -> Report:
    """The night's report, built once from what its stages found; `notes` follow the rebase's (the green set's
    release line)."""
    failed = next((r for r in ran.runs if r.status is StageStatus.FAILED), None)
    failure = ran.failure
    if failure is not None and not failure.log_tail:
        failure = replace(failure, log_tail=_tail((ran.tested.log if ran.tested else None) or ui.log_file))
    if failure is not None and failure.log is None and ui.log_file is not None:
        failure = replace(failure, log=str(ui.log_file))
    if ran.outcome is Outcome.NOOP:
        summary = f"{NOOP}: nothing was rebased, built or tested, no container started"
    elif failed is not None:
        summary = f"failed at {failed.stage.value} (exit {failed.exit_code}): {failed.summary}"
    else:
        summary = "passed: " + "; ".join(f"{r.stage.value}: {r.summary}" for r in ran.runs if r.status is
                                         StageStatus.PASSED)
    rebased, built, verified = ran.rebased, ran.built, ran.verified
    return Report(kpatch_version=__version__, started=started, outcome=ran.outcome,
                  exit_code=failed.exit_code if failed else 0, summary=summary, stages=ran.runs,
                  moves=rebased.moves if rebased else ran.fetched, patches=rebased.patches if rebased else (),
                  reviews=rebased.reviews if rebased else (), flags=rebased.flags if rebased else (),
                  pulls=pulls, wheels=built.wheels if built else (), lock=str(built.lock) if built else None,
                  kept_lock=kept_lock, containers=built.containers if built else 0,
                  checks=verified.checks if verified else (), contract=verified.contract if verified else (),
                  accepted=verified.accepted if verified else (), suites=ran.tested.suites if ran.tested else (),
                  notes=(*(rebased.notes if rebased else ()), *notes), failure=failure, flaky=ran.flaky,
                  dry_run=tgt.dry_run)


def _tail(path: Path | None) -> tuple[str, ...]:
    """The last lines of a log: a suite's as it is; kpatch's run log without its debug records (git commands)."""
    if path is None or not path.is_file():
        return ()
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ()
    kept, keep = [], True
    for line in lines:
        record = _RECORD.match(line)
        if record:  # a record starts; lines after it without a stamp continue it
            keep = record.group(1) != "DEBUG"
        if keep:
            kept.append(line)
    return tuple(kept[-TAIL:])


def _retry(environ: Mapping[str, str]) -> github.RetryPolicy:
    try:
        first = max(0.0, float(environ.get(RETRY_DELAY, "2")))
    except ValueError:
        first = 2.0
    return github.RetryPolicy(first_wait=first)
