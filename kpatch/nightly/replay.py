"""`kpatch nightly --replay FROM..TO`: the carry history from day one, by replaying an upstream's real past.

The upstream's first-parent commits FROM..TO are cut into steps (the last commit of each day, or every N commits);
each step is one night's rebase stage, as the nightly runs it (`stages.rebase`), onto that commit, the other
upstreams held at their pins. A step that conflicts leaves the pins where they were (no person resolves it in a
replay): the next step tries again from them, as the next night would, and the step counts as a night a person
would have been needed. Each step appends its night to the carry history, dated by its commit.

Everything happens in a scratch folder (a copy of kpatch.toml, patches/ and the recorded resolutions, its own
mirrors seeded from the project's, its own work folder and run state), removed at the end: the project's files,
worktrees, run state, lock and mirrors are not touched. Only the history file is written.
"""

from __future__ import annotations

import functools
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from kpatch import __version__, config, forge
from kpatch.config import Stack
from kpatch.dashboard import history
from kpatch.dashboard.night import Outcome, Report, Stage, StageRun, StageStatus
from kpatch.dashboard.record import records
from kpatch.engine.plan import fetch
from kpatch.engine.rebase import abort_rebase
from kpatch.errors import UpstreamError, UsageError
from kpatch.nightly import stages
from kpatch.nightly.stages import timed
from kpatch.output.ui import UI
from kpatch.project.state import PatchClass
from kpatch.project.workspace import Workspace
from kpatch.scratch import folder as scratch_folder

MAX_STEPS = 100  # steps a replay takes unless --max-steps says otherwise
NOT_RUN = "replay: the rebase stage only"


@dataclass(frozen=True)
class Range:
    upstream: str
    since: str
    until: str


def parse_range(text: str, stack: Stack) -> Range:
    """`[NAME=]FROM..TO`; NAME defaults to the first upstream in kpatch.toml (the kernels)."""
    name, sep, span = text.partition("=")
    if not sep:
        name, span = stack.upstreams[0].name, text
    since, dots, until = span.partition("..")
    if not dots or not since or not until or until.startswith("."):
        raise UsageError(f"--replay {text!r}: expected [NAME=]FROM..TO (two commits, tags or branches of the "
                         "upstream, e.g. --replay kernels=v0.1.0..main)")
    stack.get(name)  # an unknown upstream is refused, naming the known ones
    return Range(upstream=name, since=since, until=until)


@dataclass(frozen=True)
class StepConflict:
    patch: str
    culprit: str | None  # the upstream commit that broke it
    culprit_subject: str | None


@dataclass(frozen=True)
class ReplayStep:
    """One replayed night: the rebase stage onto one upstream commit."""

    step: int
    commit: str
    date: str  # the commit's committer time, UTC, ISO 8601: the night it stands for
    subject: str
    commits: int  # upstream commits since the previous step
    behind: int  # upstream commits between the pin the night started from and this commit
    clean: int
    three_way: int
    dropped: int  # patches dropped as upstream (their class: upstream)
    conflict: int
    not_tried: int
    conflicts: tuple[StepConflict, ...]
    person: bool  # a person would have been needed: the night stopped (a conflict or another failure)
    summary: str


@dataclass(frozen=True)
class ReplayCulprit:
    sha: str
    subject: str
    patches: tuple[str, ...]
    nights: int  # steps it was named the culprit on


@dataclass(frozen=True)
class Replay:
    upstream: str
    since: str  # FROM, as a SHA
    until: str  # TO, as a SHA
    per: str  # "day", or "N commits"
    commits: int  # first-parent commits in FROM..TO
    steps: tuple[ReplayStep, ...]
    person_nights: int  # nights a person would have been needed
    conflicts: int  # patch conflicts over all steps
    culprits: tuple[ReplayCulprit, ...]
    base: str  # where the stack's pin ended: the last step that applied (FROM when none did)
    history: str
    records: int  # records the replay's steps wrote to the history


