"""status: per upstream its pin, mirror and worktree, and the state of every patch. Reads only.

A patch counts as applied only when the worktree commit has the very diff the file has, CRs and all
(`git patch-id --verbatim`): a patch whose CRs were stripped on the way in is not "applied".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from kpatch.config import Upstream
from kpatch.engine.plan import Item, resolve_items
from kpatch.gitx import Repository, commit_patch_ids, file_patch_ids
from kpatch.output.ui import UI
from kpatch.project.state import Kind, Phase, RunState, StackPhase, StackRun
from kpatch.project.workspace import Workspace


class PatchState(Enum):
    APPLIED = "applied"
    MODIFIED = "modified"  # in the worktree, but the commit differs from the file: run `kpatch export`
    NOT_APPLIED = "not applied"
    CONFLICT = "conflict"


@dataclass(frozen=True)
class PatchStatus:
    """One patch at rest in a worktree (`kpatch status`): whether it is applied, its Upstream-Status and PRs. No
    class and no culprit: nothing was tried against a new base (that is `engine.reports.PatchReport`)."""

    name: str
    subject: str
    upstream_status: str | None
    prs: tuple[str, ...]  # its Upstream-PR trailers
    requires: tuple[str, ...]
    state: PatchState


@dataclass(frozen=True)
class UpstreamReport:
    name: str = field(metadata={"json": "upstream"})
    url: str
    branch: str
    base: str
    base_commit: str | None
    mirror_head: str | None
    behind: int | None
    worktree: Path
    head: str | None
    unexported: int  # worktree commits that match no patch file
    patches: tuple[PatchStatus, ...]
    # Where the worktree is when it is not on the base (a rebase that left it as it was, a checkout by hand): the
    # commit it forked from the base's line at (the old base); its patches then count as not applied. None: on it.
    worktree_base: str | None = None
    modified_files: int = 0  # tracked files with uncommitted changes in the worktree


@dataclass(frozen=True)
class StatusResult:
    upstreams: tuple[UpstreamReport, ...]
    operation: str | None  # "apply" or "rebase" when one is in progress
    journal: str | None  # the command whose journaled write was interrupted, if any
    pr_states: dict[str, str] | None = None  # --prs: each Upstream-PR's state as GitHub answered (`merged`,
    # `closed unmerged`, `open`/`draft` with the review decision and checks: `open, approved, checks green`); None:
    # not asked
    pr_states_unavailable: str | None = None  # --prs: why the forge could not be asked


def status(ws: Workspace, ui: UI, *, pulls: bool = False) -> StatusResult:
    """Every upstream and patch; `pulls`: also each Upstream-PR's state, in one batched query to the forge."""
    result = _status(ws, ui)
    if not pulls:
        return result
    # imported where used: the forge only for status --prs: status --json starts without it
    from kpatch.forge.hosts import check_pulls

    wanted = {pr for report in result.upstreams for patch in report.patches for pr in patch.prs}
    check = check_pulls(wanted)
    states = {pr: check.pulls[pr].summary if pr in check.pulls else "not found" if check.unavailable is None
              else "?" for pr in sorted(wanted)}
    return StatusResult(upstreams=result.upstreams, operation=result.operation, journal=result.journal,
                        pr_states=states, pr_states_unavailable=check.unavailable)


def _status(ws: Workspace, ui: UI) -> StatusResult:
    run = ws.read_state()
    pending = ws.pending_journal()
    if pending:  # patches/ may be half-written (a series naming a file not there yet): not read until resumed
        reports = tuple(_unread(ws, upstream, run) for upstream in ws.stack.upstreams)
    else:
        reports = tuple(_report(item, run) for item in resolve_items(ws, ui, {}, fetch_missing=False, run=run))
    return StatusResult(upstreams=reports, operation=run.operation.kind.value if run.operation else None,
                        journal=pending)


