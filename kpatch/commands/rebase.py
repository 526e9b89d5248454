"""`kpatch rebase`: move every stack onto a new upstream base as one transaction across the repos.

Stacks are rebased in scratch worktrees (work/.rebase/<name>), kernels first. Nothing the user owns changes
until every stack has moved; then kpatch.toml, patches/ and the rerere cache change in one journaled step.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kpatch import config, git, github, rebase_state
from kpatch.commands.export import render
from kpatch.errors import UpstreamError, UsageError, WorktreeError
from kpatch.plan import load_all_series
from kpatch.rebase_state import Culprit, PatchClass, PatchResult, RebaseState, StackRebase
from kpatch.series import Patch
from kpatch.transaction import Transaction, resume
from kpatch.ui import UI
from kpatch.workspace import ApplyState, Outcome, UpstreamState, Workspace

RERERE = ".rerere"
IN_FLIGHT = "in flight"  # the `why` of the patch git am is applying right now
TRIAL = "trial apply"  # the `why` of a class found on a throwaway index, not yet applied


@dataclass(frozen=True)
class RebaseResult:
    stacks: tuple[StackRebase, ...]
    github: str | None
    committed: bool  # kpatch.toml and patches/ were rewritten

    @property
    def conflict(self) -> PatchResult | None:
        return next((p for s in self.stacks for p in s.patches if p.klass is PatchClass.CONFLICT), None)


def rebase(ws: Workspace, ui: UI, onto: Mapping[str, str], *, force: bool) -> RebaseResult:
    _refuse_if_busy(ws)
    series = load_all_series(ws.stack)
    for name in onto:
        ws.stack.get(name)
    stacks: dict[str, StackRebase] = {}
    for upstream in ws.stack.upstreams:  # everything is resolved and checked before anything is written
        mirror = ws.mirror(upstream.name)
        with ui.progress(f"fetching {upstream.name} from {upstream.url}", 100) as report:
            git.fetch_mirror(mirror, upstream.url, upstream.name, report)
        old = git.resolve(mirror, upstream.base)
        ref = onto.get(upstream.name, upstream.branch)
        new = git.resolve(mirror, ref)
        if old is None:
            raise UpstreamError(f"upstream {upstream.name}: pinned base {upstream.base!r} is not in {upstream.url}")
        if new is None:
            raise UpstreamError(f"upstream {upstream.name}: {ref!r} is not a commit, tag or branch of {upstream.url}")
        if not force and not git.is_ancestor(mirror, old, new):
            direction = "goes backwards past" if git.is_ancestor(mirror, new, old) else "does not descend from"
            raise UsageError(f"upstream {upstream.name}: {ref} ({new[:12]}) {direction} the base {old[:12]}; "
                             "use --force to rebase onto it anyway")
        stacks[upstream.name] = StackRebase(
            name=upstream.name, old_base=old, new_base=new, scratch=str(ws.workdir / ".rebase" / upstream.name),
            outcome=Outcome.BLOCKED, patches=[PatchResult(name=p.name) for p in series[upstream.name].patches])
    prs = {pr for s in series.values() for p in s.patches for pr in p.prs}
    pulls = github.check_pulls(prs)
    if pulls.unavailable:
        ui.warn(pulls.unavailable)
    state = RebaseState(stacks=stacks, github=pulls.unavailable)
    for upstream in ws.stack.upstreams:
        _classify_merged(ws, series[upstream.name].patches, stacks[upstream.name], pulls)
    rebase_state.write(_state_file(ws), state)
    return _run(ws, ui, state)


def continue_rebase(ws: Workspace, ui: UI) -> RebaseResult:
    if _journal(ws).exists():
        resume(_journal(ws))
        return _finish(ws, ui, _require_state(ws))
    state = _require_state(ws)
    for stack in state.stacks.values():
        stopped = stack.outcome is Outcome.CONFLICT  # else only a patch in flight when kpatch was killed counts
        index = next((i for i, p in enumerate(stack.patches)
                      if p.klass is PatchClass.CONFLICT and (stopped or p.why == IN_FLIGHT)), None)
        if index is None:
            continue
        result, scratch = stack.patches[index], Path(stack.scratch)
        if result.why == IN_FLIGHT:  # killed while git am ran: undo what it half did, then try again
            if git.is_worktree_of(scratch, ws.mirror(stack.name)):
                if git.operation_in_progress(scratch) == "am":
                    git.am_abort(scratch)
                if stack.head_before:
                    git.reset_hard(scratch, stack.head_before)
            result.klass = PatchClass.NOT_TRIED
        elif git.operation_in_progress(scratch) == "am":
            step = git.am_resume(scratch)
            if step.step is git.Step.CONFLICT:
                result.hunks = [(h.path, h.line) for h in step.hunks]
                rebase_state.write(_state_file(ws), state)
                return _result(state, committed=False)
            result.klass, result.applied = PatchClass.THREE_WAY, True
            result.why = "resolved by hand (recorded for the next rebase)"
        elif stack.head_before and git.head(scratch) != stack.head_before:
            result.klass, result.applied, result.why = PatchClass.THREE_WAY, True, "finished outside kpatch"
        else:
            result.klass = PatchClass.NOT_TRIED  # skipped or aborted by hand: try it again
        if result.klass is PatchClass.NOT_TRIED:
            result.why = ""
        result.culprit, result.hunks = None, []
        stack.outcome = Outcome.BLOCKED
        rebase_state.write(_state_file(ws), state)
    return _run(ws, ui, state)


def abort_rebase(ws: Workspace, ui: UI) -> tuple[str, ...]:
    """Drop the scratch worktrees and the rebase state: kpatch.toml and patches/ were never touched."""
    state = _require_state(ws)
    for stack in state.stacks.values():
        scratch, mirror = Path(stack.scratch), ws.mirror(stack.name)
        if git.is_worktree_of(scratch, mirror) and git.operation_in_progress(scratch) == "am":
            git.am_abort(scratch)
        if scratch.exists():
            git.remove_worktree(mirror, scratch)
    _state_file(ws).unlink()
    ui.note("rebase aborted; kpatch.toml and patches/ are as they were")
    return tuple(state.stacks)


def _run(ws: Workspace, ui: UI, state: RebaseState) -> RebaseResult:
    """Apply what is left of every unblocked stack, then commit if nothing conflicts."""
    series = load_all_series(ws.stack)
    for upstream in ws.stack.upstreams:
        stack = state.stacks[upstream.name]
        blocked = any(state.stacks[d].outcome is not Outcome.APPLIED for d in ws.stack.closure(upstream.name))
        if stack.outcome is Outcome.BLOCKED and blocked:
            _predict(ws, stack, series[upstream.name].patches, 0)
        if stack.outcome is not Outcome.BLOCKED or blocked:
            continue
        scratch, mirror = Path(stack.scratch), ws.mirror(upstream.name)
        if not git.is_worktree_of(scratch, mirror):  # new, or half-made by an interrupted run
            if scratch.exists():
                git.remove_worktree(mirror, scratch)
            scratch.parent.mkdir(parents=True, exist_ok=True)
            git.add_worktree(mirror, scratch, stack.new_base)
            _load_rerere(ws, upstream.name, git.enable_rerere(mirror))
            for result in stack.patches:  # a fresh scratch holds none of them
                result.applied = False
        patches = {p.name: p for p in series[upstream.name].patches}
        with ui.progress(f"rebasing {upstream.name}", len(stack.patches)) as report:
            for index, result in enumerate(stack.patches):
                report(index)
                if _settled(result):
                    continue
                if not _apply_one(ws, state, stack, index, patches):
                    stack.outcome = Outcome.CONFLICT
                    _predict(ws, stack, series[upstream.name].patches, index + 1)
                    break
            else:
                report(len(stack.patches))
                stack.outcome = Outcome.APPLIED
        rebase_state.write(_state_file(ws), state)
    if any(s.outcome is not Outcome.APPLIED for s in state.stacks.values()):
        return _result(state, committed=False)
    return _commit(ws, ui, state)


def _apply_one(ws: Workspace, state: RebaseState, stack: StackRebase, index: int,
               patches: Mapping[str, Patch]) -> bool:
    result, scratch, mirror = stack.patches[index], Path(stack.scratch), ws.mirror(stack.name)
    patch = patches[result.name]
    result.hunks, result.culprit, result.commit = [], None, None
    stack.head_before = git.head(scratch)
    result.klass, result.why = PatchClass.CONFLICT, IN_FLIGHT  # what --continue sees if this run is killed
    rebase_state.write(_state_file(ws), state)
    step = git.am_one(scratch, patch.path)
    result.why = ""
    if step.step is git.Step.EMPTY:
        carrier = git.last_commit_touching(mirror, stack.old_base, stack.new_base, patch.paths)
        result.klass, result.commit = PatchClass.UPSTREAM, carrier
        result.why = "empty after a 3-way apply: its change is already upstream"
    elif step.step is git.Step.CONFLICT:
        result.hunks = [(h.path, h.line) for h in step.hunks]
        kept = [patches[p.name] for p in stack.patches[:index] if p.applied]
        result.culprit = _bisect(mirror, stack.old_base, stack.new_base, kept, patch)
        return False
    else:
        result.applied = True
        result.klass = PatchClass.CLEAN if step.step is git.Step.CLEAN else PatchClass.THREE_WAY
        notes = ["conflict resolved by a recorded resolution"] if step.rerere else []
        notes += [f"requires {ref}, which is now upstream" for ref in patch.requires
                  if _klass(state, ref.upstream, ref.patch) is PatchClass.UPSTREAM]
        result.why = "; ".join(notes)
    return True


def _klass(state: RebaseState, stack: str, name: str) -> PatchClass | None:
    return next((p.klass for p in state.stacks[stack].patches if p.name == name), None)


def _settled(result: PatchResult) -> bool:
    """In the scratch worktree already, or found upstream before any apply (patch-id, merged PR, empty am)."""
    return result.applied or (result.klass is PatchClass.UPSTREAM and not result.why.startswith(TRIAL))


def _predict(ws: Workspace, stack: StackRebase, patches: tuple[Patch, ...], start: int) -> None:
    """Classes for the patches a conflict keeps from being applied, by trial applies on a throwaway index:
    the maintainer sees every conflict of the rebase at once, not one per run."""
    mirror = ws.mirror(stack.name)
    kept = [p for p, r in zip(patches, stack.patches, strict=True) if r.applied]
    for patch, result in list(zip(patches, stack.patches, strict=True))[start:]:
        if _settled(result):
            continue
        step = git.trial(mirror, stack.new_base, [k.path for k in kept], patch.path)
        result.hunks, result.culprit = [], None
        if step is git.Step.EMPTY:
            result.klass, result.why = PatchClass.UPSTREAM, f"{TRIAL}: empty, its change is already upstream"
            result.commit = git.last_commit_touching(mirror, stack.old_base, stack.new_base, patch.paths)
        elif step is git.Step.CONFLICT:
            result.klass, result.why = PatchClass.CONFLICT, TRIAL
            result.culprit = _bisect(mirror, stack.old_base, stack.new_base, kept, patch)
        else:
            result.klass = PatchClass.CLEAN if step is git.Step.CLEAN else PatchClass.THREE_WAY
            result.why = f"{TRIAL}: applied for real once the conflict before it is resolved"
            kept.append(patch)


def _classify_merged(ws: Workspace, patches: tuple[Patch, ...], stack: StackRebase, pulls: github.PullCheck) -> None:
    """(a) the same patch-id among the upstream commits that touch its paths, (c) its PR merged into the new base."""
    mirror = ws.mirror(stack.name)
    paths = sorted({path for p in patches for path in p.paths})
    upstream_ids = git.range_patch_ids(mirror, stack.old_base, stack.new_base, paths)
    ids = git.file_patch_ids(mirror, [p.path for p in patches])
    for patch, result, patch_id in zip(patches, stack.patches, ids, strict=True):
        carrier = upstream_ids.get(patch_id) if patch_id else None
        if carrier:
            info = git.commit_info(mirror, carrier)
            result.klass, result.commit = PatchClass.UPSTREAM, carrier
            result.why = f'same patch-id as upstream {carrier[:12]} "{info.subject}"'
            continue
        for pr in patch.prs:
            pull = pulls.pulls.get(pr)
            if pull and pull.merged and pull.merge_commit and git.is_ancestor(mirror, pull.merge_commit,
                                                                                 stack.new_base):
                result.klass, result.commit = PatchClass.UPSTREAM, pull.merge_commit
                result.why = f"{pr} is merged upstream as {pull.merge_commit[:12]}"


def _bisect(mirror: Path, old: str, new: str, kept: list[Patch], patch: Patch) -> Culprit | None:
    """The first upstream commit (first-parent line) after which the patch no longer applies: O(log n) trials.

    Only the earlier patches that touch the same files go first: the others cannot change the answer, and
    one resolved by hand would, as its original file, stop applying at its own culprit and hide this one's.
    """
    commits = git.first_parent_range(mirror, old, new)
    good, bad, trials = -1, len(commits) - 1, 0
    if bad < 0:
        return None
    shared = [k.path for k in kept if set(k.paths) & set(patch.paths)]
    while bad - good > 1:
        middle = (good + bad) // 2
        trials += 1
        if git.trial(mirror, commits[middle], shared, patch.path) is not git.Step.CONFLICT:
            good = middle
        else:
            bad = middle
    info = git.commit_info(mirror, commits[bad])
    return Culprit(sha=info.sha, subject=info.subject, author=info.author, date=info.date, trials=trials,
                   commits=len(commits))


def _commit(ws: Workspace, ui: UI, state: RebaseState) -> RebaseResult:
    """Every stack moved: write kpatch.toml, patches/ and the rerere cache in one journaled step."""
    series = load_all_series(ws.stack)
    txn = Transaction(_journal(ws))
    for upstream in ws.stack.upstreams:
        stack = state.stacks[upstream.name]
        dropped = dict(series[upstream.name].dropped)
        for result in stack.patches:
            if result.klass is PatchClass.UPSTREAM:
                dropped[result.name] = f"upstream ({result.why}; commit {result.commit or 'unknown'})"
        files, series_text = render(Path(stack.scratch), stack.new_base, series[upstream.name], dropped)
        for path, data in files.items():
            txn.write(path, data)
        txn.write(upstream.patches / "series", series_text)
        for patch in series[upstream.name].patches:
            if patch.path not in files:
                txn.delete(patch.path)
        _save_rerere(ws, upstream.name, txn)
    txn.write(ws.stack.path, config.with_new_bases(ws.stack.path, {n: s.new_base for n, s in state.stacks.items()}))
    changed = txn.commit()
    ui.note(f"rebase committed: {changed} file(s) in kpatch.toml and patches/")
    return _finish(ws, ui, state)


def _finish(ws: Workspace, ui: UI, state: RebaseState) -> RebaseResult:
    """Move the user's clean worktrees to the rebased commits, drop the scratch ones and the state."""
    apply_state = ApplyState()
    for name, stack in state.stacks.items():
        scratch, tree, mirror = Path(stack.scratch), ws.worktree(name), ws.mirror(name)
        head = git.head(scratch) if scratch.exists() else stack.new_base
        if tree.exists() and (git.dirty_files(tree) or git.operation_in_progress(tree)):
            ui.warn(f"worktree {tree} has local changes: left as it is; run 'kpatch apply' when ready")
        elif tree.exists():
            git.checkout(tree, head)
        else:
            git.add_worktree(mirror, tree, head)
        apply_state.upstreams[name] = UpstreamState(base=stack.new_base, previous_head=None, outcome=Outcome.APPLIED,
                                                    patches=[], applied=0)
        if scratch.exists():
            git.remove_worktree(mirror, scratch)
    ws.write_state(apply_state)
    shutil.rmtree(ws.workdir / ".rebase", ignore_errors=True)
    _state_file(ws).unlink(missing_ok=True)
    return _result(state, committed=True)


