"""What a forge answers and what kpatch did there, in no forge's own terms: the records behind `forge.Forge`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    """What a result is about."""

    PULL = "pull request"
    ISSUE = "issue"


class Action(Enum):
    """What was done (or would be, in a dry run; or was being tried, when the forge failed)."""

    OPEN = "open"
    UPDATE = "update"
    COMMENT = "comment"
    CLOSE = "close"
    PIN = "pin"  # pinned to the repository's issue list (the carry dashboard)
    NOTHING = "nothing"


class Outcome(Enum):
    """How the step ended: only DONE wrote anything."""

    DONE = "done"
    DRY_RUN = "dry-run"
    UNAVAILABLE = "unavailable"  # 5xx, rate limits or no connection, after every retry
    DENIED = "denied"  # 401/403: the token lacks a permission (or is wrong)
    REJECTED = "rejected"  # another 4xx: no such repository, a head branch that does not exist, ...


@dataclass(frozen=True)
class Ref:
    """A pull request or issue on the forge."""

    number: int
    url: str
    title: str


@dataclass(frozen=True)
class Result:
    """One reporting step: the action, how it ended, what it touched, and one line for people."""

    kind: Kind
    action: Action
    outcome: Outcome
    ref: Ref | None
    attempts: int  # rounds of requests made (0: the forge was not asked)
    message: str

    @property
    def ok(self) -> bool:
        return self.outcome in (Outcome.DONE, Outcome.DRY_RUN)

    def to_json(self) -> dict[str, object]:
        """Plain values for a --json report."""
        return {"kind": self.kind.value, "action": self.action.value, "outcome": self.outcome.value,
                "number": self.ref.number if self.ref else None, "url": self.ref.url if self.ref else None,
                "attempts": self.attempts, "message": self.message}


@dataclass(frozen=True)
class PullState:
    """One PR as the forge reports it; `merge_commit` is None unless the forge gave a full commit SHA."""

    pr: str  # owner/repo#N
    merged: bool
    merge_commit: str | None
    problem: str | None = None  # why a merged PR's commit was not accepted
    state: str = ""  # "open", "draft", "merged" or "closed" (closed without a merge)
    review: str | None = None  # "approved", "changes requested" or None (no review decision)
    checks: str | None = None  # the head commit's checks: "green", "red", "pending" or None (none ran)

    @property
    def summary(self) -> str:
        """One label for people and the nightly: `merged`, `closed unmerged`, or `open`/`draft` with the review
        decision and the checks (`open, approved, checks green`); "?" when the forge gave no state."""
        if self.state in ("merged", "closed"):
            return "merged" if self.state == "merged" else "closed unmerged"
        if not self.state:
            return "?"
        return ", ".join([self.state, *([self.review] if self.review else []),
                          *([f"checks {self.checks}"] if self.checks else [])])


@dataclass(frozen=True)
class PullCheck:
    """Merged PRs by name, or why the forge could not be asked (then nothing is known)."""

    pulls: dict[str, PullState]
    unavailable: str | None
