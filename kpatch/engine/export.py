"""export: worktree commits -> patch files and series, every stack in one journaled step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from kpatch.engine.plan import Item, requires_problem, resolve_items
from kpatch.errors import SeriesError, WorktreeError
from kpatch.files import PATCH_FILE, SERIES_FILE, read_input
from kpatch.gitx import Repository
from kpatch.output.ui import UI
from kpatch.project import journal
from kpatch.project.state import Kind, RunState, Settled
from kpatch.project.workspace import Workspace, writes
from kpatch.stack import SERIES, Series
from kpatch.stack.series import hash_files
from kpatch.stack.writer import Rendered, describe, render


class Change(Enum):
    UNCHANGED = "unchanged"
    MODIFIED = "modified"
    ADDED = "added"
    REMOVED = "removed"


@dataclass(frozen=True)
class FileChange:
    upstream: str
    path: Path
    change: Change


@dataclass(frozen=True)
class ExportResult:
    files: tuple[FileChange, ...]
    written: bool

    @property
    def stale(self) -> tuple[FileChange, ...]:
        return tuple(f for f in self.files if f.change is not Change.UNCHANGED)


def export(ws: Workspace, ui: UI, names: Sequence[str], *, check: bool) -> ExportResult:
    """Write the patch files and series of `names` (default: all) from their worktrees; `check`: write nothing,
    say what is stale (a reader, so no lock, like status)."""
    if check:
        return _export(ws, ui, names, check=True)
    with ws.writer("export", ui):
        return _export(ws, ui, names, check=False)


def _export(ws: Workspace, ui: UI, names: Sequence[str], *, check: bool) -> ExportResult:
    """Compare (and unless `check`, write) every chosen stack's files with what its worktree commits give."""
    for name in names:
        ws.stack.get(name)
    if not check:
        ws.refuse_pending_journal()
    run = ws.read_state()
    planned: list[tuple[Item, Repository, Rendered]] = []
    changes: list[FileChange] = []
    after: dict[str, Series] = {}  # every stack as it reads once the files are written
    items = resolve_items(ws, ui, {}, fetch_missing=False)
    pinned = _required([item.series for item in items])
    for item in items:
        after[item.upstream.name] = item.series
        if names and item.upstream.name not in names:
            continue
        tree, base = _tree_on_stack(ws, item, run)
        rendered = render(tree, base, item.series, item.series.dropped, pinned=pinned)
        planned.append((item, tree, rendered))
        compared = _compare(item, rendered)
        if not check:
            _refuse_overwriting_newer_files(item, run, compared)
        changes.extend(compared)
    _check_requires(ws, planned, after)
    if check:
        return ExportResult(files=tuple(changes), written=False)
    ws.check_writable(ws.kpatch_dir, *(item.upstream.patches for item, _, _ in planned))
    writes: dict[Path, bytes] = {}
    for item, _, rendered in planned:
        writes.update(rendered.files)
        writes[item.upstream.patches / SERIES] = rendered.series
    # The run state goes in the same step: going back must also forget that the worktrees were exported,
    # or their commits would count as kept in patches/ and the next apply would move them without asking.
    writes[ws.state_file] = _exported_state(ws, run, [(item.upstream.name, tree, rendered)
                                                      for item, tree, rendered in planned])
    journal.write(ws.journal_dir, "export", writes, [c.path for c in changes if c.change is Change.REMOVED])
    journal.close(ws.journal_dir)
    return ExportResult(files=tuple(changes), written=True)


@writes("export --continue")
def continue_export(ws: Workspace, ui: UI) -> ExportResult:
    """Finish an export a kill interrupted (or, if it had not started writing, run it again)."""
    if ws.pending_journal() != "export":
        raise WorktreeError("nothing to continue: no interrupted export")
    if not journal.committed(ws.journal_dir):
        journal.back(ws.journal_dir)
        return export(ws, ui, (), check=False)
    journal.forward(ws.journal_dir)
    journal.close(ws.journal_dir)
    return export(ws, ui, (), check=True)


@writes("export --abort")
def abort_export(ws: Workspace, ui: UI) -> None:
    """Put every file an interrupted export touched back as it was (or set an unreadable journal aside)."""
    if ws.pending_journal() != "export":
        raise WorktreeError("nothing to abort: no interrupted export")
    aside = journal.back(ws.journal_dir)
    if aside is not None:
        ui.warn(f"the journal could not be read: set aside as {aside}; kpatch.toml and patches/ are as the "
                "interrupted write left them (check them with 'git status')")