def _load_rerere(ws: Workspace, name: str, rr_cache: Path) -> None:
    """Recorded resolutions kept in the repo (patches/.rerere/<name>) -> the mirror's rr-cache."""
    kept = ws.stack.root / "patches" / RERERE / name
    if kept.is_dir():
        shutil.copytree(kept, rr_cache, dirs_exist_ok=True)


def _save_rerere(ws: Workspace, name: str, txn: Transaction) -> None:
    """Resolutions with a postimage -> patches/.rerere/<name>, so they travel with the stacks."""
    rr_cache = ws.mirror(name) / "rr-cache"
    if not rr_cache.is_dir():
        return
    kept = ws.stack.root / "patches" / RERERE / name
    for entry in rr_cache.iterdir():
        if (entry / "postimage").is_file():
            for part in ("preimage", "postimage"):
                if (entry / part).is_file():
                    txn.write(kept / entry.name / part, (entry / part).read_bytes())


def _refuse_if_busy(ws: Workspace) -> None:
    if _state_file(ws).exists() or _journal(ws).exists():
        raise WorktreeError("a rebase is in progress (or was interrupted): run 'kpatch rebase --continue' "
                            "or 'kpatch rebase --abort'")
    state = ws.read_state()
    if state is not None and state.in_progress:
        raise WorktreeError("an apply is stopped at a conflict: finish it ('kpatch apply --continue') or "
                            "abort it ('kpatch apply --abort') first")


def _require_state(ws: Workspace) -> RebaseState:
    state = rebase_state.read(_state_file(ws))
    if state is None:
        raise WorktreeError(f"nothing to continue or abort: no rebase in progress in {ws.workdir}")
    return state


def _result(state: RebaseState, *, committed: bool) -> RebaseResult:
    return RebaseResult(stacks=tuple(state.stacks.values()), github=state.github, committed=committed)


def _state_file(ws: Workspace) -> Path:
    return ws.rebase_state_file


def _journal(ws: Workspace) -> Path:
    return ws.rebase_journal

