"""backport: patches of one line onto another line's stack tops, each with a 3-way merge, as one journaled step.

Each target stack is built in a scratch worktree (`<line's workdir>/.rebase/<upstream>`: the line's base and its
patches, or the commit its last apply left when the stack has not changed since), then the patches go on with
`git am -3`, each carrying `Backport-Of: <line>:<patch file>`. Nothing the person owns changes until every patch
is on: then the new patch files, the series and the run state change in one journaled step (a kill leaves them all
old or all new). A conflict stops there, naming the target line's upstream commit that broke the patch;
`--continue` after a person resolved it, `--abort` drops it all.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from kpatch.config import Stack, Upstream
from kpatch.engine import classify
from kpatch.engine.plan import fetch, load_all_series, missing_line_base, requires_problem
from kpatch.errors import KpatchError, SeriesError, UpstreamError, WorktreeError
from kpatch.files import PATCH_FILE, read_input
from kpatch.gitx import Am, AmRun, Method, Mirror, Repository
from kpatch.gitx.branch import with_trailers
from kpatch.lines.picking import Wanted, already_there, wanted
from kpatch.output.ui import UI
from kpatch.project import journal
from kpatch.project.state import Culprit, How, Hunk, Kind, Operation, PatchRun, Phase, RunState, StackPhase, StackRun
from kpatch.project.workspace import Workspace, writes
from kpatch.stack import SERIES, Series
from kpatch.stack.writer import render

BACKPORT_OF = "Backport-Of"
_MAILS = ".mails"  # in the scratch folder: each patch as backported, with its Backport-Of trailer


class Outcome(StrEnum):
    BACKPORTED = "backported"
    SKIPPED = "skipped"  # on the target already, or not for it (Lines:)
    CONFLICT = "conflict"
    PENDING = "pending"  # behind a conflict


@dataclass(frozen=True)
class BackportedPatch:
    upstream: str
    patch: str  # the source line's patch file
    outcome: Outcome
    why: str
    culprit: Culprit | None = None  # the target line's upstream commit after which it stopped applying
    hunks: tuple[Hunk, ...] = ()


@dataclass(frozen=True)
class BackportResult:
    source: str  # the line the patches come from
    target: str  # the line they go onto
    patches: tuple[BackportedPatch, ...]
    committed: bool  # the target's patch folders were written
    changed: int | None = None  # files changed (None: finished from its journal)
    worktree: Path | None = None  # where a conflict waits for a person

    @property
    def conflict(self) -> BackportedPatch | None:
        return next((p for p in self.patches if p.outcome is Outcome.CONFLICT), None)


@writes("backport")
def backport(ws: Workspace, ui: UI, source: Stack, specs: tuple[str, ...]) -> BackportResult:
    """Backport the patches `specs` names from line `source` onto the line of `ws`."""
    run = ws.refuse_if_busy()
    if source.line == ws.stack.line:
        from kpatch.errors import UsageError

        raise UsageError(f"--from and --to both name line {source.line}: a backport goes to another line")
    asked = wanted(source, load_all_series(source), specs)
    targets = load_all_series(ws.stack)
    stacks: dict[str, StackRun] = {}
    for upstream in ws.stack.upstreams:  # every base resolved, every skip decided, before anything is written
        items = [w for w in asked if w.upstream == upstream.name]
        if not items:
            continue
        mirror = _mirror(ws, ui, upstream, source.get(upstream.name))
        base = _resolve(ws.stack, upstream, mirror)
        source_base = _resolve(source, source.get(upstream.name), mirror)
        fork = mirror.run(["merge-base", base, source_base], check=False).text.strip() or base
        patches = []
        for item in items:
            why = already_there(Repository(mirror.path), item, targets[upstream.name], source.line, ws.stack.line)
            patches.append(PatchRun(name=item.patch.name, phase=Phase.UPSTREAM if why else Phase.PENDING,
                                    detail=why or ""))
        stacks[upstream.name] = StackRun(name=upstream.name, base=base, old_base=fork, patches=patches,
                                         tree=str(ws.scratch_dir / upstream.name))
    ws.check_writable(ws.workdir, ws.kpatch_dir, *(u.patches.parent for u in ws.stack.upstreams))
    before = ws.state_bytes()
    run.operation = Operation(kind=Kind.BACKPORT, stacks=stacks, source=source.line)
    ws.write_state(run)
    try:
        return _advance(ws, ui, run, source)
    except KpatchError:  # not a conflict (the line's own stack, a Requires:): leave everything as it was
        if ws.pending_journal() is None:
            _drop_scratch(ws, run.operation)
            ws.put_state_bytes(before)
        raise


@writes("backport --continue")
def continue_backport(ws: Workspace, ui: UI, source: Stack) -> BackportResult:
    """Go on after a person resolved the stopped patch (git add), or finish a backport a kill interrupted."""
    if ws.pending_journal() == "backport" and journal.resume(ws.journal_dir):
        shutil.rmtree(ws.scratch_dir, ignore_errors=True)
        return BackportResult(source=source.line, target=ws.stack.line, patches=(), committed=True)
    run = _require(ws)
    op = run.operation
    assert op is not None
    for stack in op.stacks.values():
        if stack.phase is not StackPhase.STOPPED:
            continue
        tree, mirror = Repository(Path(stack.tree)), ws.mirror(stack.name)
        stopped = next(p for p in stack.patches if p.phase is Phase.CONFLICT)
        todo = [p for p in stack.patches[stack.patches.index(stopped):] if not p.settled]
        am = Am(tree)
        if am.in_progress():
            with ui.progress(f"continuing {stack.name}", len(todo)) as report:
                went = am.resume(report)
            _record(mirror, tree, stack, todo, went, source, ws.stack)
        else:  # finished (or skipped) by hand: keep what was committed, apply the rest anew
            moved = tree.count(stack.head_before, "HEAD") if stack.head_before else 0
            for offset, patch in enumerate(todo):
                patch.reset()
                if offset < moved:
                    patch.phase, patch.how = Phase.APPLIED, How.THREE_WAY
            stack.phase = StackPhase.WAITING
        ws.write_state(run)
    return _advance(ws, ui, run, source)


@writes("backport --abort")
def abort_backport(ws: Workspace, ui: UI) -> tuple[str, ...]:
    """Drop the backport in progress: the scratch worktrees go; the patch folders are as they were."""
    if ws.pending_journal() == "backport":
        journal.back(ws.journal_dir)
    run = _require(ws)
    op = run.operation
    assert op is not None
    _drop_scratch(ws, op)
    run.operation = None
    ws.write_state(run)
    ui.note(f"backport onto line {ws.stack.line} aborted; its patch folders are as they were")
    return tuple(op.stacks)


def _drop_scratch(ws: Workspace, op: Operation | None) -> None:
    """Remove the backport's scratch worktrees (a git am in one left first) and its scratch folder."""
    for stack in op.stacks.values() if op else ():
        scratch, mirror = Path(stack.tree), ws.mirror(stack.name)
        if mirror.owns(scratch):
            tree = Repository(scratch)
            if Am(tree).in_progress():
                Am(tree).abort(tree.head())
        if scratch.exists():
            mirror.remove_worktree(scratch)
    shutil.rmtree(ws.scratch_dir, ignore_errors=True)