def _tree_on_stack(_ws: Workspace, item: Item, run: RunState) -> tuple[Repository, str]:
    """The worktree and its base, refused when it is mid-operation or holds something other than the stack."""
    name, path = item.upstream.name, item.worktree
    if not path.exists():
        raise WorktreeError(f"no worktree for {name} at {path}: run 'kpatch apply' first")
    tree = Repository(path)
    busy = tree.operation()
    if busy:
        raise WorktreeError(f"worktree {path} is in the middle of a git {busy}; finish it first")
    op = run.operation
    stack = op.stacks.get(name) if op is not None and op.kind is Kind.APPLY else None
    base = stack.base if stack else run.settled[name].base if name in run.settled else item.base
    if base is None:
        raise WorktreeError(f"base of {name} is unknown: run 'kpatch apply' first")
    head = tree.head()
    if not tree.is_ancestor(base, head):
        raise WorktreeError(f"worktree {path} is not on the {name} stack: HEAD {head[:12]} does not contain its base "
                            f"{base[:12]} (was something else checked out there?); nothing was exported")
    ours = set(tree.not_upstream(base, head))
    theirs = tree.count(base, head) - len(ours)
    if theirs:
        sample = next(sha for sha in tree.commits(base, head) if sha not in ours)
        raise WorktreeError(f"worktree {path} is not on the {name} stack: {theirs} commit(s) since the base are "
                            f"upstream's (e.g. {sample[:12]} \"{tree.commit_info(sample).subject}\"), not patches; "
                            "was a branch checked out there? nothing was exported")
    return tree, base


def _refuse_overwriting_newer_files(item: Item, run: RunState, compared: list[FileChange]) -> None:
    """patches/ changed since the worktree was made from it (kpatch propose wrote trailers, a git pull, an edit):
    writing what the worktree holds would throw that change away. Apply first, so the worktree holds it too."""
    name = item.upstream.name
    settled = run.settled.get(name)
    if settled is None or settled.stack_hash is None or settled.stack_hash == item.series.stack_hash():
        return
    changed = [c for c in compared if c.change is not Change.UNCHANGED and c.path.name != SERIES]
    if changed:
        raise WorktreeError(f"{changed[0].path}: patches/ of {name} changed since its worktree was made from them "
                            "(kpatch propose, a pull or an edit); export would overwrite that: run 'kpatch apply' "
                            "to take them into the worktree first (nothing was written)")


def _required(all_series: Sequence[Series]) -> frozenset[str]:
    """Every patch file name a `Requires:` trailer names, in any stack: export renumbers none of them. From the
    stacks as resolve_items read them: reading every stack again for each stack exported parsed every patch file
    1 + (number of stacks) times."""
    return frozenset(ref.patch for series in all_series for patch in series.patches for ref in patch.requires)


def _check_requires(ws: Workspace, planned: list[tuple[Item, Repository, Rendered]],
                    after: dict[str, Series]) -> None:
    """Every `Requires:` still names a patch once the files are written (status and apply would refuse them)."""
    for item, _, rendered in planned:
        after[item.upstream.name] = rendered.as_series(item.series, item.series.dropped)
    wrong = requires_problem(ws.stack, after)
    if wrong is None:
        return
    patch, ref, why = wrong
    made = next(((tree, rendered.commits[patch.path]) for _, tree, rendered in planned
                 if patch.path in rendered.commits), None)
    where = f"{patch.path}:{ref.line}" if made is None else f"{describe(*made)} (line {ref.line} of its patch)"
    raise WorktreeError(f"{where}: {why}; fix it and export again: nothing was written")


def _exported_state(ws: Workspace, run: RunState, trees: list[tuple[str, Repository, Rendered]]) -> bytes:
    """The run state once export wrote out what the worktrees hold: moving them later loses nothing (and a
    rebase may pick the commits, which the files now hold exactly: engine/fastpath.py)."""
    for name, tree, rendered in trees:
        settled = run.settled.get(name)
        if settled is not None:
            files = [(path.name, data) for path, data in rendered.files.items()]
            run.settled[name] = Settled(base=settled.base, head=tree.head(), tag=settled.tag,
                                        tag_commit=settled.tag_commit, stack_hash=hash_files(files))
    return ws.encode_state(run)


def _compare(item: Item, rendered: Rendered) -> list[FileChange]:
    name = item.upstream.name
    changes = []
    for path, data in rendered.files.items():
        if not path.is_file():
            changes.append(FileChange(name, path, Change.ADDED))
        else:
            same = read_input(path, PATCH_FILE, SeriesError) == data
            changes.append(FileChange(name, path, Change.UNCHANGED if same else Change.MODIFIED))
    for patch in item.series.patches:
        if patch.path not in rendered.files:
            changes.append(FileChange(name, patch.path, Change.REMOVED))
    series = item.upstream.patches / SERIES
    current = read_input(series, SERIES_FILE, SeriesError) if series.is_file() else None
    kind = Change.ADDED if current is None else Change.UNCHANGED if current == rendered.series else Change.MODIFIED
    changes.append(FileChange(name, series, kind))
    return changes
