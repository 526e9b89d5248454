"""A night's report as history records: what the nightly knows about each patch, kept instead of thrown away."""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING

from kpatch import __version__
from kpatch.config import Stack
from kpatch.dashboard import history
from kpatch.dashboard.history import Behind, NightRecord, PatchRecord, StageLine, SuiteLine
from kpatch.dashboard.night import Outcome, Report, Stage, StageRun, StageStatus, moves, patch_reports
from kpatch.errors import KpatchError
from kpatch.output.ui import UI
from kpatch.project.state import PatchClass
from kpatch.project.workspace import Workspace
from kpatch.stack.mbox import parse_head, read_text

if TYPE_CHECKING:
    from kpatch.engine.reports import PatchReport, RebaseResult

log = logging.getLogger("kpatch")
NOT_ASKED = "Upstream-PR states not checked"  # in a note: GitHub was not asked, so no PR's state is known


def location(stack: Stack, report_dir: Path) -> Path:
    """Where the history lives: [dashboard] history, else history.jsonl in the nightly's report folder (the
    folder a CI job keeps as its artifact and brings back the next night)."""
    return stack.history or report_dir / history.NAME


def record_night(ui: UI, stack: Stack, report: Report, path: Path) -> None:
    """Append the night to the history; a history that cannot be written is a warning, never the night's end."""
    try:
        held = history.append(path, records(stack, report))
    except (KpatchError, OSError, ValueError, RecursionError, MemoryError) as err:  # never the command's end
        ui.warn(f"carry history not updated: {err}")
        return
    ui.note(f"carry history: {path} ({held} record(s) written)")


def record_rebase(ui: UI, ws: Workspace, result: RebaseResult) -> None:
    """`kpatch rebase` (and --continue) appends one record per patch to the carry history: [dashboard] history,
    else the nightly's default (reports/nightly/history.jsonl next to kpatch.toml), so that `kpatch report` has
    the rebases of a project that runs no nightly. A history that cannot be written is a warning, never the
    rebase's end."""
    path = location(ws.stack, ws.nightly_dir)
    conflict = result.conflict is not None
    try:
        run = StageRun(Stage.REBASE, StageStatus.FAILED if conflict else StageStatus.PASSED, 0.0, 0,
                       "kpatch rebase")
        report = Report(kpatch_version=__version__, started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        outcome=Outcome.FAILED if conflict else Outcome.PASSED, exit_code=0, summary="kpatch rebase",
                        stages=(run,), moves=tuple(moves(ws, result, [])), patches=patch_reports(result),
                        reviews=tuple(s.review for s in result.stacks if s.review is not None))
        held = history.append(path, patch_records(ws.stack, report, pr_states=False))
    except (KpatchError, OSError, ValueError, RecursionError, MemoryError) as err:  # never the command's end
        ui.warn(f"carry history not updated: {err}")
        return
    ui.note(f"carry history: {path} ({held} record(s) written)")


def dashboard_issue(ui: UI, path: Path) -> str | None:
    """The carry dashboard issue's body from the history; None (nothing to edit) when there is no history or it
    cannot be read (a warning: the night's report goes on)."""
    # imported where used: the dashboard issue's body only when that issue is on: rebase imports this module
    from kpatch.dashboard.markdown import issue_body
    from kpatch.dashboard.summary import summarise

    if not path.is_file():
        return None
    try:
        return issue_body(summarise(history.read(path), str(path)))
    except KpatchError as err:
        ui.warn(f"carry dashboard issue not edited: {err}")
        return None


def records(stack: Stack, report: Report) -> list[history.Record]:
    """The night's record, then one per patch the rebase saw, then one per Upstream-PR state asked that night."""
    started = report.started
    day = started[:10]
    night = NightRecord(
        date=day, started=started, outcome=report.outcome.value, summary=report.summary,
        behind=tuple(Behind(upstream=m.upstream, branch=m.branch, commits=m.commits, head=m.new_base)
                     for m in report.moves),
        stages=tuple(StageLine(stage=s.stage.value, status=s.status.value, seconds=s.seconds, summary=s.summary)
                     for s in report.stages),
        suites=tuple(SuiteLine(upstream=s.upstream, outcome=s.outcome, passed=s.passed, failed=s.failed,
                               errors=s.errors, skipped=s.skipped, message=s.message) for s in report.suites))
    return [night, *patch_records(stack, report)]


