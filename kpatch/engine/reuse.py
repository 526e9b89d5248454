"""apply's fast path: take commits that hold exactly the patch files instead of running `git am` again.

Commits "hold exactly the patch files" (`Settled.stack_hash`) when `git am` of the files, in series order, onto
the base gives them back: the files were written from them (the stack writer checks that am reads back each
message and author) or am made them. `git am` as kpatch runs it commits as kpatch with the author's date as the
committer's, so the same files on the same base give the same commits, SHA for SHA. Where such commits are:

- the last finished apply, rebase or export of this project (`Settled`: its head and stack hash), while the
  mirror still has them;
- an import of a series (`kpatch import --series`) made them in its scratch worktree: it keeps them in the
  upstream's mirror under `refs/kpatch/stacks/<stack hash>` (a ref per stack: the mirror may be shared by
  projects, and the name says what the commits hold); apply drops the ref once its worktree holds them.

Each candidate is checked against the stack as read now before it is taken: the same stack hash, the same base,
one commit per patch in a straight line on the base, and every commit as am makes it (kpatch's committer, the
committer date equal to the author date). Anything else (a patch file edited since, another base, a project copied
without its cache, commits made by a person) is left to `git am`.
"""

from __future__ import annotations

from kpatch.gitx import Repository
from kpatch.gitx.runner import COMMITTER
from kpatch.project.state import Settled

PREFIX = "refs/kpatch/stacks/"


def ref(stack_hash: str) -> str:
    return PREFIX + stack_hash


def keep(mirror: Repository, stack_hash: str, head: str) -> None:
    """Keep an import's commits (base..head) for the apply that follows: they hold the files of `stack_hash`.
    Best effort: the import has written its files by then, and without the ref apply runs git am."""
    mirror.run(["update-ref", "--no-deref", ref(stack_hash), head], check=False)


def drop(mirror: Repository, stack_hash: str) -> None:
    """Forget the kept commits of `stack_hash` (a worktree holds them now, or they are not wanted)."""
    mirror.run(["update-ref", "-d", ref(stack_hash)], check=False)


def commits_for(mirror: Repository, base: str, stack_hash: str, count: int, settled: Settled | None) -> str | None:
    """The head of commits that `git am` of the stack's `count` files (hashing to `stack_hash`) onto `base` would
    make, when this project or its mirror holds them; None: run am."""
    if count == 0:
        return None
    candidates = []
    if settled is not None and settled.stack_hash == stack_hash and settled.base == base:
        candidates.append(settled.head)
    kept = mirror.resolve(ref(stack_hash))
    if kept is not None and kept not in candidates:
        candidates.append(kept)
    for head in candidates:
        if _as_am_makes(mirror, base, head, count):
            return head
    return None


def _as_am_makes(mirror: Repository, base: str, head: str, count: int) -> bool:
    """Whether base..head is `count` commits in a straight line on `base`, each committed as kpatch's am commits."""
    form = "--format=%H%x00%P%x00%cn%x00%ce%x00%cd%x00%ad"
    proc = mirror.run(["log", "--date=raw", form, "--end-of-options", head, f"^{base}"], check=False)
    if proc.status != 0:  # not a commit of this mirror (gone, or never here)
        return False
    parent_of = {}
    for line in proc.text.splitlines():
        fields = line.split("\0")
        if len(fields) != 6 or (fields[2], fields[3]) != COMMITTER or fields[4] != fields[5]:
            return False
        parent_of[fields[0]] = fields[1]
    if len(parent_of) != count:
        return False
    at = head
    for _ in range(count):  # one parent each, from head down to the base
        at = parent_of.get(at, "")
        if not at or " " in at:
            return False
    return at == base