def _unread(ws: Workspace, upstream: Upstream, run: RunState) -> UpstreamReport:
    """An upstream's pins, mirror and worktree, without its patches (while an interrupted write is pending)."""
    mirror, worktree = ws.mirror(upstream.name), ws.worktree(upstream.name)
    settled = run.settled.get(upstream.name)
    base = settled.base if settled else mirror.resolve(upstream.base) if mirror.exists else None
    mirror_head = mirror.resolve(upstream.branch) if mirror.exists else None
    return UpstreamReport(name=upstream.name, url=upstream.display_url, branch=upstream.branch, base=upstream.base,
                          base_commit=base, mirror_head=mirror_head,
                          behind=mirror.count(base, mirror_head) if base and mirror_head else None,
                          worktree=worktree, head=Repository(worktree).head() if worktree.exists() else None,
                          unexported=0, patches=())


def _report(item: Item, run: RunState) -> UpstreamReport:
    upstream, name = item.upstream, item.upstream.name
    op = run.operation
    stack = op.stacks.get(name) if op is not None and op.kind is Kind.APPLY else None
    base = stack.base if stack else run.settled[name].base if name in run.settled else item.base
    mirror_head = item.mirror.resolve(upstream.branch) if item.mirror.exists else None  # one cat-file
    behind = item.mirror.count(base, mirror_head) if base and mirror_head else None
    tree = Repository(item.worktree)
    head = tree.head() if item.worktree.exists() else None
    elsewhere = _elsewhere(tree, base, head) if stack is None else None
    states, unexported = _patch_states(item, tree, base, stack) if elsewhere is None else \
        ([PatchState.NOT_APPLIED] * len(item.series.patches), 0)
    patches = tuple(
        PatchStatus(name=p.name, subject=p.subject, upstream_status=p.status.value if p.status else None,
                    prs=p.prs, requires=tuple(str(r) for r in p.requires), state=s)
        for p, s in zip(item.series.patches, states, strict=True)
    )
    return UpstreamReport(name=name, url=upstream.display_url, branch=upstream.branch, base=upstream.base,
                          base_commit=base, mirror_head=mirror_head, behind=behind, worktree=item.worktree,
                          head=head, unexported=unexported, patches=patches, worktree_base=elsewhere,
                          modified_files=len(tree.dirty()) if head is not None else 0)


def _elsewhere(tree: Repository, base: str | None, head: str | None) -> str | None:
    """The commit the worktree's line leaves the base's at, when HEAD does not descend from the base (what is on
    disk, not what the run state says: a rebase leaves a worktree with local changes at the old base)."""
    if base is None or head is None or tree.is_ancestor(base, head):
        return None
    found = tree.run(["merge-base", "--end-of-options", base, head], check=False)
    return found.text.strip() if found.status == 0 and found.text.strip() else head


def _patch_states(item: Item, tree: Repository, base: str | None,
                  stack: StackRun | None) -> tuple[list[PatchState], int]:
    patches = item.series.patches
    if stack is not None and stack.phase is not StackPhase.DONE:
        phase = {p.name: p.phase for p in stack.patches}
        by_phase = {Phase.APPLIED: PatchState.APPLIED, Phase.UPSTREAM: PatchState.APPLIED,
                    Phase.CONFLICT: PatchState.CONFLICT}
        return [by_phase.get(phase.get(p.name, Phase.PENDING), PatchState.NOT_APPLIED) for p in patches], 0
    if base is None or not item.worktree.exists():
        return [PatchState.NOT_APPLIED] * len(patches), 0
    subjects: dict[str, str] = {}
    in_tree = set(commit_patch_ids(tree, base, "HEAD", verbatim=True, subjects=subjects).values())
    subjects_in_tree = set(subjects.values())
    ids = file_patch_ids(tree, [p.path for p in patches], verbatim=True) if patches else []
    states = []
    for patch, pid in zip(patches, ids, strict=True):
        if pid in in_tree:
            states.append(PatchState.APPLIED)
        elif patch.subject in subjects_in_tree:
            states.append(PatchState.MODIFIED)
        else:
            states.append(PatchState.NOT_APPLIED)
    return states, len(in_tree - set(ids))
