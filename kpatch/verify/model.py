"""What every verify check reports: one dataclass per finding, with the next step for a person."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Status(Enum):
    PASS = "pass"  # noqa: S105  # a check's status, not a password
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"  # could not be checked here (no lock, no worktree); the detail says why


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
