"""`kpatch status`: per upstream its pin, mirror, worktree and the state of every patch. Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from kpatch import git
from kpatch.plan import Item, resolve_items
from kpatch.ui import UI
from kpatch.workspace import Outcome, UpstreamState, Workspace


class PatchState(Enum):
    APPLIED = "applied"
    MODIFIED = "modified"  # in the worktree, but the commit differs from the file: run `kpatch export`
    NOT_APPLIED = "not applied"
    CONFLICT = "conflict"


@dataclass(frozen=True)
class PatchStatus:
    name: str
    subject: str
    upstream_status: str | None
    upstream_prs: tuple[str, ...]
    requires: tuple[str, ...]
    state: PatchState


@dataclass(frozen=True)
class UpstreamReport:
    name: str
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


def status(ws: Workspace, ui: UI) -> tuple[UpstreamReport, ...]:
    state = ws.read_state()
    entries = state.upstreams if state else {}
    return tuple(_report(item, entries.get(item.upstream.name)) for item in resolve_items(ws, ui, {}, fetch=False))


def _report(item: Item, entry: UpstreamState | None) -> UpstreamReport:
    upstream = item.upstream
    base = entry.base if entry else item.base
    mirror_head = git.resolve(item.mirror, upstream.branch) if (item.mirror / "HEAD").exists() else None
    behind = git.count_commits(item.mirror, base, mirror_head) if base and mirror_head else None
    head = git.head(item.worktree) if item.worktree.exists() else None
    states, unexported = _patch_states(item, base, entry)
    patches = tuple(
        PatchStatus(name=p.name, subject=p.subject, upstream_status=p.status.value if p.status else None,
                    upstream_prs=p.prs, requires=tuple(str(r) for r in p.requires), state=s)
        for p, s in zip(item.series.patches, states, strict=True)
    )
    return UpstreamReport(name=upstream.name, url=upstream.url, branch=upstream.branch, base=upstream.base,
                          base_commit=base, mirror_head=mirror_head, behind=behind, worktree=item.worktree,
                          head=head, unexported=unexported, patches=patches)


def _patch_states(item: Item, base: str | None, entry: UpstreamState | None) -> tuple[list[PatchState], int]:
    patches = item.series.patches
    if entry is not None and entry.outcome is Outcome.CONFLICT:
        return [PatchState.APPLIED if i < entry.applied else PatchState.CONFLICT if i == entry.applied
                else PatchState.NOT_APPLIED for i in range(len(patches))], 0
    if base is None or not item.worktree.exists():
        return [PatchState.NOT_APPLIED] * len(patches), 0
    in_tree = set(git.commit_patch_ids(item.worktree, base, "HEAD").values())
    subjects = set(git.out(["log", "--format=%s", f"{base}..HEAD"], item.worktree).splitlines())
    ids = git.file_patch_ids(item.worktree, [p.path for p in patches])
    states = []
    for patch, pid in zip(patches, ids, strict=True):
        if pid in in_tree:
            states.append(PatchState.APPLIED)
        elif patch.subject in subjects:
            states.append(PatchState.MODIFIED)
        else:
            states.append(PatchState.NOT_APPLIED)
    unexported = len(in_tree - set(ids))
    return states, unexported