def choose_steps(log: list[tuple[str, int, str]], every: int | None) -> list[tuple[str, int, str, int]]:
    """(SHA, time, subject, commits covered) of each step: the last commit of each UTC day (every=None), or every
    `every`-th commit; the last commit is always one."""
    steps: list[tuple[str, int, str, int]] = []
    covered = 0
    for index, (sha, stamp, subject) in enumerate(log):
        covered += 1
        last = index == len(log) - 1
        if every is None:
            end = last or time.gmtime(log[index + 1][1])[:3] != time.gmtime(stamp)[:3]
        else:
            end = last or covered == every
        if end:
            steps.append((sha, stamp, subject, covered))
            covered = 0
    return steps


def replay(ws: Workspace, ui: UI, span: Range, *, every: int | None, max_steps: int, path: Path) -> Replay:
    """Replay `span` in a scratch folder, appending each step's night to the history at `path`."""
    with scratch_folder("replay") as scratch, forge.offline("a replay runs offline"):
        return _replay(ws, ui, span, every, max_steps, path, scratch)


def _replay(ws: Workspace, ui: UI, span: Range, every: int | None, max_steps: int, path: Path,
            scratch: Path) -> Replay:
    toml = _copy_project(ws.stack, scratch / "project")
    cache = scratch / "cache"
    sws = _workspace(ws.stack, toml, cache, scratch / "work")
    for each in ws.stack.upstreams:  # the project's mirrors copied (hard links): each fetch then brings only news
        sws.mirror(each.name).seed(ws.mirror(each.name))
    upstream = sws.stack.get(span.upstream)
    mirror = fetch(sws, ui, upstream)
    since, until = mirror.resolve(span.since), mirror.resolve(span.until)
    for ref, sha in ((span.since, since), (span.until, until)):
        if sha is None:
            raise UpstreamError(f"--replay: {ref!r} is not a commit, tag or branch of upstream {upstream.name} "
                                f"({upstream.display_url})")
    assert since is not None and until is not None
    if since == until or not mirror.is_ancestor(since, until):
        raise UsageError(f"--replay {span.since}..{span.until}: {span.until} ({until[:12]}) does not come after "
                         f"{span.since} ({since[:12]}) in upstream {upstream.name}'s history")
    log = mirror.first_parent_log(since, until)
    chosen = choose_steps(log, every)
    per = "day" if every is None else f"{every} commit(s)"
    if len(chosen) > max_steps:
        raise UsageError(f"--replay {span.since}..{span.until}: {len(log)} commit(s) make {len(chosen)} steps (one "
                         f"per {per}), more than --max-steps {max_steps}: give a shorter range, a larger --step N or "
                         "a larger --max-steps")
    held: dict[str, str] = {}  # the other upstreams stay at their pins
    for other in sws.stack.upstreams:
        if other.name != span.upstream:
            pinned = sws.mirror(other.name).resolve(other.base) if sws.mirror(other.name).exists else None
            held[other.name] = pinned or fetch(sws, ui, other).resolve(other.base) or other.base
    toml.write_bytes(config.with_new_bases(toml, {span.upstream: since}))
    ui.note(f"replaying {upstream.name} {since[:12]}..{until[:12]}: {len(log)} commit(s), {len(chosen)} step(s) "
            f"(one per {per}), the rebase stage only, in {scratch}")
    steps: list[ReplayStep] = []
    held_records = 0
    base = since
    for number, (sha, stamp, subject, covered) in enumerate(chosen, 1):
        sws = _workspace(ws.stack, toml, cache, scratch / "work")
        onto = {**held, span.upstream: sha}
        with ui.group(f"kpatch nightly --replay: step {number}/{len(chosen)} {sha[:12]}"):
            done = timed(ui, Stage.REBASE, functools.partial(stages.rebase, sws, ui, _quiet, onto=onto, discard=True))
        run, found = done.run, done.found
        stopped = run.status is StageStatus.FAILED
        if stopped:
            _abort(sws)
        else:
            base = sha
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))
        report = Report(kpatch_version=__version__, started=started,
                        outcome=Outcome.FAILED if stopped else Outcome.PASSED, exit_code=run.exit_code,
                        summary=f"replayed at {upstream.name} {sha[:12]}: {run.summary}",
                        stages=(run, *(StageRun(s, StageStatus.SKIPPED, 0.0, 0, NOT_RUN)
                                       for s in (Stage.BUILD, Stage.VERIFY, Stage.TEST))),
                        moves=found.moves if found else (), patches=found.patches if found else (),
                        notes=found.notes if found else (), failure=done.failure)
        after = _workspace(ws.stack, toml, cache, scratch / "work").stack
        held_records += history.append(path, records(after, report))
        steps.append(_step(number, sha, started, subject, covered, report, stopped))
        ui.note(f"step {number}/{len(chosen)} {started[:10]} {sha[:12]}: {steps[-1].summary}")
    return _summary(span.upstream, since, until, per, len(log), steps, base, path, held_records)


