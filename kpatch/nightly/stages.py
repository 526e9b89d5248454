"""The night's four stages on the engine (rebase, build-wheels, verify, test), each turned into report data.

Each stage returns a `Done`: its exit code, one summary line, what it found (a typed record of its own: `Rebased`,
`Built`, `Verified`, `Tested`) and, when it failed, the `Failure`; a stage that fails may also raise (a KpatchError
with its exit code), which `timed` turns into the failure. The night builds its report once from these.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from kpatch.dashboard.night import (
    AcceptedFinding,
    Failure,
    Flag,
    Move,
    Selection,
    Stage,
    StageRun,
    StageStatus,
    Suite,
    hunk_text,
    moves,
    patch_reports,
)
from kpatch.engine.plan import load_all_series
from kpatch.engine.rebase import rebase as run_rebase
from kpatch.errors import ExitCode, KpatchError
from kpatch.forge import hosts
from kpatch.output.ui import UI
from kpatch.project.state import PatchClass
from kpatch.project.workspace import Workspace
from kpatch.verify.model import Check, Status, tally

if TYPE_CHECKING:
    from kpatch.engine.diff import StackDiff
    from kpatch.engine.reports import PatchReport
    from kpatch.forge.model import PullCheck
    from kpatch.testing.run import TestRun
    from kpatch.verify.contract import ContractReport
    from kpatch.wheels.record import BuiltWheel

TAIL = 40  # log lines in a failure's report
Show = Callable[[Stage, object], None]  # prints a stage's own result for people, as its command would
MERGED_NOTE = "merged upstream, not yet in the base: drop after the next bump"


@dataclass(frozen=True)
class Settings:
    """How the night builds and tests (the options build-wheels and test take)."""

    backend: str = "docker"
    image: str | None = None
    base_image: str | None = None
    devices: tuple[str, ...] = ()
    timeout: float | None = None


T = TypeVar("T")
Named = tuple[tuple[str, str, str], ...]  # (upstream, patch, PR) for each Upstream-PR a patch names


@dataclass(frozen=True)
class Done(Generic[T]):
    """What one stage did: its exit code (0: passed), one summary line, what it found, and why it failed."""

    code: int
    summary: str
    found: T | None  # None: it raised before it found anything
    failure: Failure | None = None


@dataclass(frozen=True)
class Rebased:
    """What the rebase stage found: the bases moved, the rebase's own patch reports and review, the flags."""

    moves: tuple[Move, ...]
    patches: tuple[PatchReport, ...]
    reviews: tuple[StackDiff, ...]
    flags: tuple[Flag, ...] = ()
    notes: tuple[str, ...] = ()  # things a person should know that are not failures (GitHub not asked, ...)
    pull_states: dict[str, str] | None = None  # each named PR's state after the rebase (None: not asked)


@dataclass(frozen=True)
class Built:
    """What the build stage made: the build's own wheel records, the lock, the containers it started."""

    wheels: tuple[BuiltWheel, ...]
    lock: Path
    containers: int


@dataclass(frozen=True)
class Verified:
    checks: tuple[Check, ...]
    contract: tuple[str, ...]  # the op contract per pair: what was counted, then each problem
    accepted: tuple[AcceptedFinding, ...]


@dataclass(frozen=True)
class Tested:
    suites: tuple[Suite, ...]
    log: Path | None = None  # the failing suite's own log (its tail goes into the failure)


def named_prs(ws: Workspace) -> Named:
    """The Upstream-PRs the patches name before the night's rebase drops any."""
    return tuple((name, patch.name, pr) for name, s in load_all_series(ws.stack).items()
                 for patch in s.patches for pr in patch.prs)


