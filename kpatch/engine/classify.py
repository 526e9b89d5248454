"""Rebase classification: which patches are already upstream, what the ones a conflict holds back would do,
and which upstream commit broke a patch."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from kpatch.forge.model import PullCheck
from kpatch.gitx import SHA_RE, Mirror, Trial, TrialIndex, commit_patch_ids, file_patch_ids, trial
from kpatch.project.state import Culprit, Evidence, PatchClass, PatchRun, Phase, Prediction, StackRun
from kpatch.stack import Patch


def patch_class(run: PatchRun) -> PatchClass:
    """A patch's class: its settled phase, how it applied, else what a trial apply predicted."""
    if run.phase in (Phase.UPSTREAM, Phase.CONFLICT):
        return PatchClass(run.phase.value)
    if run.phase is Phase.APPLIED and run.how:
        return PatchClass(run.how.value)
    return PatchClass(run.predicted.value) if run.predicted else PatchClass.NOT_TRIED


_PREDICTION = {Trial.CLEAN: Prediction.CLEAN, Trial.THREE_WAY: Prediction.THREE_WAY,
               Trial.EMPTY: Prediction.UPSTREAM, Trial.CONFLICT: Prediction.CONFLICT}


def mark_merged(mirror: Mirror, patches: Sequence[Patch], stack: StackRun, pulls: PullCheck) -> None:
    """Mark UPSTREAM what is already in the new base: (a) an upstream commit in old..new that touches the
    patch's paths has the same stable patch-id; (c) its Upstream-PR is merged as a commit of the new base."""
    assert stack.old_base is not None
    paths = sorted({path for p in patches for path in p.paths})
    carriers: dict[str, str] = {}
    subjects: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kpatch-patch-ids") as pool:
        # the patch files' ids (their own git patch-id) beside the walk of the upstream's commits
        hashing = pool.submit(file_patch_ids, mirror, [p.path for p in patches]) if patches else None
        for sha, upstream_id in commit_patch_ids(mirror, stack.old_base, stack.base, paths,
                                                 subjects=subjects).items():
            carriers.setdefault(upstream_id, sha)
        moving = sorted({path for p in patches if p.renamed for path in p.paths})
        if moving:  # a rename's patch-id differs without rename detection (the walk above has none: see its docstring)
            for sha, upstream_id in commit_patch_ids(mirror, stack.old_base, stack.base, moving, subjects=subjects,
                                                     renames=True).items():
                carriers.setdefault(upstream_id, sha)
        ids = hashing.result() if hashing is not None else []
    for patch, run, file_id in zip(patches, stack.patches, ids, strict=True):
        carrier = carriers.get(file_id) if file_id else None
        if carrier:
            run.phase, run.evidence, run.commit = Phase.UPSTREAM, Evidence.PATCH_ID, carrier
            run.detail = subjects.get(carrier) or mirror.commit_info(carrier).subject
            continue
        for pr in patch.prs:
            pull = pulls.pulls.get(pr)
            merged = pull.merge_commit if pull and pull.merged else None
            # GitHub's answer is checked, not trusted: a full SHA, here, and inside the new base.
            if merged and SHA_RE.match(merged) and mirror.has_commit(merged) and \
                    mirror.is_ancestor(merged, stack.base):
                run.phase, run.evidence, run.commit, run.detail = Phase.UPSTREAM, Evidence.PR_MERGED, merged, pr
                break


def predict(mirror: Mirror, stack: StackRun, patches: Sequence[Patch], start: int) -> None:
    """Trial applies on a throwaway index for the pending patches from `start` on, with the applied ones (and
    the ones predicted to apply) first: a maintainer sees every conflict of the rebase at once."""
    by_name = {p.name: p for p in patches}
    kept = [by_name[r.name] for r in stack.patches if r.phase is Phase.APPLIED]
    with TrialIndex(mirror, stack.base) as index:
        applies = index.keep([k.path for k in kept])
        for run in stack.patches[start:]:
            if run.settled:
                continue
            patch = by_name[run.name]
            outcome = index.next(patch.path) if applies else Trial.CONFLICT
            run.predicted, run.hunks, run.culprit = _PREDICTION[outcome], [], None
            if outcome is Trial.EMPTY:
                run.evidence = Evidence.EMPTY
                run.commit = mirror.last_commit_touching(stack.old_base or stack.base, stack.base, patch.paths)
            elif outcome is Trial.CONFLICT:
                run.culprit = bisect(mirror, stack, kept, patch)
            else:
                kept.append(patch)


def bisect(mirror: Mirror, stack: StackRun, kept: Sequence[Patch], patch: Patch) -> Culprit | None:
    """The first upstream commit (first-parent line) after which the patch no longer applies: O(log n) trials.

    Only the earlier patches that touch the same files go first: the others cannot change the answer, and
    one resolved by hand would, as its original file, stop applying at its own culprit and hide this one's.
    """
    assert stack.old_base is not None
    commits = mirror.first_parent_range(stack.old_base, stack.base)
    good, bad, trials = -1, len(commits) - 1, 0
    if bad < 0:
        return None
    shared = [k.path for k in kept if set(k.paths) & set(patch.paths)]
    while bad - good > 1:
        middle = (good + bad) // 2
        trials += 1
        if trial(mirror, commits[middle], shared, patch.path) is not Trial.CONFLICT:
            good = middle
        else:
            bad = middle
    info = mirror.commit_info(commits[bad])
    return Culprit(sha=info.sha, subject=info.subject, author=info.author, date=info.date, trials=trials,
                   commits=len(commits))


def why(run: PatchRun, now_upstream: Sequence[str]) -> str:
    """The reason shown to people, made from the structured fields."""
    if run.phase is Phase.UPSTREAM:
        if run.evidence is Evidence.PATCH_ID:
            return f'same patch-id as upstream {(run.commit or "")[:12]} "{run.detail}"'
        if run.evidence is Evidence.PR_MERGED:
            return f"{run.detail} is merged upstream as {(run.commit or '')[:12]}"
        return "empty after a 3-way apply: its change is already upstream"
    if run.phase is Phase.APPLIED:
        notes = {None: [], "recorded": ["conflict resolved by a recorded resolution"],
                 "by hand": ["resolved by hand (recorded for the next rebase)"]}[
            run.resolved.value if run.resolved else None]
        return "; ".join([*notes, *(f"requires {ref}, which is now upstream" for ref in now_upstream)])
    if run.phase is Phase.PENDING and run.predicted is not None:
        if run.predicted is Prediction.CONFLICT:
            return "trial apply"
        if run.predicted is Prediction.UPSTREAM:
            return "trial apply: empty, its change is already upstream"
        return "trial apply: applied for real once the conflict before it is resolved"
    return ""