def _mirror(ws: Workspace, ui: UI, upstream: Upstream, source: Upstream) -> Mirror:
    mirror = ws.mirror(upstream.name)
    if not (mirror.exists and mirror.resolve(upstream.base) and mirror.resolve(source.base)):
        mirror = fetch(ws, ui, upstream)
    return mirror


def _resolve(stack: Stack, upstream: Upstream, mirror: Mirror) -> str:
    found = mirror.resolve(upstream.base)
    if found is None and stack.line != "main":
        raise missing_line_base(stack, upstream, mirror)
    if found is None:
        raise UpstreamError(f"upstream {upstream.name}: base {upstream.base!r} is not in {upstream.display_url}")
    return found


def _advance(ws: Workspace, ui: UI, run: RunState, source: Stack) -> BackportResult:
    """Backport what is left of each stack onto its scratch worktree; commit when none stopped."""
    op = run.operation
    assert op is not None
    targets = load_all_series(ws.stack)
    for name, stack in op.stacks.items():
        if stack.phase is not StackPhase.WAITING:
            continue
        todo = [p for p in stack.patches if p.phase is Phase.PENDING]
        if not todo:  # every one skipped: no stack to build
            stack.phase = StackPhase.DONE
            continue
        mirror, scratch = ws.mirror(name), Path(stack.tree)
        if not mirror.owns(scratch):
            _stack_top(ws, ui, mirror, stack, targets[name], run)
        tree = Repository(scratch)
        mails = [_mail(ws, source, name, p.name) for p in todo]
        stack.phase, stack.head_before = StackPhase.RUNNING, tree.head()
        ws.write_state(run)
        with ui.progress(f"backporting onto {name} of line {ws.stack.line}", len(todo)) as report:
            went = Am(tree).start(mails, report)
        _record(mirror, tree, stack, todo, went, source, ws.stack)
        ws.write_state(run)
    if any(s.phase is StackPhase.STOPPED for s in op.stacks.values()):
        return _result(ws, op, committed=False)
    return _commit(ws, ui, run, targets)


