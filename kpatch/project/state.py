"""The one run-state model: what kpatch left in each worktree, and the apply or rebase in progress, if any.

Kept in `<project>/.kpatch/state.json` (one versioned codec). Code branches on the enums and fields here;
the `note` strings are for people only.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from enum import Enum, StrEnum
from pathlib import Path
from typing import Any

from kpatch.errors import WorktreeError
from kpatch.files import write_atomic

STATE_VERSION = 2


class Kind(Enum):
    APPLY = "apply"
    REBASE = "rebase"
    BACKPORT = "backport"  # patches of another line onto this line's stacks (kpatch/lines/backport.py)


class StackPhase(Enum):
    """Where one stack of the operation in progress stands."""

    WAITING = "waiting"  # not started: an upstream it requires is not done yet
    RUNNING = "running"  # git am is (or was, if kpatch was killed) working on it
    STOPPED = "stopped"  # a patch conflicts: the worktree waits for a person
    RESUMING = "resuming"  # git am --continue is (or was, if kpatch was killed) going on after the resolution
    DONE = "done"


class Phase(Enum):
    """Where one patch stands."""

    PENDING = "pending"
    IN_FLIGHT = "in flight"  # handed to the git am that is running
    APPLIED = "applied"
    CONFLICT = "conflict"
    UPSTREAM = "upstream"  # already in the new base: dropped


class How(Enum):
    CLEAN = "clean"
    THREE_WAY = "three-way"


class Prediction(Enum):
    """What a trial apply on a throwaway index says a patch would do (behind a conflict, before a real apply)."""

    CLEAN = "clean"
    THREE_WAY = "three-way"
    UPSTREAM = "upstream"
    CONFLICT = "conflict"


class PatchClass(StrEnum):
    """What a rebase made of one patch: the class every report, table and JSON names it by."""

    CLEAN = "clean"
    THREE_WAY = "three-way"
    UPSTREAM = "upstream"  # already in the new base: dropped
    CONFLICT = "conflict"
    NOT_TRIED = "not tried"  # behind a conflict, and no trial apply classified it

    @property
    def applies(self) -> bool:
        """The patch applies onto the new base (cleanly or by a three-way merge)."""
        return self in (PatchClass.CLEAN, PatchClass.THREE_WAY)


class Resolved(Enum):
    """Who resolved a patch's conflict."""

    RECORDED = "recorded"  # a recorded resolution (rerere), without a person
    BY_HAND = "by hand"


class Evidence(Enum):
    """Why a patch counts as already upstream."""

    PATCH_ID = "patch-id"  # an upstream commit in base..new has the same stable patch-id
    EMPTY = "empty"  # a 3-way apply left nothing to commit
    PR_MERGED = "pr-merged"  # its Upstream-PR is merged into the new base


@dataclass
class Hunk:
    path: str
    line: int | None


@dataclass
class Culprit:
    sha: str
    subject: str
    author: str
    date: str
    trials: int  # trial applies the bisection took
    commits: int  # upstream commits it searched


@dataclass
class PatchRun:
    """One patch's place in an operation in progress, kept on disk (run state) so a killed or stopped rebase goes
    on: mutable and phase-by-phase. What a finished rebase reports is `engine.reports.PatchReport`, made from it."""

    name: str
    phase: Phase = Phase.PENDING
    how: How | None = None  # how it applied
    predicted: Prediction | None = None  # what a trial apply says it would do (only while it is pending)
    evidence: Evidence | None = None  # why it is UPSTREAM (or predicted so)
    commit: str | None = None  # the upstream commit that carries an UPSTREAM patch
    detail: str = ""  # the evidence for people: an upstream subject, a PR
    resolved: Resolved | None = None  # who resolved its conflict, if it had one
    hunks: list[Hunk] = field(default_factory=list)
    culprit: Culprit | None = None

    @property
    def settled(self) -> bool:
        """In the tree already, or known to be upstream: nothing left to apply."""
        return self.phase in (Phase.APPLIED, Phase.UPSTREAM)

    def reset(self) -> None:
        """Back to pending, forgetting what an earlier attempt or trial found."""
        self.phase, self.how, self.predicted, self.resolved = Phase.PENDING, None, None, None
        self.evidence, self.commit, self.detail, self.hunks, self.culprit = None, None, "", [], None


@dataclass
class StackRun:
    name: str
    base: str  # the commit the stack goes onto (a rebase's new base)
    tree: str  # the worktree being written: the user's (apply) or a scratch one (rebase)
    phase: StackPhase = StackPhase.WAITING
    old_base: str | None = None  # a rebase's pinned base
    previous_head: str | None = None  # what the user's worktree held before an apply (None: kpatch made it)
    head_before: str | None = None  # HEAD when the running git am started (or resumed): undoes a killed one
    final_head: str | None = None  # the rebased head, kept once the stack is done
    patches: list[PatchRun] = field(default_factory=list)

    def patch(self, name: str) -> PatchRun | None:
        return next((p for p in self.patches if p.name == name), None)


