"""The dashboard's numbers, from the history: one model the page draws and `--json` prints (the same content)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kpatch.dashboard.history import VERSION, History, NightRecord, PatchRecord
from kpatch.dashboard.svg import Point, Series


@dataclass(frozen=True)
class PatchRow:
    """One patch as of the last night that saw it, with its history: an aggregate over its `PatchRecord`s (nights,
    conflicts, churn, the size and conflict series), not one night's record."""

    upstream: str
    patch: str
    subject: str
    klass: str = field(metadata={"json": "class"})
    last_seen: str  # the day of its last record
    nights: int  # nights it was recorded on
    conflicts: int  # nights it conflicted on
    churn: int  # nights a rebase changed it (its own lines or message: range-diff, not offsets or context)
    culprit: str | None  # the last conflict's culprit
    culprit_subject: str | None
    lines: int | None
    files: int | None
    age_days: int | None
    prs: tuple[str, ...]
    pr_state: str | None
    tests: str | None
    size: tuple[Point, ...]  # lines, one point per night
    conflict: tuple[Point, ...]  # 1 on a night it conflicted, else 0


@dataclass(frozen=True)
class PullRow:
    pr: str
    upstream: str
    patch: str
    state: str | None  # merged, not merged, None: not known
    date: str  # the night that last said so


@dataclass(frozen=True)
class Dashboard:
    version: int
    history: str  # the file it was drawn from
    nights: int
    first: str | None
    last: str | None
    last_night: NightRecord | None
    behind: tuple[Series, ...]  # commits behind the branch head, per upstream, one point per night
    patches: tuple[PatchRow, ...]
    pulls: tuple[PullRow, ...] = field(metadata={"json": "prs"})


def summarise(held: History, source: str) -> Dashboard:
    nights = sorted(held.nights, key=lambda n: n.started)
    by_patch: dict[tuple[str, str], list[PatchRecord]] = {}
    for record in sorted(held.patches, key=lambda r: r.started):
        by_patch.setdefault((record.upstream, record.patch), []).append(record)
    rows = [_row(records) for records in by_patch.values()]
    rows.sort(key=lambda r: (r.last_seen != (nights[-1].date if nights else r.last_seen), r.upstream, r.patch))
    upstreams: dict[str, list[Point]] = {}
    for night in nights:
        for behind in night.behind:
            upstreams.setdefault(behind.upstream, []).append(Point(night.date, behind.commits))
    asked = {(p.pr, p.upstream, p.patch): p for p in sorted(held.pulls, key=lambda p: p.started)}  # the last
    pulls = tuple(PullRow(pr=pr, upstream=r.upstream, patch=r.patch,  # the PR's own state when a night asked it
                          state=asked[pr, r.upstream, r.patch].state if (pr, r.upstream, r.patch) in asked
                          else r.pr_state, date=r.last_seen)
                  for r in rows for pr in r.prs)
    return Dashboard(version=VERSION, history=source, nights=len(nights), first=nights[0].date if nights else None,
                     last=nights[-1].date if nights else None, last_night=nights[-1] if nights else None,
                     behind=tuple(Series(name, tuple(points)) for name, points in upstreams.items()),
                     patches=tuple(rows), pulls=pulls)


def _row(records: list[PatchRecord]) -> PatchRow:
    last = records[-1]
    conflicted = [r for r in records if r.conflict]
    culprit = conflicted[-1] if conflicted else None
    read = [r for r in records if r.lines is not None]  # its file was read that night (a dropped one's is gone)
    subject = read[-1].subject if read else last.subject
    return PatchRow(upstream=last.upstream, patch=last.patch, subject=subject, klass=last.klass,
                    last_seen=last.date, nights=len(records), conflicts=len(conflicted),
                    churn=sum(r.change == "changed" for r in records),
                    culprit=culprit.culprit if culprit else None,
                    culprit_subject=culprit.culprit_subject if culprit else None,
                    lines=_known(records, "lines"), files=_known(records, "files"),
                    age_days=_known(records, "age_days"), prs=_known_prs(records),
                    pr_state=next((r.pr_state for r in reversed(records) if r.pr_state), None), tests=last.tests,
                    size=tuple(Point(r.date, r.lines) for r in records),
                    conflict=tuple(Point(r.date, int(r.conflict)) for r in records))


def _known(records: list[PatchRecord], field: str) -> int | None:
    """The last known value (a patch dropped as upstream has no file, so no size, on its last night)."""
    values = [getattr(r, field) for r in records if getattr(r, field) is not None]
    return values[-1] if values else None


def _known_prs(records: list[PatchRecord]) -> tuple[str, ...]:
    return next((r.prs for r in reversed(records) if r.prs), ())
