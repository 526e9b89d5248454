"""The night's report as data: what each stage did, per upstream and per patch, the pair, the tests, GitHub.

The nightly writes it (report.json) and the carry dashboard keeps it as history (a night's, or a `kpatch rebase`'s
with its one stage: `moves` and `patch_reports` make its parts from a rebase), so it sits in the dashboard, below
the nightly.

One model, two renderings (markdown for people, JSON for machines) with the same content.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from kpatch.engine.diff import StackDiff
from kpatch.engine.reports import PatchReport
from kpatch.forge.model import Result
from kpatch.project.state import Hunk
from kpatch.verify.model import Check
from kpatch.wheels.record import BuiltWheel

if TYPE_CHECKING:
    from kpatch.engine.reports import RebaseResult
    from kpatch.project.workspace import Workspace


class Stage(Enum):
    """The night's stages, in the order they run; the first that fails ends the night."""

    REBASE = "rebase"
    BUILD = "build"
    VERIFY = "verify"
    TEST = "test"


class StageStatus(Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # not reached (an earlier stage failed), or nothing to do (a no-op night)


class Outcome(Enum):
    PASSED = "passed"
    FAILED = "failed"
    NOOP = "no-op"  # no upstream moved and nothing changed in the stacks since the last lock: nothing ran


class PushStatus(Enum):
    PUSHED = "pushed"
    DRY_RUN = "dry-run"  # it would have been pushed
    UNCHANGED = "unchanged"  # the refreshed files equal the checkout's HEAD: nothing to push, no pull request
    FAILED = "failed"
    SKIPPED = "skipped"  # the project is no git checkout, or origin is another repository: the message says


@dataclass(frozen=True)
class StageRun:
    stage: Stage
    status: StageStatus
    seconds: float
    exit_code: int  # 0 unless it failed
    summary: str  # one line


@dataclass(frozen=True)
class Move:
    """One upstream's base this night: pinned base -> branch head, and the upstream commits between them."""

    upstream: str
    branch: str
    old_base: str
    new_base: str
    commits: int


@dataclass(frozen=True)
class Flag:
    """A patch whose Upstream-PR is merged but which still applied: the merge is not in the new base yet."""

    upstream: str
    patch: str
    pr: str
    merge_commit: str | None
    note: str


CLOSED_NOTE = "closed without merge: decide to carry or drop"


@dataclass(frozen=True)
class PullLine:
    """One Upstream-PR a patch named before the night's rebase: its state that night, the last known one (kept in
    the carry history), and, when it was closed without a merge, what a person decides."""

    pr: str  # owner/repo#N
    upstream: str
    patch: str
    state: str  # as the forge answered tonight: "open, approved, checks green", "merged", "closed unmerged", ...
    before: str | None  # the last state a night recorded (None: never known before)
    changed: bool  # the state differs from `before` (a first known state counts as changed)
    note: str  # CLOSED_NOTE when it was closed without a merge, else ""


@dataclass(frozen=True)
class Suite:
    """One upstream's test suite against the locked pair, as report.json keeps it: `testing.run.SuiteResult`
    flattened (counts as numbers, failing tests as lines, the comparison as two lists), without the paths of its
    JUnit file and log on the machine that ran it."""

    upstream: str
    outcome: str  # kpatch test's outcome: passed, failed, timed-out, killed, no-report, no-device
    message: str
    passed: int
    failed: int
    errors: int
    skipped: int
    failing: tuple[str, ...]  # "<test id>: <first line of its message>"
    newly_failing: tuple[str, ...]
    newly_passing: tuple[str, ...]
    compared: bool  # False: there was no previous report to compare with
    running: str | None  # the test running when the suite was stopped
    seconds: float


@dataclass(frozen=True)
class AcceptedFinding:
    """An op-contract finding the verify baseline accepts: reported, not a failure."""

    pair: str  # "kernels -> app"
    op: str  # "ns.op"
    kind: str  # "undefined", "no-xpu-kernel" or "unbound"
    function: str  # "file::Class.method"
    site: str  # file:line today
    reason: str  # why a person accepted it (verify-baseline.toml)


@dataclass(frozen=True)
class Failure:
    """Why the night failed, and what a person does next."""

    stage: Stage
    exit_code: int
    message: str  # the one `error:` line
    resolve: tuple[str, ...]  # the steps for a person
    log_tail: tuple[str, ...]
    log: str | None = None  # kpatch's log of the night, where the whole story is


class StepResult(Enum):
    GREEN = "green"  # the whole chain passed at this commit
    RED = "red"  # a stage failed (a test failed again on its one retry)
    FLAKY = "flaky"  # a test failed, then passed on one retry at the same commit: green, never a culprit


@dataclass(frozen=True)
class Pin:
    """One upstream's commit in a combination the search tried (or proposes)."""

    upstream: str
    commit: str


@dataclass(frozen=True)
class Span:
    """One upstream's range the search walked: first-parent commits of base..head, `commits` of them."""

    upstream: str
    base: str
    head: str
    commits: int
    last_green: str  # the last commit of this range at which the chain is green (the base: none past it)
    first_red: str | None  # the first red commit after it (None: the head is green, or not reached)


@dataclass(frozen=True)
class Selection:
    """Test selection in a step: which of an upstream's test files ran first, and why."""

    upstream: str
    base: str  # the upstream diff is base..commit
    commit: str
    first: tuple[str, ...]  # the test files run first, in order
    why: tuple[str, ...]  # for each of `first`: "changed", or "imports M (its file changed)"
    rest: int  # how many test files ran after them


@dataclass(frozen=True)
class Step:
    """One bisection step: the chain at one upstream commit, the other upstreams at `pins`."""

    upstream: str
    commit: str
    subject: str
    result: StepResult
    seconds: float
    stage: Stage | None  # the stage that failed (red), or the test stage that needed its retry (flaky)
    summary: str
    pins: tuple[Pin, ...]  # the whole combination this step ran
    selection: tuple[Selection, ...] = ()  # the upstreams with test-selection: what their tests ran first
    round: int = 1  # the search's round (a round tries up to `runners` commits at once)
    where: str = "this process"  # where it ran: "this process", or "worker K" (--runners: a local worker process)


@dataclass(frozen=True)
class Breaker:
    """The first red upstream commit after the last green one: what broke the chain, and how."""

    upstream: str
    commit: str
    subject: str
    author: str
    date: str
    stage: Stage
    message: str  # the failing stage's one line
    failing: tuple[str, ...]  # the failing tests ("<id>: <first line>"), for a test failure
    log_tail: tuple[str, ...]


@dataclass(frozen=True)
class Scroll:
    """The search of the night's upstream range for the last commit at which the whole chain is green."""

    spans: tuple[Span, ...]
    steps: tuple[Step, ...]
    last_green: tuple[Pin, ...]  # the combination proposed (the pinned bases when nothing past them is green)
    advanced: bool  # the last green combination moves past the pinned bases: the pull request proposes it
    culprit: Breaker | None  # the first red commit after the last green (None: not found, or no red step)
    flaky: tuple[str, ...]  # tests that failed once and passed on their retry (at a step or at the heads)
    complete: bool  # False: max-steps or the budget ran out before the search ended
    stopped: str | None  # why it stopped early, and how far it got
    max_steps: int
    budget: float | None  # seconds; None: no wall-clock budget
    seconds: float
    runners: int = 1  # commits tried at once per round ([nightly] runners, --runners); 1: a bisection
    rounds: int = 0  # the rounds the search ran


@dataclass(frozen=True)
class Clock:
    """Where the night's wall-clock time went, in seconds: every part of the night once (they add up to `total`,
    up to the few milliseconds between them). report.json's `clock`; report.md's "Clock" table."""

    fetch: float  # fetching the upstreams' branch heads (the no-op check): the first part of the rebase stage
    rebase: float  # the rebase stage after the fetch
    build: float
    verify: float
    test: float  # a failing suite's one retry (flaky or not) included
    scroll: float  # the search for the last green upstream commits (0: the heads were green)
    report: float  # report.md, report.json and the carry history
    publish: float  # GitHub: the nightly branch, the pull request, the issues (0: --no-publish)
    total: float  # the whole night, from its start to the report's last write


@dataclass(frozen=True)
class Push:
    """The nightly branch: the commit of the refreshed files and where it went."""

    branch: str
    status: PushStatus
    commit: str | None
    parent: str | None
    destination: str | None  # without credentials
    files: tuple[str, ...]
    message: str


@dataclass(frozen=True)
class Report:
    """Everything one night did; `markdown` and `to_json` render the same content."""

    kpatch_version: str
    started: str  # UTC, ISO 8601
    outcome: Outcome
    exit_code: int  # the run's: the failing stage's code, 0 when it passed or was a no-op
    summary: str
    stages: tuple[StageRun, ...]
    moves: tuple[Move, ...] = ()
    patches: tuple[PatchReport, ...] = ()  # the rebase's own report of each patch (as `rebase --json`'s)
    reviews: tuple[StackDiff, ...] = ()  # what the rebase did to each patch, per stack (git range-diff)
    flags: tuple[Flag, ...] = ()
    pulls: tuple[PullLine, ...] = field(default=(), metadata={"json": "prs"})  # the Upstream-PRs' states, asked
    # once after the rebase (empty: not asked)
    wheels: tuple[BuiltWheel, ...] = ()  # the build stage's own records (as `build-wheels --json`'s)
    lock: str | None = None  # the new lock (dist/pylock.toml)
    kept_lock: str | None = None  # where the passing night keeps it for the branch (pylock.toml by kpatch.toml)
    containers: int = 0  # build containers started
    checks: tuple[Check, ...] = ()
    contract: tuple[str, ...] = ()  # the op contract per pair: what was counted, then each problem
    accepted: tuple[AcceptedFinding, ...] = ()  # contract findings the verify baseline accepts (not failures)
    suites: tuple[Suite, ...] = ()
    notes: tuple[str, ...] = ()  # things a person should know that are not failures (GitHub not asked, ...)
    failure: Failure | None = None
    scroll: Scroll | None = None  # the heads were red: the search for the last green upstream commits
    flaky: tuple[str, ...] = ()  # tests that failed once at the heads and passed on their retry
    dry_run: str | None = None  # why nothing is written to GitHub, or None
    push: Push | None = None
    github: tuple[Result, ...] = ()
    clock: Clock | None = None  # None only in a report an older kpatch wrote

    @property
    def ok(self) -> bool:
        return self.outcome is not Outcome.FAILED

    def stage(self, stage: Stage) -> StageRun | None:
        return next((s for s in self.stages if s.stage is stage), None)


REPORT_VERSION = 2  # of report.json: +1 when a field is renamed or removed (2: a patch as `rebase --json` has it)


def report_from_json(data: object) -> Report:
    """A Report back from its JSON (`render.to_json`): what the publishing job reads from the night's job. A
    version 1 report (no `version`: a patch's class as `klass`, its name as `patch`, hunks as "path:line", the PRs
    as `pulls`) is read too."""
    if isinstance(data, dict) and data.get("version", 1) == 1 and isinstance(data.get("patches"), list):
        old = {k: v for k, v in data.items() if k != "pulls"}
        data = {**old, "patches": [_patch_v1(p) for p in data["patches"]], "prs": data.get("pulls", [])}
    value = _decode(Report, data)
    assert isinstance(value, Report)
    return value


def _patch_v1(data: object) -> object:
    """A patch of a version 1 report.json in today's shape."""
    if not isinstance(data, dict):
        return data
    old = dict(data)
    hunks = [_hunk_v1(text) if isinstance(text, str) else text for text in old.pop("hunks", [])]
    return {"upstream": old.pop("upstream", None), "name": old.pop("patch", None), "class": old.pop("klass", None),
            **old, "hunks": hunks}


def _hunk_v1(text: str) -> dict[str, object]:
    path, _, line = text.rpartition(":")
    return {"path": path, "line": int(line)} if path and line.isdigit() else {"path": text, "line": None}


def hunk_text(hunk: Hunk) -> str:
    """A hunk that did not apply as people read it: path:line (the path alone when the line is not known)."""
    return hunk.path + (f":{hunk.line}" if hunk.line else "")


def _decode(kind: object, data: object) -> object:
    """JSON data as `kind` (a dataclass, enum, tuple[X, ...], X | None or a plain type); ValueError if it is not."""
    if kind is type(None) or data is None:
        if data is not None or (kind is not type(None) and type(None) not in typing.get_args(kind)):
            raise ValueError(f"expected {kind}, got {data!r}")
        return None
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [k for k in typing.get_args(kind) if k is not type(None)]
        return _decode(options[0], data)
    if origin is tuple:
        if not isinstance(data, list):
            raise ValueError(f"expected a list, got {data!r}")
        return tuple(_decode(typing.get_args(kind)[0], item) for item in data)
    if isinstance(kind, type) and issubclass(kind, Enum):
        return kind(data)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        if not isinstance(data, dict):
            raise ValueError(f"expected an object for {kind.__name__}, got {data!r}")
        hints = typing.get_type_hints(kind)
        fields = [(f.name, f.metadata.get("json", f.name)) for f in dataclasses.fields(kind)]
        return kind(**{name: _decode(hints[name], data[key]) for name, key in fields if key in data})
    if kind is float and isinstance(data, int) and not isinstance(data, bool):
        return float(data)
    if not isinstance(kind, type) or not isinstance(data, kind):
        raise ValueError(f"expected {kind}, got {data!r}")
    return data


def patch_reports(result: RebaseResult) -> tuple[PatchReport, ...]:
    """Each patch of the rebase, stack after stack: the rebase's own records, as the report carries them."""
    return tuple(p for s in result.stacks for p in s.patches)


def moves(ws: Workspace, result: RebaseResult, fetched: Sequence[Move]) -> list[Move]:
    """Old -> new base per upstream as the rebase saw them, with the commits between."""
    branches = {m.upstream: m.branch for m in fetched}
    moves = []
    for stack in result.stacks:
        mirror = ws.mirror(stack.name)
        commits = mirror.count(stack.old_base, stack.new_base) if mirror.is_ancestor(stack.old_base,
                                                                                      stack.new_base) else 0
        moves.append(Move(upstream=stack.name, branch=branches.get(stack.name, ws.stack.get(stack.name).branch),
                          old_base=stack.old_base, new_base=stack.new_base, commits=commits))
    return moves