def _stack_top(ws: Workspace, ui: UI, mirror: Mirror, stack: StackRun, series: Series, run: RunState) -> None:
    """A scratch worktree at the top of the target line's stack: the commit its last apply left when the stack is
    the same since, else its base with the stack applied (it must apply cleanly: the line's own conflict first)."""
    scratch = Path(stack.tree)
    if scratch.exists():
        mirror.remove_worktree(scratch)
    scratch.parent.mkdir(parents=True, exist_ok=True)
    settled = run.settled.get(stack.name)
    mine = settled is not None and settled.base == stack.base and settled.stack_hash == series.stack_hash() \
        and mirror.resolve(settled.head) is not None
    paths = sorted({path for p in series.patches for path in p.paths})
    mirror.add_worktree(scratch, settled.head if mine and settled else stack.base) if not paths else \
        mirror.add_scratch(scratch, settled.head if mine and settled else stack.base, paths)
    tree = Repository(scratch)
    if not mine and series.patches:
        with ui.progress(f"line {ws.stack.line}: stacking {stack.name}", len(series.patches)) as report:
            went = Am(tree).start([p.path for p in series.patches], report)
        if went.stopped:
            Am(tree).abort(stack.base)
            mirror.remove_worktree(scratch)
            stopped = series.patches[len(went.methods)].name
            raise WorktreeError(f"line {ws.stack.line}: its own stack of {stack.name} does not apply on its base "
                                f"({stopped} conflicts): run 'kpatch apply --line {ws.stack.line}' and resolve it "
                                "first")
    stack.previous_head = tree.head()
    tree.widen()  # a person resolving a conflict gets every file


def _mail(ws: Workspace, source: Stack, upstream: str, name: str) -> Path:
    """The source patch with `Backport-Of: <line>:<file>` (its other trailers, Upstream-PR too, kept)."""
    original = source.get(upstream).patches / name
    target = ws.scratch_dir / _MAILS / upstream / name
    target.parent.mkdir(parents=True, exist_ok=True)
    text = with_trailers(ws.mirror(upstream).path, read_input(original, PATCH_FILE, SeriesError),
                         [(BACKPORT_OF, f"{source.line}:{name}")])
    target.write_bytes(text)
    return target