def patch_records(stack: Stack, report: Report, *, pr_states: bool = True) -> list[history.Record]:
    """One record per patch the report's rebase saw (a night's, or a `kpatch rebase`'s: its one stage; that one
    asks no PR state, `pr_states=False`, so no state is recorded)."""
    started = report.started
    day = started[:10]
    behind = {m.upstream: m.commits for m in report.moves}
    tests = {s.upstream: s.outcome for s in report.suites}
    merged = {(f.upstream, f.patch) for f in report.flags}
    rebase = report.stage(Stage.REBASE)
    asked = pr_states and rebase is not None and rebase.status is StageStatus.PASSED and \
        not any(NOT_ASKED in n for n in report.notes)
    changes = {(r.upstream, p.name): p.change.value for r in report.reviews for p in r.patches}
    out: list[history.Record] = []
    for line in report.patches:
        size = _size(stack, line)
        prs = size.prs
        # GitHub's answer that night: a merged PR on a patch that still applied is flagged; an unflagged PR was
        # asked about and is not merged, unless GitHub was not asked (offline, down) or the rebase failed first
        state = "merged" if (line.upstream, line.name) in merged else "not merged" if prs and asked else None
        out.append(PatchRecord(
            date=day, started=started, upstream=line.upstream, behind=behind.get(line.upstream, 0), patch=line.name,
            subject=size.subject, klass=line.klass.value, conflict=line.klass is PatchClass.CONFLICT,
            culprit=line.culprit.sha if line.culprit else None,
            culprit_subject=line.culprit.subject if line.culprit else None, lines=size.lines, files=size.files,
            age_days=_age(size.date, started), prs=prs, pr_state=state, tests=tests.get(line.upstream),
            change=changes.get((line.upstream, line.name))))
    out += [history.PullRecord(date=day, started=started, pr=p.pr, upstream=p.upstream, patch=p.patch, state=p.state)
            for p in report.pulls]
    return out


@dataclass(frozen=True)
class _Size:
    subject: str
    lines: int | None
    files: int | None
    date: str | None
    prs: tuple[str, ...]


def _size(stack: Stack, line: PatchReport) -> _Size:
    """The patch file as it is after the night: subject, changed lines and files, date, PRs (all unknown when the
    file is gone: a patch dropped as upstream)."""
    try:
        path = stack.get(line.upstream).patches / line.name
        text = read_text(path)
        patch = parse_head(text, path)  # the rebase or the night wrote the file and read it whole already
    except (KpatchError, OSError) as err:
        log.debug("history: %s/%s not read: %s", line.upstream, line.name, err)
        return _Size(line.name, None, None, None, ())
    body = text.split("\ndiff --git ", 1)
    return _Size(patch.subject, _changed(body[1]) if len(body) == 2 else 0, text.count("\ndiff --git "), patch.date,
                 patch.prs)


_OTHER_BREAKS = re.compile("[\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")  # where splitlines() breaks besides \n
_SIGNED = re.compile(r"^[+-]", re.MULTILINE)
_FILE_LINE = re.compile(r"^(?:\+\+\+ |--- )", re.MULTILINE)
_SIGNATURE = re.compile(r"^-- $", re.MULTILINE)


def _changed(diff: str) -> int:
    """The diff's lines (as splitlines() cuts them) that start with + or -, but for its ---/+++ file lines and the
    mail's `-- ` signature line: counted by the regex engine when the lines are cut at \n only (nearly always)."""
    if _OTHER_BREAKS.search(diff) is None:
        return len(_SIGNED.findall(diff)) - len(_FILE_LINE.findall(diff)) - len(_SIGNATURE.findall(diff))
    return sum(1 for row in diff.splitlines()
               if row[:1] in ("+", "-") and row != "-- " and not row.startswith(("+++ ", "--- ")))


def _age(date: str | None, started: str) -> int | None:
    if date is None:
        return None
    try:
        written = parsedate_to_datetime(date)
        night = datetime.strptime(started, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except (TypeError, ValueError):
        return None
    if written.tzinfo is None:
        written = written.replace(tzinfo=UTC)
    return max(0, (night - written).days)