@dataclass
class Operation:
    kind: Kind
    stacks: dict[str, StackRun]  # in dependency order
    github: str | None = None  # why Upstream-PR states were not checked, if they were not
    # upstream -> the user's worktree HEAD whose unexported commits `--discard` lets go (kept under a backup ref)
    discard: dict[str, str] = field(default_factory=dict)
    source: str | None = None  # a backport's: the line its patches come from

    @property
    def stopped(self) -> StackRun | None:
        return next((s for s in self.stacks.values() if s.phase is StackPhase.STOPPED), None)


@dataclass
class Settled:
    """What the last finished apply, rebase or export left in one worktree."""

    base: str
    head: str  # the worktree's HEAD as kpatch left it (or as export wrote it out)
    tag: str | None = None  # the tag the base was given as
    tag_commit: str | None = None  # what that tag resolved to then
    # Series.stack_hash() of the patch files base..head holds one commit each, every one as `git am` takes the
    # file without a 3-way merge (None: unknown). A rebase may then pick the commits (engine/fastpath.py).
    stack_hash: str | None = None


@dataclass
class RunState:
    workdir: str
    settled: dict[str, Settled] = field(default_factory=dict)
    operation: Operation | None = None


def encode(state: RunState) -> bytes:
    return (json.dumps({"version": STATE_VERSION, **_plain(state)}, indent=1) + "\n").encode()


def decode(data: bytes, where: Path) -> RunState:
    """Parse a state file; anything unexpected is a one-line WorktreeError naming it."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        why = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        raise WorktreeError(f"{where}: unreadable run state ({why}); remove it and run 'kpatch apply'") from None
    version = raw.get("version") if isinstance(raw, dict) else None
    if version != STATE_VERSION:
        raise WorktreeError(f"{where}: run state version {version!r} is not {STATE_VERSION} (written by another "
                            "kpatch): finish or abort with that version, or remove it and run 'kpatch apply'")
    try:
        built: RunState = _build(RunState, raw)
        return built
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as err:
        raise WorktreeError(f"{where}: unreadable run state ({err!r}); remove it and run 'kpatch apply'") from None


def read(path: Path) -> RunState | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise WorktreeError(f"{path}: cannot read the run state: {err.strerror}") from None
    return decode(data, path)


def write(path: Path, state: RunState) -> None:
    write_atomic(path, encode(state), durable=False)


def _plain(value: Any) -> Any:
    """A state's JSON form in one walk (what `dataclasses.asdict` then this gave: asdict copies every value first,
    which cost a rebase of 150 patches 10-20 ms per state write)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    names = _FIELDS.get(type(value))
    if names is None and is_dataclass(value) and not isinstance(value, type):
        names = _FIELDS[type(value)] = tuple(f.name for f in fields(value))
    if names is not None:
        return {name: _plain(getattr(value, name)) for name in names}
    return value


_FIELDS: dict[type, tuple[str, ...]] = {}  # a state dataclass's field names, in order


def _build(cls: Any, raw: Any) -> Any:
    """A dataclass from its JSON form, strictly: unknown or missing keys and bad enum values raise."""
    if not isinstance(raw, dict):
        raise TypeError(f"{cls.__name__} must be an object")
    known = {f.name: f for f in fields(cls)}
    extra = set(raw) - set(known) - {"version"}
    if extra:
        raise KeyError(f"unknown field(s) {sorted(extra)} in {cls.__name__}")
    values = {}
    for name, spec in known.items():
        if name not in raw:
            if spec.default is MISSING and spec.default_factory is MISSING:
                raise KeyError(f"{cls.__name__}.{name}")
            continue
        values[name] = _value(str(spec.type), raw[name])
    return cls(**values)


_ENUMS = {cls.__name__: cls for cls in (Kind, StackPhase, Phase, How, Prediction, Resolved, Evidence)}
_CLASSES = {cls.__name__: cls for cls in (Hunk, Culprit, PatchRun, StackRun, Operation, Settled)}


def _value(kind: str, raw: Any) -> Any:
    kind = kind.replace(" ", "")
    optional = kind.endswith("|None")
    if optional:
        if raw is None:
            return None
        kind = kind[: -len("|None")]
    if kind in _ENUMS:
        return _ENUMS[kind](raw)
    if kind in _CLASSES:
        return _build(_CLASSES[kind], raw)
    if kind.startswith("list["):
        if not isinstance(raw, list):
            raise TypeError(f"expected a list, got {type(raw).__name__}")
        return [_value(kind[5:-1], item) for item in raw]
    if kind.startswith("dict[str,"):
        if not isinstance(raw, dict):
            raise TypeError(f"expected an object, got {type(raw).__name__}")
        return {str(k): _value(kind[len("dict[str,"):-1], v) for k, v in raw.items()}
    expected = {"str": str, "int": int, "bool": bool}[kind]
    if not isinstance(raw, expected) or (expected is int and isinstance(raw, bool)):
        raise TypeError(f"expected {kind}, got {type(raw).__name__}")
    return raw
