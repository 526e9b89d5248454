"""rebase: move every stack onto a new upstream base as one transaction across the repositories.

Stacks move in scratch worktrees (`<workdir>/.rebase/<name>`), kernels first, each with one `git am` over the
patches still to apply. Nothing the user owns changes until every stack has moved; then kpatch.toml, patches/
and the recorded resolutions change in one journaled step, and the user's worktrees move last.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from kpatch import config, killseam
from kpatch.config.edit import load_editor
from kpatch.engine import classify, fastpath, rerere
from kpatch.engine.diff import StackDiff, forge_url, known_side, prefetch_side, rebase_diff
from kpatch.engine.evidence import for_stack
from kpatch.engine.plan import (
    Item,
    backup,
    check_base,
    fetch,
    load_all_series,
    missing_line_base,
    refuse_unexported,
    unexported,
)
from kpatch.engine.reports import Outcome, PatchReport, RebaseResult, StackReport
from kpatch.engine.rollback import undone_on_storage_error
from kpatch.engine.worktrees import move_back, place_worktree, worktree_beside
from kpatch.errors import KpatchError, UpstreamError, UsageError, WorktreeError
from kpatch.files import SERIES_FILE
from kpatch.forge import hosts
from kpatch.gitx import Am, AmRun, Method, Mirror, Repository, restore_preimages
from kpatch.gitx.patches import drop_patch_ids_ahead, prefetch_patch_ids
from kpatch.output.ui import UI, count
from kpatch.project import journal
from kpatch.project.state import (
    Evidence,
    How,
    Hunk,
    Kind,
    Operation,
    PatchClass,
    PatchRun,
    Phase,
    Resolved,
    RunState,
    Settled,
    StackPhase,
    StackRun,
)
from kpatch.project.workspace import Workspace, writes
from kpatch.stack import SERIES, Patch, Series, parse_patch, parse_series_text
from kpatch.stack.mbox import read_text
from kpatch.stack.writer import render

log = logging.getLogger("kpatch.rebase")


@writes("rebase")
def rebase(ws: Workspace, ui: UI, onto: Mapping[str, str], *, force: bool, discard: bool = False) -> RebaseResult:
    run = ws.refuse_if_busy()
    # The stacks are read (150 patch files parsed: 0.1-0.2 s of Python) while git fetches and resolves the first
    # upstream; a failure before they are needed is told after a broken stack's, as when they were read first.
    import email.parser  # noqa: F401  # what the reading imports, imported here: no import races the other thread's

    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kpatch-series") as pool:
            reading = pool.submit(load_all_series, ws.stack)
            try:
                series, stacks, items = _checked(ws, ui, onto, run, reading, force=force)
            except BaseException:
                reading.result()
                raise
        refuse_unexported(ws, items, run, discard=discard, doing="kpatch rebase")
        ws.check_writable(ws.workdir, ws.kpatch_dir, ws.stack.path, *(u.patches for u in ws.stack.upstreams),
                          *(i.worktree for i in items if i.worktree.exists()))  # moved last, after the commit point
        pulls = hosts.check_pulls({pr for s in series.values() for p in s.patches for pr in p.prs})
        if pulls.unavailable:  # said once, here (stderr); the result carries it for --json and the nightly report
            ui.warn(pulls.unavailable)
        for upstream in ws.stack.upstreams:
            classify.mark_merged(ws.mirror(upstream.name), series[upstream.name].patches, stacks[upstream.name], pulls)
    finally:  # what was asked ahead is for the detection above only (a run in the same process asks again)
        drop_patch_ids_ahead()
    discarded = {i.upstream.name: Repository(i.worktree).head() for i in items if discard and i.worktree.exists()}
    with undone_on_storage_error(ws, "rebase", lambda: abort_rebase(ws, UI(quiet=True))):
        run.operation = Operation(kind=Kind.REBASE, stacks=stacks, github=pulls.unavailable, discard=discarded)
        ws.write_state(run)
        return _advance(ws, ui, run, series)


def _checked(ws: Workspace, ui: UI, onto: Mapping[str, str], run: RunState, reading: Future[dict[str, Series]], *,
             force: bool) -> tuple[dict[str, Series], dict[str, StackRun], list[Item]]:
    """Every upstream fetched, resolved and checked, in order, and the stacks read (`reading`, joined where first
    needed): (the series, each stack's run, the items)."""
    series: dict[str, Series] = {}
    for name in onto:
        ws.stack.get(name)
    stacks: dict[str, StackRun] = {}
    items = []
    for upstream in ws.stack.upstreams:  # everything is resolved and checked before anything is written
        ref = onto.get(upstream.name, upstream.branch)
        mirror = ws.mirror(upstream.name)
        if not (config.SHA_RE.match(ref) and mirror.exists and mirror.resolve(ref) and mirror.resolve(upstream.base)):
            mirror = fetch(ws, ui, upstream)  # the branch head, or a commit the mirror lacks (none to fetch else)
        old = mirror.resolve(upstream.base)
        new = mirror.resolve(ref)
        if old is None and ws.stack.line != config.MAIN:
            raise missing_line_base(ws.stack, upstream, mirror)
        if old is None:
            raise UpstreamError(f"upstream {upstream.name}: pinned base {upstream.base!r} is not in "
                                f"{upstream.display_url}: check 'base' in kpatch.toml, or fetch from a copy that "
                                f"has it with --url {upstream.name}=PATH")
        check_base(ws.stack, upstream, old, run.settled.get(upstream.name), ui)
        if new is None:
            raise UpstreamError(f"upstream {upstream.name}: {ref!r} is not a commit, tag or branch of "
                                f"{upstream.display_url}")
        if not force and not mirror.is_ancestor(old, new):
            direction = "goes backwards past" if mirror.is_ancestor(new, old) else "does not descend from"
            raise UsageError(f"upstream {upstream.name}: {ref} ({new[:12]}) {direction} the base {old[:12]}; "
                             "use --force to rebase onto it anyway")
        if not series and not reading.done():  # the stack is still being read: its patch-ids are asked now
            _ids_ahead(mirror, old, new, upstream.patches)
        series = series or reading.result()  # joined where first needed
        stacks[upstream.name] = StackRun(name=upstream.name, base=new, old_base=old,
                                         tree=str(ws.scratch_dir / upstream.name),
                                         patches=[PatchRun(name=p.name) for p in series[upstream.name].patches])
        ws.check_owned(upstream.name)  # moved at the end: only a worktree kpatch made
        items.append(Item(upstream=upstream, series=series[upstream.name], base=old, mirror=mirror,
                          worktree=ws.worktree(upstream.name)))
        rerere.check(ws.stack.resolutions, upstream.name)
    return series or reading.result(), stacks, items


# What the stack reader takes for a path a diff reads or writes (stack/diff.py), on a whole patch file: a line in a
# hunk or message that looks like one, or a quoted path, gives another set of paths, so nothing is taken ahead.
_PATH_LINES = re.compile(r"^(?:--- a/|\+\+\+ b/|rename from |rename to |copy from |copy to )(.*?)\t*$", re.MULTILINE)
_SAME_NAME = re.compile(r"^diff --git a/(\S+) b/\1$", re.MULTILINE)


def _ids_ahead(mirror: Mirror, old: str, new: str, folder: Path) -> None:
    """Start what the already-merged detection (classify.mark_merged) asks git, while the stack is read: the
    patch-ids of old..new's commits touching the paths the stack's files name, and those of the files. It takes
    them only if it asks exactly that (the paths the reader finds are these); else git is asked again."""
    try:
        names = parse_series_text(read_text(folder / SERIES, SERIES_FILE), str(folder / SERIES))
        files = [folder / name for name in names]
        texts = [read_text(path) for path in files]
    except (KpatchError, OSError):
        return  # the reader says what is wrong
    paths = {m.group(1) for text in texts for m in _PATH_LINES.finditer(text)} | \
        {m.group(1) for text in texts for m in _SAME_NAME.finditer(text)}
    if files and paths:
        prefetch_patch_ids(mirror, old, new, sorted(paths), files)


@writes("rebase --continue")
def continue_rebase(ws: Workspace, ui: UI) -> RebaseResult:
    if ws.pending_journal() == "rebase":
        if journal.committed(ws.journal_dir):
            with ws.config_lock("rebase --continue"):  # only this line's bases are written: another line's stay
                journal.forward(ws.journal_dir, _own_bases(ws))
            return _finish(ws, ui, _require(ws))
        journal.back(ws.journal_dir)  # killed while staging: nothing was written; stage it again
    run = _require(ws)
    op = run.operation
    assert op is not None
    series = load_all_series(ws.stack)
    for stack in op.stacks.values():
        patches = series[stack.name].patches
        if stack.phase is StackPhase.RUNNING:  # killed while git am ran: undo its half, then go again
            _undo(ws, stack, patches)
        elif stack.phase in (StackPhase.STOPPED, StackPhase.RESUMING) and not _resume(ws, ui, run, stack, patches):
            ws.write_state(run)
            return _result(ws, op, committed=False)
        ws.write_state(run)
    return _advance(ws, ui, run, series)


@writes("rebase --abort")
def abort_rebase(ws: Workspace, ui: UI) -> tuple[str, ...]:
    """Drop the scratch worktrees and the rebase; a half-written kpatch.toml and patches/ go back as they were."""
    restored_files, aside = False, None
    if ws.pending_journal() == "rebase":
        with ws.config_lock("rebase --abort"):  # only this line's bases go back: another line's stay as written
            aside = journal.back(ws.journal_dir, _own_bases(ws))
        restored_files = aside is None
        if aside is not None:
            ui.warn(f"the journal could not be read: set aside as {aside}; kpatch.toml and patches/ are as the "
                    "interrupted write left them (check them with 'git status')")
    run = _require(ws)
    op = run.operation
    assert op is not None
    for stack in op.stacks.values():
        scratch, mirror = Path(stack.tree), ws.mirror(stack.name)
        if mirror.owns(scratch):
            tree = Repository(scratch)
            if Am(tree).in_progress():
                Am(tree).abort(tree.head())
        for folder in (scratch, ws.worktree_beside(stack.name)):
            if folder.exists():
                mirror.remove_worktree(folder)
        path = ws.worktree(stack.name)
        if not path.exists() and mirror.half_made(path):  # killed as the finish moved it in: a record, no folder
            mirror.remove_worktree(path)
        move_back(ws, ui, run, stack)
    shutil.rmtree(ws.scratch_dir, ignore_errors=True)
    shutil.rmtree(ws.rerere_dir, ignore_errors=True)
    run.operation = None
    ws.write_state(run)
    ui.note("rebase aborted" + ("" if aside else "; kpatch.toml and patches/ are as they were") +
            (" (restored from the journal)" if restored_files else ""))
    return tuple(op.stacks)


def _advance(ws: Workspace, ui: UI, run: RunState, series: dict[str, Series]) -> RebaseResult:
    """Apply what is left of every unblocked stack (`series`: the stacks as patches/ holds them now), then commit
    if nothing conflicts."""
    op = run.operation
    assert op is not None
    for upstream in ws.stack.upstreams:
        stack = op.stacks[upstream.name]
        patches = series[upstream.name].patches
        mirror = ws.mirror(upstream.name)
        blocked = any(op.stacks[d].phase is not StackPhase.DONE for d in ws.stack.closure(upstream.name))
        if stack.phase is StackPhase.WAITING and blocked:
            classify.predict(mirror, stack, patches, 0)
        if stack.phase is not StackPhase.WAITING or blocked:
            continue
        scratch = Path(stack.tree)
        fresh = not mirror.owns(scratch)  # new, or half-made by an interrupted run: made when git am needs it
        if fresh:
            if scratch.exists():
                mirror.remove_worktree(scratch)
            for patch in stack.patches:  # a fresh start holds none of them
                if patch.phase is Phase.APPLIED:
                    patch.reset()
        todo = [p for p in stack.patches if not p.settled]
        stack.phase, stack.head_before = StackPhase.RUNNING, stack.base if fresh else Repository(scratch).head()
        for patch in todo:
            patch.reset()
            patch.phase = Phase.IN_FLIGHT
        ws.write_state(run)  # what --continue sees if this run is killed from here on
        commits = fastpath.originals(mirror if fresh else Repository(scratch), stack.head_before, stack,
                                     series[upstream.name], run.settled.get(upstream.name))
        if stack.old_base is not None and patches and commits:  # the picked commits hold the files: the old side
            known_side(mirror, stack.old_base, series[upstream.name], commits)
        elif stack.old_base is not None and patches:  # the review's old side is made while git picks the stack
            prefetch_side(mirror, stack.old_base, series[upstream.name])
        with worktree_beside(ws, mirror, upstream.name, stack.base):
            picked = None
            if commits and fresh:  # picks without a worktree: git am (in the scratch) only from where they stop
                with ui.progress(f"rebasing {upstream.name}", len(todo)) as report:
                    picked = fastpath.run(mirror, None, stack, patches, commits, report)
                if picked is not None:
                    todo, stack.head_before = picked
                    if not todo:
                        stack.phase, stack.final_head = StackPhase.DONE, stack.head_before
                    ws.write_state(run)  # a kill from here on undoes am's part only
                    if not todo:
                        continue
            if fresh:
                scratch.parent.mkdir(parents=True, exist_ok=True)
                mirror.add_scratch(scratch, stack.head_before, sorted({path for p in patches for path in p.paths}))
                killseam.reached(f"rebase:scratch:{upstream.name}")
            tree = Repository(scratch)
            if commits and picked is None:  # one process picks the stack; git am takes over at the first patch
                with ui.progress(f"rebasing {upstream.name}", len(todo)) as report:  # the picks cannot class
                    todo, _ = fastpath.run(mirror, tree, stack, patches, commits, report) or (todo, "")
                stack.head_before = tree.head()  # a kill from here on undoes am's part only
                ws.write_state(run)
            am = AmRun(methods=(), stopped=False)
            if todo:
                restore_preimages(mirror, [series[upstream.name].folder / p.name for p in patches])
                what = f"rebasing {upstream.name}" + (f" with git am from {todo[0].name}" if commits else "")
                # The project's recorded resolutions go into the (shared) mirror's rr-cache every time, and only
                # for this am: see engine/rerere.py.
                with rerere.session(ws, mirror, upstream.name, tree), ui.progress(what, len(todo)) as report:
                    am = Am(tree).start([series[upstream.name].folder / p.name for p in todo], report, rerere=True)
        _record(mirror, tree, stack, todo, am, patches)
        ws.write_state(run)
    if any(s.phase is not StackPhase.DONE for s in op.stacks.values()):
        return _result(ws, op, committed=False)
    return _commit(ws, ui, run, series)


def _record(mirror: Mirror, tree: Repository, stack: StackRun, todo: Sequence[PatchRun], am: AmRun,
            patches: Sequence[Patch], *, resumed: bool = False) -> None:
    """Classify the patches one am run went through; at a stop, find the culprit and predict the rest."""
    by_name = {p.name: p for p in patches}
    for offset, method in enumerate(am.methods):
        patch = todo[offset]
        patch.hunks, patch.culprit, patch.predicted = [], None, None
        if method is Method.EMPTY:
            patch.phase, patch.evidence = Phase.UPSTREAM, Evidence.EMPTY
            assert stack.old_base is not None
            patch.commit = mirror.last_commit_touching(stack.old_base, stack.base, by_name[patch.name].paths)
        else:
            patch.phase = Phase.APPLIED
            patch.how = How.THREE_WAY if method is Method.THREE_WAY else How.CLEAN
            if offset in am.rerere:
                patch.resolved = Resolved.RECORDED
            elif resumed and offset == 0:
                patch.resolved = Resolved.BY_HAND
    for patch in todo[len(am.methods):]:
        patch.phase = Phase.PENDING
    if not am.stopped:
        stack.phase, stack.final_head = StackPhase.DONE, tree.head()
        return
    stopped = todo[len(am.methods)]
    stack.head_before = tree.head()  # what a person's own `git am --continue` then builds on
    stopped.phase = Phase.CONFLICT
    stopped.hunks = [Hunk(h.path, h.line) for h in am.hunks]
    kept = [by_name[p.name] for p in stack.patches if p.phase is Phase.APPLIED]
    stopped.culprit = classify.bisect(mirror, stack, kept, by_name[stopped.name])
    stack.phase = StackPhase.STOPPED
    classify.predict(mirror, stack, patches, stack.patches.index(stopped) + 1)
    tree.widen()  # the scratch held only the stack's files: a person resolving gets all of them


def _resume(ws: Workspace, ui: UI, run: RunState, stack: StackRun, patches: Sequence[Patch]) -> bool:
    """Go on after a person resolved the stopped patch (or after a kill interrupted that); False when the
    stack stopped again."""
    tree, mirror = Repository(Path(stack.tree)), ws.mirror(stack.name)
    stopped = next(p for p in stack.patches if p.phase is Phase.CONFLICT)
    index = stack.patches.index(stopped)
    todo = [stopped, *(p for p in stack.patches[index + 1:] if not p.settled)]
    am = Am(tree)
    if stack.phase is StackPhase.RESUMING and stack.head_before:
        am.after_killed_resume(stack.head_before, sorted({f for p in patches for f in p.new_files}))
    if am.in_progress():
        stack.phase, stack.head_before = StackPhase.RESUMING, tree.head()
        ws.write_state(run)  # what the next --continue sees if this one is killed
        with rerere.session(ws, mirror, stack.name, tree), ui.progress(f"continuing {stack.name}", len(todo)) as report:
            went = am.resume(report, rerere=True)
        _record(mirror, tree, stack, todo, went, patches, resumed=True)
        return stack.phase is not StackPhase.STOPPED
    moved = tree.count(stack.head_before, "HEAD") if stack.head_before else 0
    for offset, patch in enumerate(todo):  # finished (or skipped) outside kpatch: keep what was committed
        patch.reset()
        if offset < moved:
            patch.phase, patch.how, patch.resolved = Phase.APPLIED, How.THREE_WAY, Resolved.BY_HAND
    stack.phase = StackPhase.WAITING
    return True


def _undo(ws: Workspace, stack: StackRun, patches: Sequence[Patch]) -> None:
    """Leave a git am a kill interrupted: back to the HEAD it started from, the in-flight patches pending."""
    scratch, mirror = Path(stack.tree), ws.mirror(stack.name)
    if mirror.owns(scratch) and stack.head_before:
        created = sorted({f for p in patches for f in p.new_files})
        Am(Repository(scratch)).abort(stack.head_before, created)
    for patch in stack.patches:
        if patch.phase is Phase.IN_FLIGHT:
            patch.reset()
    stack.phase = StackPhase.WAITING


def _commit(ws: Workspace, ui: UI, run: RunState, series: dict[str, Series]) -> RebaseResult:
    """Every stack moved: write kpatch.toml, patches/ and the recorded resolutions in one journaled step."""
    op = run.operation
    assert op is not None
    writes: dict[Path, bytes] = {}
    deletes: list[Path] = []
    after: dict[str, Series] = {}
    load_editor()  # kpatch.toml's editor, loaded while git writes the patches and the review (waited for next)
    reviews = _reviews(ws, ui, op, series)  # before the files change: the old side is made from them
    for upstream in ws.stack.upstreams:
        stack, stack_series = op.stacks[upstream.name], series[upstream.name]
        dropped = dict(stack_series.dropped)
        for patch in stack.patches:
            if patch.phase is Phase.UPSTREAM:
                dropped[patch.name] = f"upstream ({classify.why(patch, [])}; commit {patch.commit or 'unknown'})"
        assert stack.final_head is not None
        # The scratch worktree when it was made (its format-patch reads the .gitattributes it has on disk, as it
        # did before the picks without a worktree: fastpath._attributes_on_disk), else the mirror.
        mirror, scratch = ws.mirror(upstream.name), Path(stack.tree)
        tree = Repository(scratch) if mirror.owns(scratch) else mirror
        rendered = render(tree, stack.base, stack_series, dropped, tip=stack.final_head)
        after[upstream.name] = rendered.as_series(stack_series, dropped)
        writes.update(rendered.files)
        writes[upstream.patches / SERIES] = rendered.series
        deletes += [p.path for p in stack_series.patches if p.path not in rendered.files]
        writes.update(rerere.recorded(ws.stack.resolutions, upstream.name, ws.rerere_dir / upstream.name))
    with ws.config_lock("rebase"):  # kpatch.toml is the project's: another line's rebase may write it too
        writes[ws.stack.path] = config.with_new_bases(ws.stack.path, {n: s.base for n, s in op.stacks.items()},
                                                      line=ws.stack.line)
        changed = journal.write(ws.journal_dir, "rebase", writes, deletes)
    ui.note(f"rebase committed: {count(changed, 'file')} changed in kpatch.toml and patches/")
    return _finish(ws, ui, run, changed, after, reviews)


def _own_bases(ws: Workspace) -> dict[Path, journal.Merge]:
    """kpatch.toml, as a journaled rebase of this line writes or restores it: only this line's bases from its copy,
    on top of what kpatch.toml holds now (another line's rebase may have written its own bases since)."""
    path = ws.stack.path
    names = tuple(u.name for u in ws.stack.upstreams)
    where = Path(os.path.realpath(path.parent)) / path.name  # as the journal names its targets
    return {where: lambda now, copy: config.with_line_bases_of(now, copy, names, line=ws.stack.line)}


def _reviews(ws: Workspace, ui: UI, op: Operation, series: dict[str, Series]) -> dict[str, StackDiff]:
    """Each stack's range-diff from its patch files on the old base to its rebased commits; a stack whose review
    cannot be made is said once and left out (the review never stops a rebase)."""
    reviews = {}
    for name, stack in op.stacks.items():
        assert stack.old_base is not None and stack.final_head is not None
        kept = [p.name for p in stack.patches if p.phase is Phase.APPLIED]
        merged = [p.name for p in stack.patches if p.phase is Phase.APPLIED and p.how is How.THREE_WAY]
        try:
            reviews[name] = rebase_diff(ws.mirror(name), name, stack.old_base, series[name], stack.base,
                                        stack.final_head, kept, merged, forge_url(ws.stack.get(name).mirror_url))
        except KpatchError as failure:
            ui.warn(f"{name}: no range-diff of the rebase: {failure}")
        except Exception as failure:  # a bug in the review must not stop a rebase at its commit point
            log.exception("range-diff of %s", name)
            ui.warn(f"{name}: no range-diff of the rebase: {type(failure).__name__}: {failure} (a kpatch bug; the log "
                    "has its traceback)")
    return reviews


def _finish(ws: Workspace, ui: UI, run: RunState, changed: int | None = None,
            series: dict[str, Series] | None = None, reviews: Mapping[str, StackDiff] | None = None) -> RebaseResult:
    """Move the user's worktrees to the rebased commits (keeping what they held), drop the scratch ones.
    `series`: the stacks as the commit just wrote them (else read from patches/)."""
    op = run.operation
    assert op is not None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    series = series or load_all_series(ws.stack)
    for name, stack in op.stacks.items():
        assert stack.final_head is not None
        path, mirror = ws.worktree(name), ws.mirror(name)
        tree = Repository(path)
        if mirror.half_made(path):  # killed while adding it: made again below
            mirror.remove_worktree(path)
        if path.exists() and tree.head() != stack.final_head:
            # --discard lets go of the commits the worktree held when the rebase started, not of later ones.
            let_go = op.discard.get(name) == tree.head()
            if tree.dirty() or tree.operation() or \
                    (not let_go and unexported(tree, series[name], run.settled.get(name), None)):
                ui.warn(f"worktree {path} has local changes or unexported commits: left as it is; run "
                        "'kpatch export' or 'kpatch apply' when ready")
            else:
                backup(tree, name, stamp)
                tree.checkout(stack.final_head)
        elif not path.exists():
            place_worktree(ws, mirror, name, stack.final_head)
        for scratch in (Path(stack.tree), ws.worktree_beside(name)):
            if scratch.exists():
                mirror.remove_worktree(scratch)
    result = _result(ws, op, committed=True, changed=changed, reviews=reviews or {}, series=series)
    for name, stack in op.stacks.items():
        assert stack.final_head is not None
        run.settled[name] = Settled(base=stack.base, head=stack.final_head, stack_hash=series[name].stack_hash())
    shutil.rmtree(ws.scratch_dir, ignore_errors=True)  # before the end is recorded: a kill leaves none behind
    shutil.rmtree(ws.rerere_dir, ignore_errors=True)  # the journal wrote them into patches/.rerere
    run.operation = None
    ws.write_state(run)
    killseam.reached("rebase:finished")
    journal.close(ws.journal_dir)
    return result


def _require(ws: Workspace) -> RunState:
    run = ws.read_state()
    if run.operation is None or run.operation.kind is not Kind.REBASE:
        raise WorktreeError(f"nothing to continue or abort: no rebase in progress in {ws.workdir}")
    return run


def _result(ws: Workspace, op: Operation, *, committed: bool, changed: int | None = None,
            reviews: Mapping[str, StackDiff] | None = None, series: Mapping[str, Series] | None = None) -> RebaseResult:
    """The rebase's report; `series`: the stacks as patches/ holds them now, read already (else read here)."""
    reports = []
    for name, stack in op.stacks.items():
        assert stack.old_base is not None
        patches = []
        behind = for_stack(ws, name, stack.old_base, stack.base,
                           {p.name for p in stack.patches if classify.patch_class(p) is PatchClass.CONFLICT})
        for patch in stack.patches:
            now_upstream = _requires(ws, name, patch.name, op, series)
            patches.append(PatchReport(upstream=name, name=patch.name, klass=classify.patch_class(patch),
                                       applied=patch.phase is Phase.APPLIED, why=classify.why(patch, now_upstream),
                                       commit=patch.commit,
                                       hunks=tuple(Hunk(h.path, h.line) for h in patch.hunks), culprit=patch.culprit,
                                       upstream_commits=behind.get(patch.name, ())))
        reports.append(StackReport(name=name, old_base=stack.old_base, new_base=stack.base,
                                   outcome=Outcome.of(stack.phase), patches=tuple(patches),
                                   review=(reviews or {}).get(name)))
    return RebaseResult(stacks=tuple(reports), github=op.github, committed=committed, changed=changed)


def _requires(ws: Workspace, stack: str, name: str, op: Operation, series: Mapping[str, Series] | None) -> list[str]:
    """`Requires:` of this patch that now name an upstream patch (shown as a note)."""
    if series is not None:  # the files patches/ holds, as the commit wrote them (a patch dropped has none)
        patch = next((p for p in series[stack].patches if p.name == name), None)
        requires = patch.requires if patch is not None else ()
    else:
        path = ws.stack.get(stack).patches / name
        if not path.is_file():
            return []
        requires = parse_patch(path).requires
    found = []
    for ref in requires:
        other = op.stacks.get(ref.upstream)
        target = other.patch(ref.patch) if other else None
        if target is not None and target.phase is Phase.UPSTREAM:
            found.append(str(ref))
    return found