def rebase(ws: Workspace, ui: UI, show: Show, onto: Mapping[str, str] | None = None, discard: bool = False,
           fetched: Sequence[Move] = (), named: Named = ()) -> Done[Rebased]:
    """A real `kpatch rebase` of every stack onto its branch head (or `onto`: upstream -> commit, the search's
    steps); a conflict stays in progress for a person. `named`: the night's PRs, asked about once here."""
    result = run_rebase(ws, ui, onto or {}, force=False, discard=discard)
    show(Stage.REBASE, result)
    moved = tuple(moves(ws, result, fetched))
    patches = patch_reports(result)
    reviews = tuple(s.review for s in result.stacks if s.review is not None)
    notes = [result.github] if result.github else []
    check, states = None, None
    if onto is None and named and not result.github:  # ONE query: tonight's states, and the flags below
        check = hosts.check_pulls({pr for _, _, pr in named})
        if check.unavailable:
            notes.append(f"Upstream-PR states not reported: {check.unavailable}")
        else:
            states = {pr: check.pulls[pr].summary if pr in check.pulls else "not found" for _, _, pr in named}
    conflicts = [p for p in patches if p.klass is PatchClass.CONFLICT]
    if conflicts:
        failure = _conflict(ws, moved, conflicts)
        return Done(int(ExitCode.CONFLICT), failure.message,
                    Rebased(moved, patches, reviews, notes=tuple(notes), pull_states=states), failure)
    flags: list[Flag] = []
    if not result.github:  # GitHub answered the rebase a moment ago: ask it which applied patches' PRs merged
        flags = _merged_but_applied(ws, patches, notes, check)
        # imported where used: each stage's package loads when the stage runs: a no-op night loads none
        from kpatch.lines.lacking import merged_on_main_lacking

        flags += [Flag(upstream=f.upstream, patch=f.patch, pr=f.pr, merge_commit=f.merge_commit, note=f.note)
                  for f in merged_on_main_lacking(ws, notes)]
    counts = {k: sum(p.klass is k for p in patches) for k in PatchClass}
    return Done(0, f"{len(patches)} patch(es) onto the branch heads: {counts[PatchClass.CLEAN]} clean, "
                   f"{counts[PatchClass.THREE_WAY]} three-way, {counts[PatchClass.UPSTREAM]} dropped as upstream",
                Rebased(moved, patches, reviews, tuple(flags), tuple(notes), states))


def _conflict(ws: Workspace, moved: Sequence[Move], conflicts: list[PatchReport]) -> Failure:
    first = next((p for p in conflicts if not p.why.startswith("trial")), conflicts[0])  # the real stop first
    culprit = first.culprit
    broke = (f"broken by upstream {culprit.sha[:12]} \"{culprit.subject}\" by {culprit.author}" if culprit
             else "the upstream commit that broke it was not found")
    onto = " ".join(f"--onto {m.upstream}={m.new_base}" for m in moved)
    scratch = ws.scratch_dir / first.upstream
    files = f" ({', '.join(hunk_text(h) for h in first.hunks)})" if first.hunks else ""
    steps = (f"The rebase is left in progress in {scratch}: fix {first.name} there{files}, 'git add' the files, "
             "then run 'kpatch rebase --continue' (or 'kpatch rebase --abort').",
             f"From another checkout, the same rebase: 'kpatch rebase {onto}'.",
             "Then commit kpatch.toml and patches/ (with patches/.rerere: the resolution is replayed next time).")
    more = f" (+{len(conflicts) - 1} more conflict(s))" if len(conflicts) > 1 else ""
    return Failure(stage=Stage.REBASE, exit_code=int(ExitCode.CONFLICT),
                   message=f"{first.upstream}/{first.name} conflicts: {broke}{more}", resolve=steps, log_tail=())


def _merged_but_applied(ws: Workspace, patches: Sequence[PatchReport], notes: list[str],
                        asked: PullCheck | None = None) -> list[Flag]:
    """Patches that applied although GitHub says their Upstream-PR is merged (the merge is not in the base);
    `asked`: the night's answer already in hand (else GitHub is asked here)."""
    series = load_all_series(ws.stack)
    applied = {(p.upstream, p.name) for p in patches if p.klass.applies}
    prs = {(name, patch.name): patch.prs for name, s in series.items() for patch in s.patches
           if (name, patch.name) in applied and patch.prs}
    if not prs:
        return []
    check = asked or hosts.check_pulls({pr for names in prs.values() for pr in names})
    if check.unavailable:
        if asked is not None:  # the night's note says so already
            return []
        notes.append(f"merged Upstream-PRs not flagged: {check.unavailable}")
        return []
    flags = []
    for (name, patch), names in sorted(prs.items()):
        for pr in names:
            state = check.pulls.get(pr)
            if state is not None and state.merged:
                flags.append(Flag(upstream=name, patch=patch, pr=pr, merge_commit=state.merge_commit,
                                  note=MERGED_NOTE))
    return flags


def build(ws: Workspace, ui: UI, show: Show, settings: Settings) -> Done[Built]:
    from kpatch.wheels.build import build_wheels

    result = build_wheels(ws, ui, backend=settings.backend, image=settings.image, base_image=settings.base_image,
                          out=ws.dist_dir)
    show(Stage.BUILD, result)
    cached = sum(w.cached for w in result.wheels)
    return Done(0, f"{len(result.wheels)} wheel(s) ({cached} from the cache, {result.containers} container(s)); "
                   f"lock {result.lock.name}", Built(result.wheels, result.lock, result.containers))


