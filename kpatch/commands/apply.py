"""`kpatch apply`: each stack onto its base in dependency order; `--continue` and `--abort` after a conflict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kpatch import git
from kpatch.errors import FailedHunk, WorktreeError
from kpatch.plan import check_symlinks, resolve_items
from kpatch.ui import UI
from kpatch.workspace import ApplyState, Outcome, UpstreamState, Workspace


@dataclass(frozen=True)
class StackResult:
    upstream: str
    worktree: Path
    base: str
    head: str | None
    outcome: Outcome
    applied: int
    total: int


@dataclass(frozen=True)
class Conflict:
    upstream: str
    patch: str
    worktree: Path
    hunks: tuple[FailedHunk, ...]
    blocked: tuple[str, ...]  # upstreams not applied because they require this one


@dataclass(frozen=True)
class ApplyResult:
    stacks: tuple[StackResult, ...]
    conflict: Conflict | None


def apply(ws: Workspace, ui: UI, onto: Mapping[str, str]) -> ApplyResult:
    """Apply every stack from scratch onto its base (or `--onto` ref); stop a stack at its first conflict."""
    if ws.rebase_state_file.exists() or ws.rebase_journal.exists():
        raise WorktreeError("a rebase is in progress (or was interrupted): run 'kpatch rebase --continue' "
                            "or 'kpatch rebase --abort' first")
    state = ws.read_state()
    if state is not None and state.in_progress:
        raise WorktreeError(f"an apply is stopped at a conflict in {ws.workdir}: fix it and run "
                            "'kpatch apply --continue', or 'kpatch apply --abort'")
    items = resolve_items(ws, ui, onto, fetch=True)
    for item in items:
        check_symlinks(item)
        _check_worktree(item.worktree, item.mirror, item.upstream.name)
    new_state = ApplyState()
    for item in items:
        assert item.base is not None
        previous = git.head(item.worktree) if item.worktree.exists() else None
        new_state.upstreams[item.upstream.name] = UpstreamState(
            base=item.base, previous_head=previous, outcome=Outcome.BLOCKED,
            patches=[str(p.path) for p in item.series.patches], applied=0)
    ws.keep_previous_state()
    _apply_unblocked(ws, ui, new_state)
    return _result(ws, new_state)


def continue_apply(ws: Workspace, ui: UI) -> ApplyResult:
    """Finish the stopped `git am` after a person resolved it, then apply the stacks it blocked."""
    state = ws.read_state()
    if state is None or not state.in_progress:
        raise WorktreeError(f"nothing to continue: no apply is stopped at a conflict in {ws.workdir}")
    for name, entry in state.upstreams.items():
        if entry.outcome is not Outcome.CONFLICT:
            continue
        worktree = ws.worktree(name)
        if entry.in_flight:  # kpatch was killed while git am ran: start this stack again
            if git.is_worktree_of(worktree, ws.mirror(name)) and git.operation_in_progress(worktree) == "am":
                git.am_abort(worktree)
            elif worktree.exists() and not git.is_worktree_of(worktree, ws.mirror(name)):
                git.remove_worktree(ws.mirror(name), worktree)
            entry.outcome, entry.in_flight = Outcome.BLOCKED, False
            ws.write_state(state)
            continue
        if git.operation_in_progress(worktree) != "am":
            raise WorktreeError(f"{worktree}: no git am in progress there; run 'kpatch apply --abort'")
        remaining = len(entry.patches) - entry.applied
        with ui.progress(f"continuing {name}", remaining) as report:
            _record(entry, git.am_continue(worktree, remaining, report))
        ws.write_state(state)
    _apply_unblocked(ws, ui, state)
    return _result(ws, state)


def abort_apply(ws: Workspace, ui: UI) -> tuple[str, ...]:
    """Put every worktree the stopped apply touched back exactly as it was before; return their names."""
    state = ws.read_state()
    if state is None or not state.in_progress:
        raise WorktreeError(f"nothing to abort: no apply is stopped at a conflict in {ws.workdir}")
    for name, entry in state.upstreams.items():
        worktree = ws.worktree(name)
        if entry.outcome is not Outcome.CONFLICT and worktree.exists() and git.dirty_files(worktree):
            raise WorktreeError(f"worktree {worktree} has uncommitted changes; commit or discard them first")
    restored = []
    for name, entry in state.upstreams.items():
        worktree, mirror = ws.worktree(name), ws.mirror(name)
        if not worktree.exists():
            continue
        if git.is_worktree_of(worktree, mirror) and git.operation_in_progress(worktree) == "am":
            git.am_abort(worktree)
        if entry.previous_head is None:
            git.remove_worktree(mirror, worktree)
        else:
            git.checkout(worktree, entry.previous_head)
        restored.append(name)
        ui.note(f"{name}: restored {worktree}")
    ws.restore_previous_state()
    return tuple(restored)


def _apply_unblocked(ws: Workspace, ui: UI, state: ApplyState) -> None:
    """Run git am for every stack still BLOCKED whose requirements are now applied."""
    ws.write_state(state)
    for upstream in ws.stack.upstreams:
        entry = state.upstreams[upstream.name]
        if entry.outcome is not Outcome.BLOCKED or _blocked(ws, state, upstream.name):
            continue
        entry.outcome, entry.in_flight = Outcome.CONFLICT, True  # what --continue sees if this run is killed
        ws.write_state(state)
        worktree, mirror = ws.worktree(upstream.name), ws.mirror(upstream.name)
        if worktree.exists():
            git.checkout(worktree, entry.base)
        else:
            worktree.parent.mkdir(parents=True, exist_ok=True)
            git.add_worktree(mirror, worktree, entry.base)
        with ui.progress(f"applying {upstream.name}", len(entry.patches)) as report:
            entry.applied = 0
            _record(entry, git.am(worktree, [Path(p) for p in entry.patches], report))
        ws.write_state(state)


def _record(entry: UpstreamState, outcome: git.AmOutcome) -> None:
    entry.applied += outcome.applied
    entry.in_flight = False
    entry.outcome = Outcome.APPLIED if outcome.stopped_at is None else Outcome.CONFLICT
    entry.failed = [(h.path, h.line) for h in outcome.hunks]


def _blocked(ws: Workspace, state: ApplyState, name: str) -> bool:
    """True while an upstream that `name` requires has not applied cleanly."""
    return any(state.upstreams[dep].outcome is not Outcome.APPLIED for dep in ws.stack.closure(name))


def _result(ws: Workspace, state: ApplyState) -> ApplyResult:
    stacks = []
    conflict = None
    for name, entry in state.upstreams.items():
        worktree = ws.worktree(name)
        head = git.head(worktree) if entry.outcome is Outcome.APPLIED else None
        stacks.append(StackResult(upstream=name, worktree=worktree, base=entry.base, head=head,
                                  outcome=entry.outcome, applied=entry.applied, total=len(entry.patches)))
        if entry.outcome is Outcome.CONFLICT and conflict is None:
            blocked = tuple(n for n, e in state.upstreams.items() if e.outcome is Outcome.BLOCKED)
            conflict = Conflict(upstream=name, patch=Path(entry.patches[entry.applied]).name, worktree=worktree,
                                hunks=tuple(FailedHunk(p, line) for p, line in entry.failed), blocked=blocked)
    return ApplyResult(stacks=tuple(stacks), conflict=conflict)


def _check_worktree(path: Path, mirror: Path, name: str) -> None:
    if not path.exists():
        return
    if not git.is_worktree_of(path, mirror):
        raise WorktreeError(f"{path} exists but is not a kpatch worktree of {name}; move it away")
    busy = git.operation_in_progress(path)
    if busy:
        raise WorktreeError(f"worktree {path} is in the middle of a git {busy}; finish or abort it first")
    dirty = git.dirty_files(path)
    if dirty:
        more = f" and {len(dirty) - 1} more" if len(dirty) > 1 else ""
        raise WorktreeError(f"worktree {path} has uncommitted changes ({dirty[0].strip()}{more}); "
                            "commit, stash or discard them first")
