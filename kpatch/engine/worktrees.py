"""The person's worktree of a stack around a rebase: checked out at the new base beside the stack's `git am` when
there is none to move, put into place when the rebase finishes, and moved back after an abort."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from kpatch import killseam
from kpatch.errors import GitError, StorageError
from kpatch.gitx import Mirror, Repository
from kpatch.output.ui import UI
from kpatch.project.state import RunState, StackRun
from kpatch.project.workspace import Workspace

log = logging.getLogger("kpatch.rebase")


@contextmanager
def worktree_beside(ws: Workspace, mirror: Mirror, name: str, base: str) -> Iterator[None]:
    """With no worktree of the person's to move (a fresh checkout, as every night in CI), the whole checkout
    a rebase's finish would write after the rebase (7.7k files for vLLM: a third of a cold rebase) is written at the new
    base while the stack's `git am` runs; the finish then moves only the stack's files and renames it into place."""
    beside = ws.worktree_beside(name)
    if ws.worktree(name).exists() or mirror.owns(beside):
        yield
        return
    if beside.exists() or mirror.half_made(beside):  # what a killed run left
        mirror.remove_worktree(beside)
    beside.parent.mkdir(parents=True, exist_ok=True)
    child = mirror.begin_worktree(beside, base)
    killseam.reached(f"rebase:beside:{name}")
    try:
        yield
    except BaseException:
        try:
            mirror.end_worktree(beside, child, cancel=True)
        except (GitError, StorageError) as failure:  # the failure being raised says what matters
            log.info("could not remove %s: %s", beside, failure)
        raise
    mirror.end_worktree(beside, child)


def place_worktree(ws: Workspace, mirror: Mirror, name: str, head: str) -> None:
    """Make the person's missing worktree at `head`: the one checked out beside the rebase moved into place, else
    (it is not whole: killed, or a disk that filled) a new checkout."""
    beside = ws.worktree_beside(name)
    if mirror.owns(beside):
        Repository(beside).checkout(head)
        mirror.move_worktree(beside, ws.worktree(name))
        return
    if beside.exists() or mirror.half_made(beside):
        mirror.remove_worktree(beside)
    mirror.add_worktree(ws.worktree(name), head)


def move_back(ws: Workspace, ui: UI, run: RunState, stack: StackRun) -> None:
    """After an abort that undid the files: a user worktree a killed finish already moved goes back too."""
    settled = run.settled.get(stack.name)
    path = ws.worktree(stack.name)
    if settled is None or stack.final_head is None or not path.exists():
        return
    tree = Repository(path)
    if tree.head() == stack.final_head and not tree.dirty():
        tree.checkout(settled.head)
        ui.note(f"{stack.name}: {path} back at {settled.head[:12]}")