def verify(ws: Workspace, ui: UI, show: Show, lock: Path) -> Done[Verified]:
    from kpatch.verify.run import verify as run_verify

    result = run_verify(ws, ui, lock_path=lock, installed=False)
    show(Stage.VERIFY, result)
    found = Verified(checks=tuple(result.checks),
                     contract=tuple(line for c in result.contracts if c.report is not None
                                    for line in contract_lines(c.kernels, c.app, c.report)),
                     accepted=tuple(accepted_findings(ws, [(f"{c.kernels} -> {c.app}", c.report)
                                                           for c in result.contracts if c.report is not None])))
    failed = [c for c in result.checks if c.status is Status.FAIL]
    if failed:
        first = failed[0]
        failure = Failure(stage=Stage.VERIFY, exit_code=int(ExitCode.CONFLICT),
                          message=f"verify: {first.area} {first.subject}: {first.detail}",
                          resolve=tuple(c.fix for c in failed if c.fix), log_tail=())
        return Done(int(ExitCode.CONFLICT), failure.message, found, failure)
    return Done(0, tally(result.checks), found)


def accepted_findings(ws: Workspace, reports: Sequence[tuple[str, ContractReport]]) -> list[AcceptedFinding]:
    """The findings the baseline accepted in each pair's report, with the reason written for each."""
    from kpatch.verify import baseline

    reasons = {a.fingerprint: a.reason for a in baseline.read(baseline.path_of(ws.stack))}
    return [AcceptedFinding(pair=pair, op=f.op, kind=f.kind, function=f.function, site=f"{f.site.file}:{f.site.line}",
                            reason=reasons.get((pair, *f.fingerprint), ""))
            for pair, report in reports for f in report.accepted]


def contract_lines(kernels: str, app: str, report: ContractReport) -> list[str]:
    """The op contract of one pair for the report: its new and accepted findings, what was checked and counted,
    then each problem (accepted findings are listed apart, see accepted_findings)."""
    from kpatch.verify.contract import findings

    breaking = [m for m in report.mismatches if m.breaking]
    lines = [f"{kernels} -> {app} (libraries {', '.join(report.namespaces)}): {len(findings(report))} new "
             f"finding(s), {len(report.accepted)} accepted (the verify baseline); "
             f"{sum(len(g.ops) for g in report.missing)} op(s) not served on XPU, {len(breaking)} breaking schema "
             f"difference(s), {len(report.unbound)} call(s) that do not bind; not counted: {len(report.cuda_only)} "
             f"listed cuda-only, {len(report.other_backends)} only in {app}'s CPU/ROCm builds (not reached), "
             f"{report.off_xpu_calls} call site(s) off the XPU path, {report.probes} probe(s)"]
    lines += [f"{op.namespace}.{op.op}: {op.gap.value}, called from {gaps.module} at "
              f"{', '.join(str(site) for site in op.sites[:3])}" for gaps in report.missing for op in gaps.ops]
    lines += [f"{m.namespace}.{m.op} schema differs{'' if m.breaking else ' (allowed)'}: "
              f"{'; '.join(d.detail for d in m.diffs)} ({app} {m.declared} vs {kernels} {m.registered})"
              for m in report.mismatches]
    lines += [f"{u.namespace}.{u.op} call at {u.call} does not bind: {u.reason}" for u in report.unbound]
    return lines + [f"unreadable: {problem}" for problem in report.problems]


def tests_declared(ws: Workspace) -> bool:
    """Some upstream declares [upstream.test]: the test stage has something to run."""
    return any(u.test for u in ws.stack.upstreams)


def test(ws: Workspace, ui: UI, show: Show, settings: Settings, lock: Path,
         order: Mapping[str, tuple[str, ...]] | None = None) -> Done[Tested] | None:
    """The suites against the new lock; None when no upstream declares [upstream.test] (nothing to run). `order`
    (upstream -> its test files, see `select_tests`) runs those files of an upstream first."""
    from kpatch.testing.suites import run_suites

    if not tests_declared(ws):
        return None
    result = run_suites(ws, ui, devices=settings.devices, timeout=settings.timeout, lock=lock,
                        reports=ws.reports_dir, backend=settings.backend, tests=dict(order or {}))
    show(Stage.TEST, result)
    suites = tuple(_suite(s) for s in result.suites)
    code = int(result.exit_code)
    bad = [s for s in result.suites if s.outcome.value != "passed"]
    if code and bad:
        steps = [f"{s.upstream}: newly failing: {', '.join(s.changes.newly_failing)}" for s in bad
                 if s.changes and s.changes.newly_failing]
        failure = Failure(stage=Stage.TEST, exit_code=code, message=f"test: {bad[0].upstream}: {bad[0].message}",
                          resolve=(*steps, f"the suites' logs and JUnit reports are in {result.reports}"),
                          log_tail=())
        return Done(code, failure.message, Tested(suites, bad[0].log), failure)
    return Done(code, _test_summary(result), Tested(suites))