def _record(mirror: Mirror, tree: Repository, stack: StackRun, todo: list[PatchRun], am: AmRun, source: Stack,
            target: Stack) -> None:
    """What one am run did to `todo`; at a stop, the culprit on the target line's upstream history."""
    for offset, method in enumerate(am.methods):
        patch = todo[offset]
        if method is Method.EMPTY:
            patch.phase, patch.detail = Phase.UPSTREAM, f"empty on line {target.line}: its change is there already"
        else:
            patch.phase, patch.how = Phase.APPLIED, How.THREE_WAY if method is Method.THREE_WAY else How.CLEAN
    if not am.stopped:
        stack.phase, stack.final_head = StackPhase.DONE, tree.head()
        return
    stopped = todo[len(am.methods)]
    stopped.phase, stopped.hunks = Phase.CONFLICT, [Hunk(h.path, h.line) for h in am.hunks]
    from kpatch.stack import load_series

    line_patches = load_series(stack.name, target.get(stack.name).patches).patches
    original = next(p for p in load_series(stack.name, source.get(stack.name).patches).patches
                    if p.name == stopped.name)
    stopped.culprit = classify.bisect(mirror, stack, line_patches, original)
    stack.phase, stack.head_before = StackPhase.STOPPED, tree.head()


def _commit(ws: Workspace, ui: UI, run: RunState, targets: dict[str, Series]) -> BackportResult:
    """Every patch is on: the new patch files, the series and the run state in one journaled step."""
    op = run.operation
    assert op is not None
    files: dict[Path, bytes] = {}
    after = dict(targets)
    for name, stack in op.stacks.items():
        if not any(p.phase is Phase.APPLIED for p in stack.patches):
            continue
        series = targets[name]
        rendered = render(Repository(Path(stack.tree)), stack.base, series, series.dropped)
        old = {p.path for p in series.patches}
        files.update({path: data for path, data in rendered.files.items() if path not in old})
        files[series.folder / SERIES] = rendered.series
        after[name] = rendered.as_series(series, series.dropped)
    wrong = requires_problem(ws.stack, after)
    if wrong is not None:
        patch, ref, why = wrong
        raise SeriesError(f"line {ws.stack.line}: the backported {patch.name}: {why} (backport {ref} too, or "
                          f"'kpatch backport --abort --to {ws.stack.line}')")
    result = _result(ws, op, committed=True)
    run.operation = None
    files[ws.state_file] = ws.encode_state(run)
    changed = journal.write(ws.journal_dir, "backport", files, [])
    for name, stack in op.stacks.items():
        scratch = Path(stack.tree)
        if scratch.exists():
            ws.mirror(name).remove_worktree(scratch)
    shutil.rmtree(ws.scratch_dir, ignore_errors=True)
    journal.close(ws.journal_dir)
    ui.note(f"backport committed: {changed} file(s) changed in line {ws.stack.line}'s patch folders")
    return BackportResult(source=result.source, target=result.target, patches=result.patches, committed=True,
                          changed=changed)


def _require(ws: Workspace) -> RunState:
    run = ws.read_state()
    if run.operation is None or run.operation.kind is not Kind.BACKPORT:
        raise WorktreeError(f"nothing to continue or abort: no backport in progress on line {ws.stack.line}")
    return run


def _result(ws: Workspace, op: Operation, *, committed: bool) -> BackportResult:
    outcome = {Phase.APPLIED: Outcome.BACKPORTED, Phase.UPSTREAM: Outcome.SKIPPED, Phase.CONFLICT: Outcome.CONFLICT}
    patches = []
    stopped_in = None
    for name, stack in op.stacks.items():
        for patch in stack.patches:
            kind = outcome.get(patch.phase, Outcome.PENDING)
            why = patch.detail if kind is Outcome.SKIPPED else \
                f"{patch.how.value if patch.how else 'applied'} onto line {ws.stack.line}" if \
                kind is Outcome.BACKPORTED else "conflicts" if kind is Outcome.CONFLICT else "behind a conflict"
            patches.append(BackportedPatch(upstream=name, patch=patch.name, outcome=kind, why=why,
                                           culprit=patch.culprit, hunks=tuple(patch.hunks)))
            if kind is Outcome.CONFLICT:
                stopped_in = Path(stack.tree)
    return BackportResult(source=op.source or "main", target=ws.stack.line, patches=tuple(patches),
                          committed=committed, worktree=stopped_in)


__all__ = ["BackportResult", "BackportedPatch", "Outcome", "Wanted", "abort_backport", "backport",
           "continue_backport"]
