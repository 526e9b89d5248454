"""What a rebase, or any two versions of a stack, did to each patch: `git range-diff` pairs the old and the new
commits, and each patch is `unchanged` (only offsets or context moved), `changed` (its own lines or its message
differ: the interdiff as range-diff shows it), `dropped` or `new`.

Both sides are commits: the rebase's own for its new side, else commits one `git am` makes of the patch files in a
throwaway worktree of the mirror (gitx/rangediff.py). Nothing here writes a person's worktree or any ref.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from kpatch import scratch
from kpatch.engine.evidence import UpstreamCommit as UpstreamCommit  # named here before: kept for readers
from kpatch.engine.evidence import behind
from kpatch.engine.evidence import forge_url as forge_url
from kpatch.errors import KpatchError, SeriesError, UpstreamError, UsageError

if TYPE_CHECKING:  # the records above are read by the nightly's report too: it must not load the machinery
    from concurrent.futures import Future

    from kpatch.config import Upstream
    from kpatch.gitx import Mirror, Repository
    from kpatch.output.ui import UI
    from kpatch.project.workspace import Workspace
    from kpatch.stack import Series


class Change(StrEnum):
    UNCHANGED = "unchanged"  # the same diff and message; offsets or context may have moved
    CHANGED = "changed"  # its own lines or its message differ
    DROPPED = "dropped"
    NEW = "new"


@dataclass(frozen=True)
class PatchChange:
    """One patch in a range-diff of two versions of a stack (`kpatch diff`, a rebase's review): what changed
    between them. Not `engine.reports.PatchReport`: a pair of sides, dropped and new patches included, with no
    class (the patch may never have been rebased: two commits of kpatch.toml, two folders)."""

    name: str  # the patch's name now (its old name when dropped)
    change: Change
    old_commit: str | None
    new_commit: str | None
    interdiff: str  # range-diff's lines for this patch: its pair line and, when the diffs differ, the interdiff
    old_name: str | None = None  # when the pair's names differ (the old side's)
    subject: str = ""
    # for a rebase's changed or three-way patch: the upstream commits in old base..new base that touched its lines
    upstream_commits: tuple[UpstreamCommit, ...] = ()


@dataclass(frozen=True)
class StackDiff:
    upstream: str
    old_base: str | None  # None: the stack is new
    new_base: str | None  # None: the stack is gone
    patches: tuple[PatchChange, ...]  # in range-diff's order (the new stack's, dropped ones where they were)
    range_diff: str  # git range-diff --no-color OLD_RANGE NEW_RANGE in the upstream's mirror ("" if a side is empty)
    old_range: str | None  # START..TIP: START is the base, or a stand-in for it that holds only the stack's files
    new_range: str | None

    def count(self, change: Change) -> int:
        return sum(p.change is change for p in self.patches)


@dataclass(frozen=True)
class Side:
    """One version of a stack: its base, where its range starts (the base, or a stand-in for it), and its patches'
    names and commits, in order."""

    base: str
    start: str
    names: tuple[str, ...]
    commits: tuple[str, ...]

    @property
    def range(self) -> str | None:
        return f"{self.start}..{self.commits[-1]}" if self.commits else None


# `1:  1097ce8 ! 1:  3d01816 Fix c`, `-:  ------- > 2:  42400ed Fix d`
_PAIR = re.compile(r"^\s*(-|\d+):\s+(-+|[0-9a-f]+) ([=!<>]) \s*(-|\d+):\s+(-+|[0-9a-f]+) (.*)$")


# Sides made ahead of need (prefetch_side: a rebase makes its old side while git picks the stack), by repository,
# base and the patch files as they were then; the latest few only.
_AHEAD: dict[tuple[Path, str, tuple[tuple[Path, int, int], ...]], Future[list[str]]] = {}
_AHEAD_MAX = 4


def _files(series: Series) -> tuple[tuple[Path, int, int], ...]:
    """The stack's patch files with their sizes and modification times: a side made ahead is taken only for the
    very files it was made from."""
    stats = [(p.path, p.path.stat()) for p in series.patches]
    return tuple((path, stat.st_size, stat.st_mtime_ns) for path, stat in stats)


def prefetch_side(repo: Mirror, base: str, series: Series) -> None:
    """Start making what `side_from_files(repo, base, series, ...)` makes, in a thread of its own (its `git am`
    runs in a throwaway worktree of its own): a later call for the same files takes its result."""
    # imported where used: threads, tar and range-diff only on the paths that use them (rebase imports diff)
    from concurrent.futures import ThreadPoolExecutor

    from kpatch.gitx.rangediff import commits_from_patches

    while len(_AHEAD) >= _AHEAD_MAX:
        del _AHEAD[next(iter(_AHEAD))]
    paths = sorted({p for patch in series.patches for p in patch.paths})
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kpatch-side")  # joined at exit, not before
    _AHEAD[(repo.common_dir, base, _files(series))] = pool.submit(
        commits_from_patches, repo, base, [p.path for p in series.patches], paths)
    pool.shutdown(wait=False)


def known_side(repo: Mirror, base: str, series: Series, commits: Sequence[str]) -> None:
    """What `side_from_files(repo, base, series, ...)` would make, known already: `commits` on `base` hold exactly
    the patch files, one each, as `git am` takes them (Settled.stack_hash, which the rebase's fast path picks
    from), so no `git am` of the files is run again."""
    from concurrent.futures import Future

    while len(_AHEAD) >= _AHEAD_MAX:
        del _AHEAD[next(iter(_AHEAD))]
    known: Future[list[str]] = Future()
    known.set_result([base, *commits])
    _AHEAD[(repo.common_dir, base, _files(series))] = known


def side_from_files(repo: Mirror, base: str, series: Series, where: str) -> Side:
    """The stack's commits made from its patch files on `base` (`where` names the version in an error)."""
    from kpatch.gitx.rangediff import NotApplied, commits_from_patches

    paths = sorted({p for patch in series.patches for p in patch.paths})
    ahead = _AHEAD.pop((repo.common_dir, base, _files(series)), None) if _AHEAD else None
    if ahead is not None and not isinstance(ahead.exception(), (NotApplied, type(None))):
        ahead = None  # it failed otherwise (the disk, a signal): made again here, where a failure is raised
    try:
        start, *commits = ahead.result() if ahead is not None else \
            commits_from_patches(repo, base, [p.path for p in series.patches], paths)
    except NotApplied as failed:
        raise SeriesError(f"{series.upstream}: patch {failed.path.name} ({where}) does not apply onto its base "
                          f"{base[:12]}: run 'kpatch apply' there to see why") from None
    return Side(base=base, start=start, names=series.names(), commits=tuple(commits))


def compare(repo: Repository, upstream: str, old: Side | None, new: Side | None) -> StackDiff:
    """Each patch's change from `old` to `new` (None: that side has no stack), with range-diff's text."""
    from kpatch.gitx.rangediff import own_changes, range_diff

    olds = list(zip(old.names, old.commits, strict=True)) if old else []
    news = list(zip(new.names, new.commits, strict=True)) if new else []
    if not olds or not news:  # range-diff needs two ranges with commits: everything is new or dropped
        patches = [PatchChange(name=n, change=Change.DROPPED, old_commit=c, new_commit=None, interdiff="")
                   for n, c in olds]
        patches += [PatchChange(name=n, change=Change.NEW, old_commit=None, new_commit=c, interdiff="")
                    for n, c in news]
        return StackDiff(upstream=upstream, old_base=old.base if old else None, new_base=new.base if new else None,
                         patches=tuple(patches), range_diff="", old_range=old.range if old else None,
                         new_range=new.range if new else None)
    assert old is not None and new is not None and old.range and new.range
    text = range_diff(repo, old.range, new.range)
    blocks = _blocks(text)
    same = own_changes(repo, [c for b in blocks if b[2] == "!" for c in (olds[b[0]][1], news[b[1]][1])])
    patches = []
    for left, right, mark, subject, lines in blocks:
        interdiff = "".join(lines)
        if mark == "<":
            patches.append(PatchChange(name=olds[left][0], change=Change.DROPPED, old_commit=olds[left][1],
                                       new_commit=None, interdiff=interdiff, subject=subject))
        elif mark == ">":
            patches.append(PatchChange(name=news[right][0], change=Change.NEW, old_commit=None,
                                       new_commit=news[right][1], interdiff=interdiff, subject=subject))
        else:
            (old_name, old_commit), (name, new_commit) = olds[left], news[right]
            moved = mark == "=" or same[old_commit] == same[new_commit]
            patches.append(PatchChange(name=name, change=Change.UNCHANGED if moved else Change.CHANGED,
                                       old_commit=old_commit, new_commit=new_commit, interdiff=interdiff,
                                       old_name=old_name if old_name != name else None, subject=subject))
    return StackDiff(upstream=upstream, old_base=old.base, new_base=new.base, patches=tuple(_rejoin(patches)),
                     range_diff=text, old_range=old.range, new_range=new.range)


def _blocks(text: str) -> list[tuple[int, int, str, str, list[str]]]:
    """range-diff's output as (old index, new index, mark, subject, its lines), one per pair line."""
    blocks: list[tuple[int, int, str, str, list[str]]] = []
    for line in text.splitlines(keepends=True):
        match = _PAIR.match(line.rstrip("\n"))
        if match and not line.startswith("    "):
            left, _, mark, right, _, subject = match.groups()
            blocks.append((int(left) - 1 if left != "-" else -1, int(right) - 1 if right != "-" else -1, mark,
                           subject, [line]))
        elif blocks:
            blocks[-1][4].append(line)
    return blocks


def _rejoin(patches: Sequence[PatchChange]) -> list[PatchChange]:
    """A patch range-diff could not pair with itself (rewritten too much) shows as dropped and new under one
    name: it is one changed patch, at its new place."""
    dropped = {p.name: p for p in patches if p.change is Change.DROPPED}
    again = {p.name for p in patches if p.change is Change.NEW and p.name in dropped}
    out = []
    for p in patches:
        if p.change is Change.DROPPED and p.name in again:
            continue
        if p.change is Change.NEW and p.name in again:
            gone = dropped[p.name]
            p = PatchChange(name=p.name, change=Change.CHANGED, old_commit=gone.old_commit, new_commit=p.new_commit,
                            interdiff=gone.interdiff + p.interdiff, subject=p.subject)
        out.append(p)
    return out


def rebase_diff(repo: Mirror, upstream: str, old_base: str, series: Series, new_base: str, tip: str,
                kept: Sequence[str], merged: Sequence[str] = (), forge: str | None = None) -> StackDiff:
    """What a rebase did to one stack: `series` (its files before) on `old_base` against the rebased commits
    new_base..tip, which hold the patches `kept` (the ones not dropped), in order. A changed patch, or one of
    `merged` (three-way), gets the upstream commits of old_base..new_base that touched its lines (PR links on
    `forge`, an https://github.com/O/R)."""
    old = side_from_files(repo, old_base, series, "before the rebase")
    new = Side(base=new_base, start=new_base, names=tuple(kept), commits=tuple(repo.commits(new_base, tip)))
    if len(new.commits) != len(new.names):  # not one commit per kept patch: no pairing by place can be trusted
        raise SeriesError(f"{upstream}: the rebased stack has {len(new.commits)} commits for {len(new.names)} "
                          "patches")
    diff = compare(repo, upstream, old, new)
    wanted = {p.old_name or p.name for p in diff.patches
              if p.new_commit and (p.change is Change.CHANGED or p.name in merged)}
    return with_evidence(diff, behind(repo, old_base, new_base, series.patches, wanted, forge))


def with_evidence(diff: StackDiff, found: dict[str, tuple[UpstreamCommit, ...]]) -> StackDiff:
    """The review with each patch's upstream commits (by its old name: the one its file had on the old base)."""
    return replace(diff, patches=tuple(replace(p, upstream_commits=found.get(p.old_name or p.name, ()))
                                       for p in diff.patches))


@dataclass(frozen=True)
class DiffResult:
    revision: str  # the project commit the stacks are compared against (full SHA)
    given: str  # as it was given, or how it was chosen
    stacks: tuple[StackDiff, ...]


def diff(ws: Workspace, ui: UI, revision: str | None, only: str | None = None) -> DiffResult:
    """The range-diff of every stack (or `only` one) from the project at `revision` (default: the last commit that
    changed a patches folder) to the patch files now, both made from the patch files alone."""
    from kpatch.gitx import Repository
    from kpatch.gitx.checkout import in_git_checkout

    if only is not None and only not in {u.name for u in ws.stack.upstreams}:
        ws.stack.get(only)  # the one error for an unknown upstream
    project = Repository(ws.stack.root)
    if not in_git_checkout(ws.stack.root):
        raise UsageError(f"{ws.stack.root} is not in a git checkout: kpatch diff compares the patch files with a "
                         "commit of the project")
    top = Path(project.out(["rev-parse", "--show-toplevel"]))
    here = Repository(top)
    rel = {u.name: _relative(u.patches, top) for u in ws.stack.upstreams}
    given = revision or "the last commit that changed patches/"
    commit = here.out(["log", "-1", "--format=%H", "--", *rel.values()]) if revision is None else \
        here.resolve(revision)
    if not commit:
        raise UsageError(f"{revision!r} is not a commit of the project {top}" if revision else
                         f"no commit of {top} changed {', '.join(rel.values())}: name a revision")
    with scratch.folder("diff") as folder:
        before = _stacks_at(here, commit, _relative(ws.stack.path, top), folder, revision or commit[:12])
        stacks = []
        now = {u.name: u for u in ws.stack.upstreams}
        for name in [*now, *(n for n in before if n not in now)]:
            if only is not None and name != only:
                continue
            stacks.append(_stack_diff(ws, ui, name, before.get(name), now.get(name), revision or commit[:12]))
    return DiffResult(revision=commit, given=given, stacks=tuple(stacks))


def _stacks_at(repo: Repository, commit: str, toml: str, folder: Path, where: str) -> dict[str, tuple[Upstream,
                                                                                                      Series]]:
    """Each upstream's config and series as the project held them at `commit` (extracted into `folder`)."""
    from kpatch import config
    from kpatch.stack.series import load_series

    if repo.run(["cat-file", "-e", f"{commit}:{toml}"], check=False).status != 0:
        return {}  # no kpatch.toml there: every stack is new
    try:
        _extract(repo.archive(commit, "", [toml]), folder)
        stack = config.load(folder / toml)
        folders = [_relative(u.patches, folder) for u in stack.upstreams]
        present = [f for f in folders if repo.run(["cat-file", "-e", f"{commit}:{f}"], check=False).status == 0]
        if present:
            _extract(repo.archive(commit, "", present), folder)
        return {u.name: (u, load_series(u.name, u.patches)) for u in stack.upstreams}
    except KpatchError as failure:  # name the file as the revision holds it, not the temp copy
        raise type(failure)(failure.message.replace(f"{folder}/", f"{where}:")) from None


def _stack_diff(ws: Workspace, ui: UI, name: str, before: tuple[Upstream, Series] | None, now: Upstream | None,
                where: str) -> StackDiff:
    from kpatch.stack.series import load_series

    mirror = ws.mirror(name)
    old = _side(ws, ui, before[0], before[1], f"at {where}", now) if before else None
    new = _side(ws, ui, now, load_series(name, now.patches), "in patches/", now) if now else None
    found = compare(mirror, name, old, new)
    if before is None or old is None or new is None or old.base == new.base:
        return found
    changed = {p.old_name or p.name for p in found.patches if p.change is Change.CHANGED}
    forge = forge_url((now or before[0]).mirror_url)
    return with_evidence(found, behind(mirror, old.base, new.base, before[1].patches, changed, forge))


def _side(ws: Workspace, ui: UI, upstream: Upstream, series: Series, label: str, current: Upstream | None) -> Side:
    """One version's commits on its base, fetched (from the upstream's URL now, else then) when the mirror lacks it."""
    from kpatch.engine.plan import fetch

    mirror = ws.mirror(upstream.name)
    base = mirror.resolve(upstream.base) if mirror.exists else None
    if base is None:
        fetch(ws, ui, current or upstream)
        base = mirror.resolve(upstream.base)
    if base is None:
        raise UpstreamError(f"upstream {upstream.name}: base {upstream.base!r} ({label}) is not in "
                            f"{(current or upstream).display_url}")
    return side_from_files(mirror, base, series, label)


def _relative(path: Path, top: Path) -> str:
    return path.resolve().relative_to(top.resolve()).as_posix()


def _extract(tar: bytes, folder: Path) -> None:
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(folder, filter="data")
