"""One night: rebase -> build -> verify -> test (stop at the first that fails), then the report, then GitHub.

The report is written before GitHub is asked anything and again with what GitHub answered, so a GitHub that is
down never costs the report; the exit code is the run's (the failing stage's), never the reporting's.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from kpatch import __version__
from kpatch.errors import UsageError
from kpatch.files import write_atomic
from kpatch.forge import github
from kpatch.nightly import noop, render, rounds, scroll, stages
from kpatch.nightly.dashboard.record import dashboard_issue, location, record_night
from kpatch.nightly.model import Clock, Outcome, Report, Stage, StageRun, StageStatus, report_from_json
from kpatch.nightly.publish import publish
from kpatch.nightly.pulls import last_states, pull_lines
from kpatch.nightly.stages import TAIL, Findings, Settings, Show, timed
from kpatch.output.redact import add_secret
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace
from kpatch.wheels import lock as lockfile

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
    kept = ws.stack.root / lockfile.LOCK_NAME
    found = Findings()
    saved = scroll.Saved(ws) if options.scroll else None  # the files before the night, for the search's steps
    runs, outcome = _stages(ws, ui, options.settings, found, show, kept)
    flaky: tuple[str, ...] = ()
    if outcome is Outcome.FAILED and found.failure is not None and found.failure.stage is Stage.TEST:
        retry_began = time.monotonic()
        retried = scroll.retry_test(ws, ui, found, show, options.settings)  # a flaky test is no red night
        runs = [replace(r, seconds=round(r.seconds + time.monotonic() - retry_began, 3)) if r.stage is Stage.TEST
                else r for r in runs]
        if retried is not None:
            flaky, outcome = retried, Outcome.PASSED
            runs = [replace(r, status=StageStatus.PASSED, exit_code=0,
                            summary=f"passed on the retry (flaky: {', '.join(retried)}); {r.summary}")
                    if r.stage is Stage.TEST else r for r in runs]
    report = replace(_report(ui, started, runs, outcome, found, tgt), flaky=flaky,
                     pulls=pull_lines(found.named, found.pull_states,
                                      last_states(location(ws.stack, options.report_dir))))
    if outcome is Outcome.PASSED:
        assert found.lock is not None
        write_atomic(kept, found.lock.read_bytes())
        report = replace(report, kept_lock=str(kept))
        if ws.stack.release.nightly:  # a green night's set on the nightly channel ([release] nightly = true)
            from kpatch.nightly.release import release_night

            why = "--dry-run" if options.dry_run else tgt.dry_run
            report = replace(report, notes=(*report.notes, release_night(ws, ui, found.lock, why)))
    elif saved is not None and report.failure is not None and report.failure.stage is not Stage.REBASE:
        if options.plan_round is not None:  # the rounds run as the CI's matrix (matrix.py)
            from kpatch.nightly import matrix

            report = matrix.first_round(ws, ui, options.settings, report, saved, kept, options.limits,
                                        options.plan_round)
        else:
            report = _scrolled(ws, ui, options, show, report, found, saved, kept)
    if saved is not None:
        saved.drop()
    if options.released_pairs:
        from kpatch.nightly import released

        report = replace(report, notes=(*report.notes, *released.notes(ws)))
    reporting = time.monotonic()
    report = replace(report, clock=_clock(report, found, writing=0.0, publish=0.0, total=reporting - began))
    render.write(options.report_dir, report)  # before GitHub: a GitHub that is down costs nothing
    record_night(ui, ws.stack, report, location(ws.stack, options.report_dir))  # the carry history (dashboard)
    report = replace(report, clock=_clock(report, found, writing=time.monotonic() - reporting, publish=0.0,
                                          total=time.monotonic() - began))
    if options.publish:
        return _published(ws, ui, options, report, tgt, environ)
    return _written(ui, options, report)


def _clock(report: Report, found: Findings, *, writing: float, publish: float, total: float) -> Clock:
    """The night's clock from its stages' times (the rebase stage's fetch shown apart) and the reporting's."""
    seconds = {r.stage: r.seconds for r in report.stages}
    rebase = seconds.get(Stage.REBASE, 0.0)
    return Clock(fetch=round(found.fetch_seconds, 3), rebase=round(max(0.0, rebase - found.fetch_seconds), 3),
                 build=seconds.get(Stage.BUILD, 0.0), verify=seconds.get(Stage.VERIFY, 0.0),
                 test=seconds.get(Stage.TEST, 0.0), scroll=report.scroll.seconds if report.scroll else 0.0,
                 report=round(writing, 3), publish=round(publish, 3), total=round(total, 3))


def _scrolled(ws: Workspace, ui: UI, options: Options, show: Show, report: Report, _found: Findings,
              saved: scroll.Saved, kept: Path) -> Report:
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
        report = report_from_json(json.loads(path.read_text(encoding="utf-8")))
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
        kept = ws.stack.root / lockfile.LOCK_NAME
        paths = [ws.stack.path, *(u.patches for u in ws.stack.upstreams), ws.stack.root / "patches" / ".rerere",
                 kept]
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


def _stages(ws: Workspace, ui: UI, settings: Settings, found: Findings, show: Show,
            kept: Path) -> tuple[list[StageRun], Outcome]:
    """Run the stages in order; stop at the first that fails. A no-op night runs none after the fetch."""
    runs: list[StageRun] = []
    noop_night = False

    def rebase() -> tuple[int, str] | None:
        nonlocal noop_night
        began = time.monotonic()
        heads = noop.fetch_heads(ws, ui, kept)
        found.fetch_seconds = time.monotonic() - began
        found.moves = list(heads.moves)
        if heads.changed is None:
            noop_night = True
            return None
        ui.note(f"not a no-op night: {heads.changed}")
        return stages.rebase(ws, ui, found, show)

    steps: list[tuple[Stage, Callable[[], tuple[int, str] | None]]] = [
        (Stage.REBASE, rebase), (Stage.BUILD, lambda: stages.build(ws, ui, found, show, settings)),
        (Stage.VERIFY, lambda: stages.verify(ws, ui, found, show)),
        (Stage.TEST, lambda: stages.test(ws, ui, found, show, settings))]
    for index, (stage, body) in enumerate(steps):
        run = timed(ui, stage, body, found)
        if noop_night:
            ui.note(f"no-op night: no upstream moved, nothing changed in the stacks ({run.seconds:.1f} s)")
            runs.append(replace(run, summary=f"{NOOP} (fetched in {run.seconds:.1f} s)"))
            runs += [StageRun(s, StageStatus.SKIPPED, 0.0, 0, "no-op night") for s, _ in steps[1:]]
            return runs, Outcome.NOOP
        runs.append(run)
        if run.status is StageStatus.FAILED:
            runs += [StageRun(s, StageStatus.SKIPPED, 0.0, 0, f"not reached: {stage.value} failed")
                     for s, _ in steps[index + 1:]]
            return runs, Outcome.FAILED
    return runs, Outcome.PASSED


def _report(ui: UI, started: str, runs: list[StageRun], outcome: Outcome, found: Findings,
            tgt: github.Target) -> Report:
    failed = next((r for r in runs if r.status is StageStatus.FAILED), None)
    failure = found.failure
    if failure is not None and not failure.log_tail:
        failure = replace(failure, log_tail=_tail(found.suite_log or ui.log_file))
    if failure is not None and failure.log is None and ui.log_file is not None:
        failure = replace(failure, log=str(ui.log_file))
    if outcome is Outcome.NOOP:
        summary = f"{NOOP}: nothing was rebased, built or tested, no container started"
    elif failed is not None:
        summary = f"failed at {failed.stage.value} (exit {failed.exit_code}): {failed.summary}"
    else:
        summary = "passed: " + "; ".join(f"{r.stage.value}: {r.summary}" for r in runs if r.status is
                                         StageStatus.PASSED)
    return Report(kpatch_version=__version__, started=started, outcome=outcome,
                  exit_code=failed.exit_code if failed else 0, summary=summary, stages=tuple(runs),
                  moves=tuple(found.moves), patches=tuple(found.patches), reviews=tuple(found.reviews),
                  flags=tuple(found.flags),
                  wheels=tuple(found.wheels), lock=str(found.lock) if found.lock else None,
                  containers=found.containers, checks=tuple(found.checks), contract=tuple(found.contract),
                  accepted=tuple(found.accepted),                   suites=tuple(found.suites),
                  notes=tuple(found.notes), failure=failure, dry_run=tgt.dry_run)


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
