"""What every verify check reports: one dataclass per finding, with the next step for a person."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum


class Status(Enum):
    """A check's verdict, in the words every command's JSON uses (doctor's findings, the nightly's stages)."""

    PASS = "passed"  # noqa: S105  # a check's status, not a password
    FAIL = "failed"
    WARN = "warning"
    SKIP = "skipped"  # could not be checked here (no lock, no worktree); the detail says why

    @property
    def word(self) -> str:
        """The short word a table shows (pass, fail, warn, skip)."""
        return _WORDS[self]


_WORDS = {Status.PASS: "pass", Status.FAIL: "fail", Status.WARN: "warn", Status.SKIP: "skip"}


@dataclass(frozen=True)
class Check:
    """One verified fact about the set, or what is wrong with it and what to run next."""

    area: str  # "wheel", "pin", "torch", "contract", "installed", "record", "provenance", "patches", "dispatcher"
    subject: str  # a file, a package, an op
    status: Status
    detail: str
    fix: str = ""  # what to install or run next (a failed or warned check)


def passed(area: str, subject: str, detail: str) -> Check:
    return Check(area, subject, Status.PASS, detail)


def failed(area: str, subject: str, detail: str, fix: str) -> Check:
    return Check(area, subject, Status.FAIL, detail, fix)


def tally(checks: Sequence[Check]) -> str:
    """Every check counted, and the failed ones: "5 checks, 0 failed" (the demo and the nightly's
    verify stage count the same checks)."""
    failed = sum(c.status is Status.FAIL for c in checks)
    return f"{len(checks)} checks, {failed} failed"
