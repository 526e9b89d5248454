"""The search's rounds as jobs of the CI's matrix: the night writes the first round's plan, each step is a job of
its own, and a collecting job reads the round's results and writes the next round's plan, until the search ends.

    kpatch nightly --no-publish --plan-round DIR    # the night; red heads: DIR/plan.json, round 1 (no search here)
    kpatch nightly --run-step DIR/plan.json K       # one job: step K of the plan -> DIR/steps/round-R-step-K/
    kpatch nightly --collect DIR [--final]          # the round's results -> the next plan, or the night's end

The plan is the search's whole state (rounds.Search) and the round's entries (rounds.Entry); DIR/before/ holds the
project's files as they were before the night (scroll.Saved). A step runs the night's own chain in scratch (a copy
of the project under .kpatch/, its files from DIR/before/) and writes its result (result.json, versioned: the
night's id, the round, the entry and its commit) and its logs; the result is written whole, last (a step killed
mid-way leaves none). Everything read back is checked: a file that is not a plan or a step result of this night,
this round and this entry is a one-line error naming it, never taken as a step's result.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from kpatch import config
from kpatch.config import Stack
from kpatch.dashboard.night import Pin, Report, _decode
from kpatch.engine.plan import fetch
from kpatch.errors import UsageError
from kpatch.files import REPORT_FILE, read_input, write_atomic
from kpatch.nightly import rounds, scroll, workers
from kpatch.nightly.rounds import Entry, Search, Tried
from kpatch.nightly.scroll import Limits, Ran, Saved
from kpatch.nightly.stages import Settings
from kpatch.output.ui import UI, to_jsonable
from kpatch.project.workspace import Workspace

PLAN_KIND, STEP_KIND = "kpatch-scroll-plan", "kpatch-scroll-step"
PLAN_VERSION = STEP_VERSION = 1
PLAN, MATRIX, BEFORE, STEPS = "plan.json", "matrix.json", "before", "steps"
RESULT, LOG, LOGS = "result.json", "step.log", "logs"
T = TypeVar("T")


@dataclass(frozen=True)
class RoundPlan:
    """plan.json: the round the CI's matrix runs next, and the search's state it continues from."""

    kind: str
    version: int
    night: str  # the night's id: each step result names it (a result of another night is foreign)
    round: int
    settings: Settings  # how every step builds and tests (the night's)
    search: Search
    entries: tuple[Entry, ...]  # the matrix's jobs, `number` 1..


@dataclass(frozen=True)
class StepRecord:
    """result.json: what one job of the matrix did."""

    kind: str
    version: int
    night: str
    round: int
    entry: int
    upstream: str
    commit: str
    seconds: float
    where: str  # the job and the runner it ran on
    tried: Tried


@dataclass(frozen=True)
class Collected:
    """What `--collect` did: planned the next round (`plan`), or ended the search (`report`)."""

    plan: RoundPlan | None
    report: Report | None


def first_round(ws: Workspace, ui: UI, settings: Settings, report: Report, saved: Saved, kept: Path, limits: Limits,
                folder: Path) -> Report:
    """The night's red heads: the first round's plan in `folder` (the matrix runs it); a search with no round to
    run ends here, as in the night."""
    s = rounds.begin(ws, report.moves, scroll.heads_attempt(report.failure, report.suites), limits)
    s, entries = rounds.next_round(ws, s)
    if not entries:
        found, lock = rounds.finish(s)
        return scroll.conclude(ws, ui, report, found, lock, saved, kept)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(folder / STEPS, ignore_errors=True)
    saved.keep(folder / BEFORE)
    plan = RoundPlan(PLAN_KIND, PLAN_VERSION, uuid.uuid4().hex, s.rounds, settings, s, entries)
    _write_plan(ui, folder, plan)
    ui.note(f"scroll: the search for the last green commits runs on the CI's matrix: 'kpatch nightly --run-step "
            f"{folder / PLAN} K' for each step, then 'kpatch nightly --collect {folder}'")
    return report


def run_step(ws: Workspace, ui: UI, plan_path: Path, number: int, out: Path | None) -> StepRecord:
    """One job of the matrix: step `number` of the plan, in scratch; its result and logs in `out` (default: the
    plan's steps/round-R-step-K/)."""
    plan = read_plan(plan_path)
    if not 1 <= number <= len(plan.entries):
        raise UsageError(f"--run-step: {plan_path} has {len(plan.entries)} step(s) in round {plan.round}, "
                         f"no step {number}")
    entry = plan.entries[number - 1]
    out = out or plan_path.parent / STEPS / f"round-{plan.round}-step-{number}"
    shutil.rmtree(out, ignore_errors=True)  # no earlier result is left to stand for this run
    out.mkdir(parents=True)
    saved = Saved.kept(ws, _before(plan_path))
    scratch = ws.kpatch_dir / f"scroll-step-{number}"
    shutil.rmtree(scratch, ignore_errors=True)
    began = time.monotonic()
    try:
        workers.prepare(ws, saved, scratch / "project")
        project = scratch / "project"
        there = Workspace.create(_loaded(ws, project / config.CONFIG_NAME), ws.cache_dir, project / "work")
        with there.writer("nightly --run-step", ui):
            _fetch_missing(there, ui, entry.onto)
            with ui.group(f"kpatch nightly: step {number} of round {plan.round}: {entry.upstream} at "
                          f"{entry.commit[:12]}"):
                attempt = scroll.chain(there, ui, plan.settings, lambda _stage, _result: None,
                                       dict(rounds.pairs(entry.onto)), dict(rounds.pairs(plan.search.bases)))
        if (project / "reports").is_dir():
            shutil.copytree(project / "reports", out / LOGS, symlinks=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    runner = os.environ.get("RUNNER_NAME")
    record = StepRecord(STEP_KIND, STEP_VERSION, plan.night, plan.round, number, entry.upstream, entry.commit,
                        round(time.monotonic() - began, 3), f"job {number}" + (f" on {runner}" if runner else ""),
                        Tried.of(attempt))
    log = [f"step {number} of round {plan.round}: {entry.upstream} at {entry.commit} \"{entry.subject}\"",
           f"result: {attempt.result.value} ({attempt.summary})",
           *(attempt.failure.log_tail if attempt.failure else ())]
    write_atomic(out / LOG, ("\n".join(log) + "\n").encode("utf-8"), durable=False)
    write_atomic(out / RESULT, json.dumps(to_jsonable(record), indent=2).encode("utf-8"))  # last, whole
    ui.note(f"step result: {attempt.result.value} ({attempt.summary}) -> {out / RESULT}")
    return record


def collect(ws: Workspace, ui: UI, folder: Path, report_dir: Path, *, final: bool) -> Collected:
    """The round's step results in `folder`/steps/ taken: the next round's plan in `folder`, or (the search over,
    or `final`: the workflow has no round after this one) the night's report in `report_dir` with the search, the
    stacks settled as a night leaves them."""
    plan = read_plan(folder / PLAN)
    found = _results(folder / STEPS, plan)  # every result checked before anything is taken
    with ws.writer("nightly --collect", ui):
        _fetch_missing(ws, ui, [Pin(m.upstream, m.new_base) for m in plan.search.moves])
        ran = [found.get(e.number) or Ran(None, 0.0, f"job {e.number}", "no step result (its job failed, was "
                                                                        "cancelled or was killed before it wrote one)")
               for e in plan.entries]
        s = rounds.take(ws, plan.search, plan.entries, ran)
        after, entries = rounds.next_round(ws, s)
        if entries and final:
            after, entries = rounds.stop(ws, replace(after, rounds=after.rounds - 1),
                                         f"the workflow's last round ({plan.round}) ran"), ()
        if entries:
            shutil.rmtree(folder / STEPS, ignore_errors=True)
            nxt = replace(plan, round=after.rounds, search=after, entries=entries)
            _write_plan(ui, folder, nxt)
            return Collected(nxt, None)
        return Collected(None, _ended(ws, ui, folder, report_dir, after))


def _ended(ws: Workspace, ui: UI, folder: Path, report_dir: Path, search: Search) -> Report:
    """The night's report with its search, the stacks settled; the plan removed (a second --collect finds none)."""
    # imported where used: the renderer only when the matrix's last round ends
    from kpatch.nightly import render

    path = report_dir / render.JSON
    try:
        report = _decoded(Report, json.loads(read_input(path, REPORT_FILE, UsageError)), path, "nightly report")
    except OSError as err:
        raise UsageError(f"--collect: cannot read the night's report {path}: {err.strerror}") from None
    except ValueError as err:
        raise UsageError(f"{path}: not a nightly report (not JSON: {err})") from None
    saved = Saved.kept(ws, _before(folder / PLAN))
    saved.restore()  # the project as it was before the night, read anew: the stacks move from its pins
    ws = replace(ws, stack=_loaded(ws, ws.stack.path))
    scrolled, lock = rounds.finish(search)
    report = scroll.conclude(ws, ui, report, scrolled, lock, saved, ws.kept_lock)
    if report.clock is not None:
        report = replace(report, clock=replace(report.clock, scroll=scrolled.seconds))
    render.write(report_dir, report)
    shutil.rmtree(folder / STEPS, ignore_errors=True)
    for scratch in ws.kpatch_dir.glob("scroll-step-*"):  # what a killed step left
        shutil.rmtree(scratch, ignore_errors=True)
    for name in (MATRIX, PLAN):
        (folder / name).unlink(missing_ok=True)
    return report


def _read_json(path: Path, what: str) -> object:
    """The JSON in `path`; a file that cannot be read or is no JSON is a one-line error naming it as `what`."""
    try:
        return json.loads(read_input(path, REPORT_FILE, UsageError))
    except OSError as err:
        raise UsageError(f"{path}: cannot read the {what}: {err.strerror}") from None
    except ValueError as err:
        raise UsageError(f"{path}: not a {what} (not JSON: {err})") from None


def read_plan(path: Path) -> RoundPlan:
    """plan.json, checked: anything else is a one-line error naming the file."""
    data = _read_json(path, "round's plan")
    plan = _decoded(RoundPlan, _checked(data, PLAN_KIND, PLAN_VERSION, path, "round's plan"), path, "round's plan")
    if [e.number for e in plan.entries] != list(range(1, len(plan.entries) + 1)) or plan.round != plan.search.rounds:
        raise UsageError(f"{path}: not a round's plan (its entries or round do not add up)")
    return plan


def read_step(path: Path, plan: RoundPlan) -> StepRecord:
    """One result.json, checked against the plan: a step result of this night, this round and one of its entries
    (that entry's commit); anything else is a one-line error naming the file."""
    data = _read_json(path, "step result")
    record = _decoded(StepRecord, _checked(data, STEP_KIND, STEP_VERSION, path, "step result"), path, "step result")
    if record.night != plan.night:
        raise UsageError(f"{path}: a step result of another night ({record.night[:12]}), not of this plan's "
                         f"({plan.night[:12]})")
    if record.round != plan.round:
        raise UsageError(f"{path}: a step result of round {record.round}, the plan is at round {plan.round}")
    entry = next((e for e in plan.entries if e.number == record.entry), None)
    if entry is None or (entry.upstream, entry.commit) != (record.upstream, record.commit):
        raise UsageError(f"{path}: step {record.entry} ({record.upstream} {record.commit[:12]}) is no step of "
                         f"round {plan.round}")
    return record


def _results(folder: Path, plan: RoundPlan) -> dict[int, Ran]:
    """Each result.json under `folder` (one level down: one folder per job's artifact), by entry."""
    found: dict[int, tuple[Path, Ran]] = {}
    for path in sorted(folder.glob(f"*/{RESULT}")):
        record = read_step(path, plan)
        if record.entry in found:
            raise UsageError(f"{path}: a second result for step {record.entry} (the first: {found[record.entry][0]})")
        found[record.entry] = path, Ran(record.tried.attempt(), record.seconds, record.where)
    return {n: ran for n, (_path, ran) in found.items()}


def _checked(data: object, kind: str, version: int, path: Path, what: str) -> dict[str, object]:
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise UsageError(f"{path}: not a {what} (its kind is not {kind!r})")
    if data.get("version") != version:
        raise UsageError(f"{path}: a {what} of version {data.get('version')!r}; this kpatch reads version {version}")
    return data


def _decoded(kind: type[T], data: object, path: Path, what: str) -> T:
    try:
        value = _decode(kind, data)
    except (ValueError, TypeError, KeyError) as err:
        raise UsageError(f"{path}: not a {what} ({err})") from None
    assert isinstance(value, kind)
    return value


def _write_plan(ui: UI, folder: Path, plan: RoundPlan) -> None:
    write_atomic(folder / PLAN, json.dumps(to_jsonable(plan), indent=2).encode("utf-8"))
    write_atomic(folder / MATRIX, json.dumps({"step": [e.number for e in plan.entries]}).encode("utf-8"))
    rounds.say_round(ui, plan.search, plan.entries)
    ui.note(f"scroll: round {plan.round}: {len(plan.entries)} step(s) planned in {folder / PLAN} (the matrix: "
            f"{folder / MATRIX})")


def _before(plan_path: Path) -> Path:
    before = plan_path.parent / BEFORE
    if not (before / scroll.KEPT_TOML).is_file():
        raise UsageError(f"{plan_path}: the project's files before the night are not beside it ({before})")
    return before


def _loaded(ws: Workspace, path: Path) -> Stack:
    """kpatch.toml at `path`, its upstreams at the URLs `ws`'s are (--url, $KPATCH_URL_<NAME>)."""
    given = {u.name: u.url for u in ws.stack.upstreams if u.url_overridden and u.url_from == "--url"}
    return config.with_url_overrides(config.load(path), given, os.environ)


def _fetch_missing(ws: Workspace, ui: UI, pins: Sequence[Pin]) -> None:
    """A job on a runner whose mirrors are older than the night's fetches the commits it needs."""
    for pin in pins:
        if not ws.mirror(pin.upstream).has_commit(pin.commit):
            fetch(ws, ui, ws.stack.get(pin.upstream))

