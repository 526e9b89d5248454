"""The rebase's fast path: pick the stack's commits onto the new base in one process instead of `git am`.

It is taken only when the run state says which commits hold exactly the patch files (`Settled.stack_hash`, set
by apply, rebase and export) and the stack is starting afresh. Each pick is then classed as `git am -3` would
class its file, or the picks stop there and `git am` takes over from that patch (conflicts, culprits,
`--continue` and recovery are am's, as without the fast path):

- a pick that became empty: UPSTREAM (am: "No changes -- Patch already applied");
- every file the patch touches is the same blob before the pick as before the original commit: CLEAN (the file
  applies to the same text);
- the pick's diff has the file's verbatim patch-id: CLEAN (the file's hunks, context and all, are in the tree);
- otherwise `git apply --check` of the file decides: it fails, so am would merge: THREE_WAY; it applies (am would
  not merge, and its result may differ from the pick's), so am takes over from that patch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

from kpatch.gitx import SHA_RE, Mirror, Repository, file_patch_ids, patch_ids_of
from kpatch.gitx.mirror import sparse_covers
from kpatch.gitx.patches import prefetch_patches
from kpatch.gitx.picks import applies_each, pick
from kpatch.gitx.rangediff import prefetch_range_diff
from kpatch.gitx.treepicks import pick as pick_without_worktree
from kpatch.project.state import Evidence, How, PatchRun, Phase, Settled, StackRun
from kpatch.stack import Patch, Series

log = logging.getLogger("kpatch.rebase")


def originals(repo: Repository, head: str, stack: StackRun, series: Series,
              settled: Settled | None) -> list[str] | None:
    """The commit of each patch (series order) when the fast path may pick them onto `head`, else None."""
    if settled is None or settled.stack_hash is None or settled.base != stack.old_base or not series.patches:
        return None
    if any(p.phase not in (Phase.UPSTREAM, Phase.IN_FLIGHT) for p in stack.patches) or head != stack.base:
        return None  # not a fresh start: what am or a person already did stays am's
    if settled.stack_hash != series.stack_hash() or not repo.has_commit(settled.head):
        return None
    commits = repo.commits(settled.base, settled.head)
    if len(commits) != len(series.patches):
        return None
    return commits


def run(mirror: Mirror, tree: Repository | None, stack: StackRun, patches: Sequence[Patch], commits: Sequence[str],
        on_progress: Callable[[int], None]) -> tuple[list[PatchRun], str] | None:
    """Pick the in-flight patches' commits onto the new base and class them: in the scratch worktree `tree` with
    `git rebase`, or with no worktree at all (`tree` None; gitx/treepicks.py). Returns the patches left for
    `git am` (in order) and the commit it goes on from; None when the picks without a worktree cannot be made
    (the caller makes the scratch worktree and picks there)."""
    todo = [(i, r) for i, r in enumerate(stack.patches) if r.phase is Phase.IN_FLIGHT]
    wanted = [commits[i] for i, _ in todo]
    repo: Repository = mirror if tree is None else tree
    if tree is None and _attributes_on_disk(patches):
        return None
    if tree is None:
        went = pick_without_worktree(mirror, stack.base, wanted, on_progress)
    else:
        went = pick(tree, wanted, on_progress)
    if went is None:
        return None if tree is None else ([r for _, r in todo], tree.head())
    on_progress(len(went.picked))
    parents: list[str] = []  # the commit each pick went onto
    head = stack.base
    for new in went.picked:
        parents.append(head)
        head = new or head
    if not went.stopped:  # what the stack writer and the review will read, made while the picks are classed
        prefetch_patches(repo, stack.base, head)
        if stack.old_base is not None and head != stack.base:  # the review's two sides: as known_side makes the old
            prefetch_range_diff(repo, f"{stack.old_base}..{commits[-1]}", f"{stack.base}..{head}")
    hows = _classes(repo, [(patches[i], commits[i], parent, new)
                           for (i, _), parent, new in zip(todo, parents, went.picked, strict=False)])
    left = len(hows) if went.stopped else None
    if None in hows:
        left = hows.index(None)
        head = parents[left]
        if tree is not None:
            tree.reset_hard(head)
        log.info("fast path: %s applies without a 3-way merge but its pick differs; git am goes on from there",
                 todo[left][1].name)
    done = hows if left is None else hows[:left]
    for (i, patch_run), how, new in zip(todo, done, went.picked, strict=False):
        if new is None:  # the pick became empty
            assert stack.old_base is not None
            patch_run.phase, patch_run.evidence = Phase.UPSTREAM, Evidence.EMPTY
            patch_run.commit = mirror.last_commit_touching(stack.old_base, stack.base, patches[i].paths)
        else:
            patch_run.phase, patch_run.how = Phase.APPLIED, how
    log.info("fast path: %d of %d patch(es) picked%s", len(done), len(todo),
             "" if left is None else f"; git am from {todo[left][1].name}")
    return [r for _, r in todo[len(done):]], head


def _attributes_on_disk(patches: Sequence[Patch]) -> bool:
    """Whether the scratch worktree would have a .gitattributes file on disk: one a patch touches, or any of a whole
    checkout (a path no sparse pattern names). git's merges there (`git rebase`, `git am -3`) and its format-patch
    read those attributes (`binary`, `merge=union`, `diff=...`); in the bare mirror git reads none, so the picks
    without a worktree would merge, and the stack be written, otherwise."""
    paths = sorted({path for patch in patches for path in patch.paths})
    return not sparse_covers(paths) or any(PurePosixPath(path).name == ".gitattributes" for path in paths)


def _classes(tree: Repository, picks: Sequence[tuple[Patch, str, str, str | None]]) -> list[How | None]:
    """How am would have taken each pick's file (see the module's docstring); None: only am can tell."""
    hows: list[How | None] = [How.CLEAN] * len(picks)
    lines = [f"{commit}^:{path}\n{parent}:{path}\n" for patch, commit, parent, new in picks if new
             for path in patch.paths]
    if any(line.count("\n") != 2 for line in lines):
        return [None] * len(picks)  # a path git cannot read on one line: let am decide
    answers = tree.run(["cat-file", "--batch-check=%(objectname)"], stdin="".join(lines).encode()).text.splitlines()
    blobs = iter(a if SHA_RE.match(a) else "missing" for a in answers)  # "<name> missing" names the asked path
    moved = []
    for index, (patch, _, _, new) in enumerate(picks):
        if not new:
            continue
        pairs = [(next(blobs), next(blobs)) for _ in patch.paths]  # every pair read: the answers stay in step
        if any(before != now for before, now in pairs):
            moved.append(index)
    if not moved:
        return hows
    file_ids = file_patch_ids(tree, [picks[i][0].path for i in moved], verbatim=True)
    pick_ids = patch_ids_of(tree, [picks[i][3] or "" for i in moved], verbatim=True)
    doubtful = [index for index, file_id in zip(moved, file_ids, strict=True)
                if file_id is None or pick_ids.get(picks[index][3] or "") != file_id]
    checks = applies_each(tree, [(picks[i][2], picks[i][0].path, picks[i][0].paths) for i in doubtful])
    for index, applied in zip(doubtful, checks, strict=True):
        hows[index] = None if applied else How.THREE_WAY
    return hows
