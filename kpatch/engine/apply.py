"""apply: each stack onto its base in dependency order, one `git am` per stack; `--continue` and `--abort`.

The run state records each step before it is taken: a stack is marked running before its worktree moves,
so after a kill `--continue` redoes that stack from its base and `--abort` puts every worktree back.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from kpatch.engine import reuse
from kpatch.engine.plan import Item, backup, check_symlinks, refuse_unexported, resolve_items
from kpatch.engine.reports import Outcome
from kpatch.engine.rollback import undone_on_storage_error
from kpatch.errors import WorktreeError
from kpatch.gitx import Am, AmRun, Method, Repository, restore_preimages
from kpatch.output.ui import UI
from kpatch.project.state import How, Hunk, Kind, Operation, PatchRun, Phase, RunState, Settled, StackPhase, StackRun
from kpatch.project.workspace import Workspace, writes
from kpatch.stack import Series


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
    hunks: tuple[Hunk, ...]
    blocked: tuple[str, ...]  # upstreams not applied because they require this one
    cause: str = ""  # why, in words, where the hunks alone do not say it (no 3-way merge was possible)


@dataclass(frozen=True)
class ApplyResult:
    stacks: tuple[StackResult, ...]
    conflict: Conflict | None


@writes("apply")
def apply(ws: Workspace, ui: UI, onto: Mapping[str, str], *, discard: bool = False) -> ApplyResult:
    """Apply every stack from scratch onto its base (or `--onto` ref); stop a stack at its first conflict."""
    run = ws.refuse_if_busy()
    items = resolve_items(ws, ui, onto, fetch_missing=True, run=run)
    for item in items:
        check_symlinks(item)
        ws.check_worktree(item.upstream.name)
    refuse_unexported(ws, items, run, discard=discard, doing="kpatch apply")
    ws.check_writable(ws.workdir, ws.kpatch_dir, *(i.worktree for i in items if i.worktree.exists()))
    stacks = {}
    for item in items:
        assert item.base is not None
        previous = Repository(item.worktree).head() if item.worktree.exists() else None
        stacks[item.upstream.name] = StackRun(name=item.upstream.name, base=item.base, tree=str(item.worktree),
                                              previous_head=previous,
                                              patches=[PatchRun(name=p.name) for p in item.series.patches])
    with undone_on_storage_error(ws, "apply", lambda: abort_apply(ws, UI(quiet=True))):
        run.operation = Operation(kind=Kind.APPLY, stacks=stacks)
        ws.write_state(run)
        # The files as am reads them in this run: a later --continue may find them edited since.
        return _advance(ws, ui, run, items, {i.upstream.name: i.series.stack_hash() for i in items},
                        checked={i.upstream.name for i in items})


@writes("apply --continue")
def continue_apply(ws: Workspace, ui: UI) -> ApplyResult:
    """Finish the stopped `git am` after a person resolved it (or redo a killed one), then the stacks it blocked."""
    run = _require(ws, "continue")
    assert run.operation is not None
    items = resolve_items(ws, ui, {}, fetch_missing=False)
    series = {i.upstream.name: i.series for i in items}
    for stack in run.operation.stacks.values():
        if stack.phase is StackPhase.RUNNING:  # kpatch was killed while this stack was being applied
            _undo(ws, stack, series[stack.name], restore=stack.base)
            stack.phase = StackPhase.WAITING
            for patch in stack.patches:
                patch.phase, patch.how, patch.hunks = Phase.PENDING, None, []
            ws.write_state(run)
        elif stack.phase in (StackPhase.STOPPED, StackPhase.RESUMING):
            _resume(ws, ui, run, stack, series[stack.name])
    return _advance(ws, ui, run, items)


def _resume(ws: Workspace, ui: UI, run: RunState, stack: StackRun, series: Series) -> None:
    """Go on after the person resolved the stopped patch (or after a kill interrupted that going on)."""
    tree = Repository(Path(stack.tree))
    am = Am(tree)
    first = next(i for i, p in enumerate(stack.patches) if p.phase is Phase.CONFLICT)
    if stack.phase is StackPhase.RESUMING and stack.head_before:
        am.after_killed_resume(stack.head_before, sorted({f for p in series.patches for f in p.new_files}))
        if not am.in_progress():  # the resolution and maybe more were committed: apply the rest anew
            done = tree.count(stack.head_before, "HEAD")
            for offset, patch in enumerate(stack.patches[first:first + done]):  # the first is the resolved one
                patch.phase, patch.how, patch.hunks = Phase.APPLIED, How.THREE_WAY if offset == 0 else How.CLEAN, []
            rest = stack.patches[first + done:]
            with ui.progress(f"continuing {stack.name}", len(rest)) as report:
                _record(stack, Am(tree).start([series.folder / p.name for p in rest], report), first + done)
            ws.write_state(run)
            return
    if not am.in_progress():
        raise WorktreeError(f"{stack.tree}: no git am in progress there; run 'kpatch apply --abort'")
    stack.phase, stack.head_before = StackPhase.RESUMING, tree.head()
    ws.write_state(run)  # what the next --continue sees if this one is killed
    with ui.progress(f"continuing {stack.name}", len(stack.patches) - first) as report:
        _record(stack, am.resume(report), first)
    ws.write_state(run)


@writes("apply --abort")
def abort_apply(ws: Workspace, ui: UI) -> tuple[str, ...]:
    """Put every worktree the stopped (or killed) apply touched back exactly as it was; return their names."""
    run = _require(ws, "abort")
    assert run.operation is not None
    stacks = run.operation.stacks
    for stack in stacks.values():
        path = Path(stack.tree)
        if stack.phase is StackPhase.DONE and path.exists() and Repository(path).dirty():
            raise WorktreeError(f"worktree {path} has uncommitted changes; commit or discard them first")
    items = {i.upstream.name: i.series for i in resolve_items(ws, ui, {}, fetch_missing=False)}
    restored = []
    for stack in stacks.values():
        if stack.phase is StackPhase.WAITING or not Path(stack.tree).exists():
            continue
        _undo(ws, stack, items[stack.name], restore=stack.previous_head)
        restored.append(stack.name)
        ui.note(f"{stack.name}: restored {stack.tree}")
    run.operation = None
    ws.write_state(run)
    return tuple(restored)


def _advance(ws: Workspace, ui: UI, run: RunState, items: list[Item],
             hashes: Mapping[str, str] | None = None, checked: Collection[str] = ()) -> ApplyResult:
    """Run git am for every waiting stack whose requirements are applied; settle when all are.

    `hashes`: each stack's `stack_hash` when this process read its files; a stack whose every patch went in
    without a 3-way merge is settled with it (a rebase may then pick its commits: engine/fastpath.py).
    `checked`: stacks whose worktrees this process has just checked (a new apply checks every one first); only
    until the first stack is moved, since a person may edit another worktree while git am runs.
    """
    op = run.operation
    assert op is not None
    by_name = {i.upstream.name: i for i in items}
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    for name, stack in op.stacks.items():
        if stack.phase is not StackPhase.WAITING or _blocked(ws, op, name):
            continue
        item = by_name[name]
        path = Path(stack.tree)
        if path.exists() and name not in checked:
            ws.check_worktree(name)  # a person may have changed it while the run was stopped: refuse before moving it
        stack.phase, stack.head_before = StackPhase.RUNNING, stack.previous_head
        for patch in stack.patches:
            patch.phase = Phase.IN_FLIGHT
        ws.write_state(run)  # what --continue and --abort see if this run is killed from here on
        tree = Repository(path)
        # commits that hold exactly these files on this base (an import's, the last apply's): am would make them
        made = reuse.commits_for(item.mirror, stack.base, hashes[name], len(stack.patches),
                                 run.settled.get(name)) if hashes and name in hashes else None
        if path.exists():
            if backup(tree, name, stamp):
                ui.note(f"{name}: kept the worktree's commits under refs/kpatch/backup/{name}/{stamp}")
            tree.checkout(made or stack.base)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            item.mirror.add_worktree(path, made or stack.base)
        paths = [item.series.folder / p.name for p in stack.patches]
        with ui.progress(f"applying {name}", len(stack.patches)) as report:
            if made is None:
                restore_preimages(item.mirror, paths)  # for a 3-way fallback (--onto) in a fresh mirror
                _record(stack, Am(tree).start(paths, report), 0)
            else:
                report(len(paths))
                _record(stack, AmRun(methods=(Method.CLEAN,) * len(paths), stopped=False), 0)
        if made is not None:
            assert hashes is not None
            reuse.drop(item.mirror, hashes[name])  # the worktree holds them now
        ws.write_state(run)
        checked = ()
    if all(s.phase is StackPhase.DONE for s in op.stacks.values()):
        for upstream in ws.stack.upstreams:
            stack = op.stacks[upstream.name]
            tag = None if upstream.base_is_sha else upstream.base
            clean = all(p.phase is Phase.APPLIED and p.how is How.CLEAN for p in stack.patches)
            run.settled[stack.name] = Settled(base=stack.base, head=Repository(Path(stack.tree)).head(), tag=tag,
                                              tag_commit=stack.base if tag else None,
                                              stack_hash=(hashes or {}).get(stack.name) if clean else None)
        result = _result(op)
        run.operation = None
        ws.write_state(run)
        return result
    return _result(op)


def _record(stack: StackRun, am: AmRun, first: int) -> None:
    """Set the patches from `first` on by what am did; the stack is done or stopped at a conflict."""
    for offset, method in enumerate(am.methods):
        patch = stack.patches[first + offset]
        if method is Method.EMPTY:
            patch.phase, patch.how, patch.detail = Phase.UPSTREAM, None, "already in the base: git am skipped it"
        else:
            patch.phase, patch.detail = Phase.APPLIED, ""  # a stopped patch's cause goes once it is applied
            patch.how = How.THREE_WAY if method is Method.THREE_WAY else How.CLEAN
        patch.hunks = []
    stopped_at = first + len(am.methods)
    for index in range(stopped_at, len(stack.patches)):
        stack.patches[index].phase = Phase.PENDING
    if am.stopped:
        stack.patches[stopped_at].phase = Phase.CONFLICT
        stack.patches[stopped_at].hunks = [Hunk(h.path, h.line) for h in am.hunks]
        stack.patches[stopped_at].detail = am.cause
        stack.phase = StackPhase.STOPPED
    else:
        stack.phase = StackPhase.DONE


def _undo(ws: Workspace, stack: StackRun, series: Series, *, restore: str | None) -> None:
    """Leave whatever git am left (even half-written) and put the worktree at `restore` (None: remove it)."""
    path, mirror = Path(stack.tree), ws.mirror(stack.name)
    if not path.exists():
        return
    if not mirror.owns(path):  # half-made by a `git worktree add` that was killed
        if stack.previous_head is None:
            mirror.remove_worktree(path)
            return
        raise WorktreeError(f"{path} is no longer a worktree of {stack.name}'s mirror; move it away")
    created = sorted({f for p in series.patches for f in p.new_files})
    Am(Repository(path)).abort(restore or stack.base, created)
    if restore is None:
        mirror.remove_worktree(path)


def _blocked(ws: Workspace, op: Operation, name: str) -> bool:
    """True while an upstream that `name` requires has not applied cleanly."""
    return any(op.stacks[dep].phase is not StackPhase.DONE for dep in ws.stack.closure(name))


def _require(ws: Workspace, verb: str) -> RunState:
    ws.refuse_pending_journal()
    run = ws.read_state()
    if run.operation is None or run.operation.kind is not Kind.APPLY:
        raise WorktreeError(f"nothing to {verb}: no apply is stopped at a conflict in {ws.workdir}")
    return run


def _result(op: Operation) -> ApplyResult:
    stacks = []
    conflict = None
    for name, stack in op.stacks.items():
        done = stack.phase is StackPhase.DONE
        head = Repository(Path(stack.tree)).head() if done else None
        applied = sum(p.phase in (Phase.APPLIED, Phase.UPSTREAM) for p in stack.patches)
        stacks.append(StackResult(upstream=name, worktree=Path(stack.tree), base=stack.base, head=head,
                                  outcome=Outcome.of(stack.phase), applied=applied,
                                  total=len(stack.patches)))
        if stack.phase is StackPhase.STOPPED and conflict is None:
            blocked = tuple(n for n, s in op.stacks.items() if s.phase is StackPhase.WAITING)
            patch = next(p for p in stack.patches if p.phase is Phase.CONFLICT)
            conflict = Conflict(upstream=name, patch=patch.name, worktree=Path(stack.tree),
                                hunks=tuple(patch.hunks), blocked=blocked, cause=patch.detail)
    return ApplyResult(stacks=tuple(stacks), conflict=conflict)