def select_tests(ws: Workspace, ui: UI, lock: Path, diffs: Mapping[str, tuple[str, str]],
                 selections: list[Selection]) -> dict[str, tuple[str, ...]]:
    """Each test-selection upstream's test files in the order they run (`selections` gets why, one per
    upstream; it is filled as they are chosen, so a stage that stops later still says what it chose)."""
    from kpatch.nightly.selection import select
    from kpatch.testing.env import read_pair

    order: dict[str, tuple[str, ...]] = {}
    chosen = [u for u in ws.stack.upstreams if u.test_selection and u.test and u.name in diffs]
    if not chosen:
        return order
    pair = read_pair(lock)
    for upstream in chosen:
        assert upstream.test is not None
        base, commit = diffs[upstream.name]
        selection, files = select(ws.mirror(upstream.name), upstream.name, base, commit,
                                  pair.commit(upstream.name), upstream.test.paths)
        selections.append(selection)
        order[upstream.name] = files
        if selection.first:
            ui.note(f"test selection: {upstream.name} runs first {', '.join(selection.first)} (the upstream diff "
                    f"{base[:12]}..{commit[:12]} touches them), then {selection.rest} other test file(s)")
        else:
            ui.note(f"test selection: {upstream.name}: the upstream diff {base[:12]}..{commit[:12]} touches none "
                    f"of its {selection.rest} test file(s): they run in path order")
    return order


def _suite(s: object) -> Suite:
    from kpatch.testing.run import SuiteResult

    assert isinstance(s, SuiteResult)
    c = s.counts
    return Suite(upstream=s.upstream, outcome=s.outcome.value, message=s.message, passed=c.passed if c else 0,
                 failed=c.failed if c else 0, errors=c.errors if c else 0, skipped=c.skipped if c else 0,
                 failing=tuple(f"{case.id}: {case.message}" for case in s.failing),
                 newly_failing=s.changes.newly_failing if s.changes else (),
                 newly_passing=s.changes.newly_passing if s.changes else (), compared=s.changes is not None,
                 running=s.running, seconds=s.seconds)


def _test_summary(result: TestRun) -> str:
    passed = sum(s.counts.passed for s in result.suites if s.counts)
    return f"{len(result.suites)} suite(s), {passed} test(s) passed"


@dataclass(frozen=True)
class Timed(Generic[T]):
    """One stage run in its log group: its line in the report, what it found (None: it raised, or had nothing
    to do), and why it failed (its own failure, or the error it raised)."""

    run: StageRun
    found: T | None
    failure: Failure | None


def timed(ui: UI, stage: Stage, body: Callable[[], Done[T] | None]) -> Timed[T]:
    """Run one stage in its own log group; its error becomes its failure, with the exit code it owns. A stage
    with nothing to do (None) is SKIPPED."""
    started = time.monotonic()
    done: Done[T] | None
    with ui.group(f"kpatch nightly: {stage.value}"):
        try:
            done = body()
        except KpatchError as err:
            first, _, rest = str(err).partition("\n")
            lines = [line for line in rest.splitlines() if line.strip()]  # a build's log tail, a hint
            failure = Failure(stage=stage, exit_code=int(err.exit_code), message=first,
                              resolve=tuple(line for line in lines if line.startswith("hint:")),
                              log_tail=tuple(line for line in lines if not line.startswith("hint:"))[-TAIL:])
            done = Done(int(err.exit_code), first, None, failure)
    seconds = round(time.monotonic() - started, 3)
    if done is None:
        return Timed(StageRun(stage, StageStatus.SKIPPED, seconds, 0, "no upstream declares [upstream.test]"), None,
                     None)
    code, summary = done.code, done.summary
    if code:
        ui.warn(f"{stage.value} failed (exit {code}): {summary}")
    else:
        ui.note(f"{stage.value} passed in {seconds:.1f} s: {summary}")
    return Timed(StageRun(stage, StageStatus.FAILED if code else StageStatus.PASSED, seconds, code, summary),
                 done.found, done.failure)
