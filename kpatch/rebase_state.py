"""What a rebase in progress has done so far, kept in the work folder so --continue/--abort can pick it up."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from kpatch.errors import WorktreeError
from kpatch.workspace import Outcome, write_atomic

STATE_VERSION = 1


class PatchClass(Enum):
    """Where one patch ends after a rebase: exactly one of these."""

    CLEAN = "clean"
    THREE_WAY = "three-way"
    UPSTREAM = "upstream"  # already merged upstream: dropped from the series
    CONFLICT = "conflict"
    NOT_TRIED = "not tried"  # not reached yet (only while a rebase runs)


@dataclass
class Culprit:
    sha: str
    subject: str
    author: str
    date: str
    trials: int  # trial applies the bisection took
    commits: int  # upstream commits it searched


@dataclass
class PatchResult:
    name: str
    klass: PatchClass = PatchClass.NOT_TRIED
    applied: bool = False  # in the scratch worktree; False for a class found by a trial apply (after a conflict)
    why: str = ""
    commit: str | None = None  # the upstream commit that carries an `upstream` patch
    hunks: list[tuple[str, int | None]] = field(default_factory=list)
    culprit: Culprit | None = None


@dataclass
class StackRebase:
    name: str
    old_base: str
    new_base: str
    scratch: str  # the worktree the stack is rebased in (not the user's)
    outcome: Outcome
    patches: list[PatchResult]
    head_before: str | None = None  # HEAD before the patch in flight: tells a finished am from an interrupted one


@dataclass
class RebaseState:
    stacks: dict[str, StackRebase]
    github: str | None = None  # why Upstream-PR states were not checked, if they were not

    def to_json(self) -> bytes:
        def encode(value: object) -> object:
            if isinstance(value, Enum):
                return value.value
            if isinstance(value, dict):
                return {k: encode(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [encode(v) for v in value]
            return value

        return json.dumps({"version": STATE_VERSION, **encode(asdict(self))}, indent=1).encode()  # type: ignore[dict-item]


def read(path: Path) -> RebaseState | None:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise WorktreeError(f"{path}: unreadable rebase state ({err}); run 'kpatch rebase --abort'") from None
    if not isinstance(raw, dict) or raw.get("version") != STATE_VERSION:
        version = raw.get("version") if isinstance(raw, dict) else None
        raise WorktreeError(f"{path}: rebase state version {version} is not {STATE_VERSION}")
    try:
        return _decode(raw)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise WorktreeError(f"{path}: unreadable rebase state ({err!r}); run 'kpatch rebase --abort'") from None


def _decode(raw: dict[str, Any]) -> RebaseState:
    stacks = {}
    for name, item in raw["stacks"].items():
        patches = [PatchResult(name=p["name"], klass=PatchClass(p["klass"]), applied=p["applied"], why=p["why"],
                               commit=p["commit"],
                               hunks=[(h[0], h[1]) for h in p["hunks"]],
                               culprit=Culprit(**p["culprit"]) if p["culprit"] else None)
                   for p in item["patches"]]
        stacks[name] = StackRebase(name=name, old_base=item["old_base"], new_base=item["new_base"],
                                   scratch=item["scratch"], outcome=Outcome(item["outcome"]), patches=patches,
                                   head_before=item["head_before"])
    return RebaseState(stacks=stacks, github=raw.get("github"))


def write(path: Path, state: RebaseState) -> None:
    write_atomic(path, state.to_json(), durable=False)
