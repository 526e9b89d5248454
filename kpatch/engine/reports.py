"""What the engine reports, apart from the engine itself: how each stack ended (Outcome, an apply's and a
rebase's), and a rebase's result (RebaseResult of StackReports of PatchReports), which the nightly's report, the
carry history and `rebase --json` carry. Their readers (the dashboard, `kpatch report`) import these records, not
the rebase."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from kpatch.engine.diff import StackDiff
from kpatch.engine.evidence import UpstreamCommit
from kpatch.project.state import Culprit, Hunk, PatchClass, StackPhase


class Outcome(Enum):
    """How a stack ended on its base, after an apply or a rebase (both results carry it: one enum, not two)."""

    APPLIED = "applied"
    CONFLICT = "conflict"  # git am stopped; the worktree waits for a person
    BLOCKED = "blocked"  # not applied because an upstream it requires is not applied

    @classmethod
    def of(cls, phase: StackPhase) -> Outcome:
        return {StackPhase.DONE: cls.APPLIED, StackPhase.STOPPED: cls.CONFLICT}.get(phase, cls.BLOCKED)


@dataclass(frozen=True)
class PatchReport:
    """One patch after a rebase: its class, why, and for a conflict the hunks and the upstream commit that broke it.

    The one record of a rebased patch: `rebase --json`'s stacks, the nightly's report (report.json, `nightly
    --json`) and the carry history read it. Not `project.state.PatchRun`, the mutable run state a rebase keeps on
    disk while it works, nor `stack.Patch`, the patch file as parsed; `engine.status.PatchStatus` is a patch at
    rest in a worktree (no class: nothing was tried)."""

    upstream: str  # the stack it belongs to (also the stack's own name in `rebase --json`: a patch stands alone)
    name: str  # the patch file's name
    klass: PatchClass = field(metadata={"json": "class"})
    applied: bool  # in the scratch worktree (False for a class found by a trial apply)
    why: str
    commit: str | None
    hunks: tuple[Hunk, ...]
    culprit: Culprit | None
    # a conflict's (or a predicted one's): the upstream commits of old base..new base that touched its lines
    upstream_commits: tuple[UpstreamCommit, ...] = ()


@dataclass(frozen=True)
class StackReport:
    name: str = field(metadata={"json": "upstream"})
    old_base: str
    new_base: str
    outcome: Outcome
    patches: tuple[PatchReport, ...]
    review: StackDiff | None = None  # what the rebase did to each patch (a committed rebase; None: not known)


@dataclass(frozen=True)
class RebaseResult:
    stacks: tuple[StackReport, ...]
    github: str | None
    committed: bool  # kpatch.toml and patches/ were rewritten
    changed: int | None = None  # how many of their files changed (None: a rebase finished from its journal)

    @property
    def conflict(self) -> PatchReport | None:
        return next((p for s in self.stacks for p in s.patches if p.klass is PatchClass.CONFLICT), None)