def _step(number: int, sha: str, started: str, subject: str, covered: int, report: Report,
          stopped: bool) -> ReplayStep:
    lines = list(report.patches)
    count = {k: sum(p.klass is k for p in lines) for k in PatchClass}
    conflicts = tuple(StepConflict(patch=f"{p.upstream}/{p.name}", culprit=p.culprit.sha if p.culprit else None,
                                   culprit_subject=p.culprit.subject if p.culprit else None)
                      for p in lines if p.klass is PatchClass.CONFLICT)
    behind = next((m.commits for m in report.moves if m.new_base == sha), 0)
    summary = report.stages[0].summary if stopped else (
        f"{count[PatchClass.CLEAN]} clean, {count[PatchClass.THREE_WAY]} three-way, "
        f"{count[PatchClass.UPSTREAM]} dropped as upstream")
    return ReplayStep(step=number, commit=sha, date=started, subject=subject, commits=covered, behind=behind,
                      clean=count[PatchClass.CLEAN], three_way=count[PatchClass.THREE_WAY],
                      dropped=count[PatchClass.UPSTREAM], conflict=count[PatchClass.CONFLICT],
                      not_tried=count[PatchClass.NOT_TRIED], conflicts=conflicts, person=stopped, summary=summary)


def _summary(name: str, since: str, until: str, per: str, commits: int, steps: list[ReplayStep], base: str,
             path: Path, held: int) -> Replay:
    culprits: dict[str, ReplayCulprit] = {}
    for step in steps:
        for c in step.conflicts:
            if c.culprit is None:
                continue
            known = culprits.get(c.culprit) or ReplayCulprit(c.culprit, c.culprit_subject or "", (), 0)
            patches = known.patches if c.patch in known.patches else (*known.patches, c.patch)
            culprits[c.culprit] = replace(known, patches=patches, nights=known.nights + 1)
    return Replay(upstream=name, since=since, until=until, per=per, commits=commits, steps=tuple(steps),
                  person_nights=sum(s.person for s in steps), conflicts=sum(s.conflict for s in steps),
                  culprits=tuple(culprits.values()), base=base, history=str(path), records=held)


def _copy_project(stack: Stack, folder: Path) -> Path:
    """kpatch.toml, each stack's patch folder and the recorded resolutions, at the same places under `folder`."""
    root = stack.root.resolve()
    folder.mkdir(parents=True)
    toml = folder / stack.path.name
    toml.write_bytes(stack.path.read_bytes())
    for tree in [u.patches for u in stack.upstreams] + [root / "patches" / ".rerere"]:
        if tree.is_dir():
            shutil.copytree(tree, folder / tree.resolve().relative_to(root), symlinks=True)
    return toml


def _workspace(stack: Stack, toml: Path, cache: Path, work: Path) -> Workspace:
    """The scratch project as loaded now (its bases move as steps apply), fetching from the project's URLs (a
    --url or KPATCH_URL_<NAME> override included)."""
    loaded = config.load(toml)
    urls = {u.name: u for u in stack.upstreams}
    upstreams = tuple(replace(u, url=urls[u.name].url, url_overridden=urls[u.name].url_overridden,
                              configured_url=urls[u.name].configured_url)
                      for u in loaded.upstreams)
    return Workspace(stack=replace(loaded, upstreams=upstreams, history=None, dashboard_issue=False),
                     cache_dir=cache, workdir=work)


def _quiet(_stage: Stage, _result: object) -> None:
    """A step's rebase result is not printed as `kpatch rebase` prints it: the step's line says it."""


def _abort(ws: Workspace) -> None:
    """Drop a rebase the step left in progress: the next night starts from the pins again."""
    if ws.read_state().operation is not None or ws.pending_journal():
        abort_rebase(ws, UI(quiet=True))
