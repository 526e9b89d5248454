"""Carry histories for the dashboard's tests, written as a nightly writes them (history.append)."""

from __future__ import annotations

from pathlib import Path

from kpatch.dashboard import history
from kpatch.dashboard.history import Behind, NightRecord, PatchRecord, StageLine, SuiteLine

HOSTILE = '<script>document.title="owned"</script><img src=x onerror="document.title=\'owned\'"> & "quoted"'


def night(day: str, behind: dict[str, int], outcome: str = "passed") -> NightRecord:
    failed = outcome == "failed"
    stages = (StageLine("rebase", "failed" if failed else "passed", 1.5, "3 patch(es) onto the branch heads"),
              *(StageLine(s, "skipped" if failed else "passed", 2.0, "ok") for s in ("build", "verify", "test")))
    suites = () if failed else (SuiteLine("kernels", "passed", 12, 0, 0, 1, "12 passed"),)
    return NightRecord(date=day, started=f"{day}T02:00:00Z", outcome=outcome, summary=f"{outcome} <b>bold</b>",
                       behind=tuple(Behind(u, "main", n, "a" * 40) for u, n in behind.items()), stages=stages,
                       suites=suites)


def patch(day: str, upstream: str, name: str, *, lines: int | None = 10, klass: str = "clean",
          subject: str = "Add the op", behind: int = 3, prs: tuple[str, ...] = ()) -> PatchRecord:
    conflict = klass == "conflict"
    return PatchRecord(date=day, started=f"{day}T02:00:00Z", upstream=upstream, behind=behind, patch=name,
                       subject=subject, klass=klass, conflict=conflict, culprit="c" * 40 if conflict else None,
                       culprit_subject="Rework <it>" if conflict else None, lines=lines, files=2 if lines else None,
                       age_days=40, prs=prs, pr_state="not merged" if prs else None, tests="passed")


def three_nights(path: Path) -> Path:
    """Three nights of two upstreams, three patches; the second night a conflict; a hostile subject."""
    days = ("2026-11-28", "2026-11-29", "2026-11-30")
    for index, day in enumerate(days):
        history.append(path, [
            night(day, {"kernels": 3 + index * 4, "app": 10 - index}, "failed" if index == 1 else "passed"),
            patch(day, "kernels", "0001-Add-the-op.patch", lines=10 + index * 5,
                  klass="conflict" if index == 1 else "clean", prs=("acme/kernels#5",)),
            patch(day, "kernels", "0002-Tune.patch", lines=200, klass="three-way"),
            patch(day, "app", "0001-Route.patch", lines=3, subject=HOSTILE)])
    return path
