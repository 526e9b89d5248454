"""Picks without a worktree: a stack's commits put onto a new base by `git merge-tree --write-tree` (git >= 2.38),
each merge made in memory, with no index and no file written.

A pick of commit C onto H is the three-way merge of H and C whose base is C's parent. git 2.39's merge-tree takes
no base of its own (`--merge-base` came in 2.40): it merges two commits from their merge base. So C is merged with
a stand-in commit, H's tree on C's parent, whose one merge base with C is C's parent: ort then merges the same
three trees with the same rules (renames and all) as the `git rebase` pick it replaces, and gives the same tree
and the same verdict (clean or not). A pick whose parent's tree is the tree it goes onto needs no merge at all (its
own tree is the result); one hash-object process writes every commit, a line at a time.

The commit a pick makes is the one the rebase's sequencer makes with kpatch's options (engine/fastpath.py;
`--committer-date-is-author-date`, kpatch as committer): the original's author line and message byte for byte,
kpatch as committer at the author's date. A pick that leaves the tree as it was leaves no commit (`--empty=drop`).
Only plain commits are picked so: one parent (the commit before it), no header but tree, parent, author and
committer, an author line in git's raw form (a date git writes back as it is), a non-empty message git's UTF-8
check keeps as it is (no NUL, no blank line first), a change of its own. For anything else, or when the picks need
more than MERGES_MAX merges, `pick` answers None and the caller picks in a worktree with `git rebase`, as before.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from subprocess import Popen

from kpatch import scratch
from kpatch.gitx.commits import plain_utf8
from kpatch.gitx.picks import PickRun
from kpatch.gitx.repo import SHA_RE, Repository
from kpatch.gitx.runner import COMMITTER, popen

log = logging.getLogger("kpatch.git")
# The date as git writes it again (the committer's is the author's, parsed and written anew): no leading zero, a
# zone's minutes under 60 ("01700000100" and "+0060" would come back as "1700000100" and "+0100").
_AUTHOR = re.compile(rb"author ([^<>\n]* <[^<>\n]*> ((?:0|[1-9][0-9]{0,11}) [+-][0-9]{2}[0-5][0-9]))")
# A merge is a git process of its own (below): past this many, one `git rebase` in a sparse worktree picks faster
# (the generated 300-patch benchmark, whose every pick is a merge, took longer with a process per pick).
MERGES_MAX = 16
_STAND_IN = b"author kpatch <kpatch@localhost> 0 +0000\ncommitter kpatch <kpatch@localhost> 0 +0000\n\npick\n"


@dataclass(frozen=True)
class _Original:
    tree: bytes
    parent: bytes
    author: bytes  # the author line's value, as it is
    date: bytes  # its "<seconds> <zone>"
    message: bytes
    parent_tree: bytes = b""  # the tree of the commit it was made on


class _Lost(Exception):
    """A git process of the picks answered what they cannot read: the picks are given up (nothing refers to what
    they wrote)."""


def pick(repo: Repository, onto: str, commits: Sequence[str], on_progress: Callable[[int], None]) -> PickRun | None:
    """Pick `commits` in order onto `onto` without a worktree, up to the first that does not merge cleanly
    (`stopped`); `on_progress` gets how many are done. None when a commit is not plain (see the module's
    docstring) or git answered what the picks cannot read: nothing is changed then."""
    if not commits:
        return PickRun(picked=(), stopped=False)
    found = _originals(repo, onto, commits)
    if found is None:
        return None
    head_tree, originals = found
    if head_tree != originals[0].parent_tree and len(commits) > MERGES_MAX:
        log.info("picks without a worktree: %d commits to merge; git rebase picks them", len(commits))
        return None  # the upstream moved under the stack: every pick is likely a merge, each a process
    head = onto.encode()
    picked: list[str | None] = []
    merges = 0
    with scratch.folder("picks") as folder, _Git(repo, folder) as git:
        try:
            for done, (sha, original) in enumerate(zip(commits, originals, strict=True)):
                if head_tree == original.parent_tree:  # nothing moved under it: the merge gives its own tree
                    clean, tree = True, original.tree
                elif merges == MERGES_MAX:
                    log.info("picks without a worktree: more than %d merges; git rebase picks them", MERGES_MAX)
                    return None
                else:
                    merges += 1
                    stand_in = git.commit(b"tree %s\nparent %s\n%s" % (head_tree, original.parent, _STAND_IN))
                    clean, tree = git.merge(stand_in, sha.encode())
                if not clean:
                    return PickRun(picked=tuple(picked), stopped=True)
                if tree == head_tree:  # its change is in the tree already: dropped, as --empty=drop does
                    picked.append(None)
                else:
                    head = git.commit(b"tree %s\nparent %s\nauthor %s\ncommitter %s <%s> %s\n\n%s" % (
                        tree, head, original.author, COMMITTER[0].encode(), COMMITTER[1].encode(), original.date,
                        original.message))
                    head_tree = tree
                    picked.append(head.decode())
                on_progress(done + 1)
        except _Lost as lost:
            log.warning("picks without a worktree given up: %s", lost)
            return None
    return PickRun(picked=tuple(picked), stopped=False)


def _originals(repo: Repository, onto: str, commits: Sequence[str]) -> tuple[bytes, list[_Original]] | None:
    """`onto`'s tree and each commit as its pick needs it, read in one `git cat-file --batch`; None when one is
    not plain."""
    asked = [f"{onto}^{{tree}}", f"{commits[0]}^^{{tree}}", *commits]
    answer = repo.run(["cat-file", "--batch"], stdin="".join(f"{line}\n" for line in asked).encode()).stdout
    objects: list[tuple[bytes, bytes, bytes]] = []  # (sha, type, content)
    at = 0
    for _ in asked:
        end = answer.index(b"\n", at)
        header = answer[at:end].split(b" ")
        if len(header) != 3 or not header[2].isdigit():
            return None  # "<name> missing"
        size = int(header[2])
        objects.append((header[0], header[1], answer[end + 1:end + 1 + size]))
        at = end + 1 + size + 1
    (onto_tree, kind, _), (first_parent_tree, _, _) = objects[:2]
    if kind != b"tree":
        return None
    plain: list[_Original] = []
    previous: tuple[bytes, bytes] | None = None  # (sha, tree) of the commit before
    for sha, kind, content in objects[2:]:
        original = _plain(content) if kind == b"commit" else None
        if original is None:
            log.info("picks without a worktree: commit %s is not plain", sha.decode())
            return None
        parent_tree = first_parent_tree if previous is None else previous[1]
        if (previous is not None and original.parent != previous[0]) or original.tree == parent_tree:
            return None  # not a straight line, or a commit with no change of its own (a rebase keeps those)
        plain.append(replace(original, parent_tree=parent_tree))
        previous = (sha, original.tree)
    return onto_tree, plain


def _plain(content: bytes) -> _Original | None:
    """A commit object's parts when it is plain (see the module's docstring), else None."""
    head, blank, message = content.partition(b"\n\n")
    lines = head.split(b"\n")
    # The sequencer's message starts at its first line that is not blank and ends at a NUL: those are left to it.
    if not blank or len(lines) != 4 or not message.strip() or message.startswith(b"\n") or b"\0" in content:
        return None
    tree, parent, author, committer = lines
    match = _AUTHOR.fullmatch(author)
    if not (tree.startswith(b"tree ") and parent.startswith(b"parent ") and committer.startswith(b"committer ")
            and match and not match.group(2).endswith(b"-0000")):
        return None
    try:
        if not (plain_utf8(message.decode("utf-8")) and plain_utf8(author.decode("utf-8"))):
            return None
    except UnicodeDecodeError:
        return None
    return _Original(tree=tree[5:], parent=parent[7:], author=match.group(1), date=match.group(2), message=message)


class _Git:
    """The git the picks ask: one `git hash-object -t commit -w --stdin-paths` for every commit, a line at a time
    (each commit's text written to a file of `folder`), and `git merge-tree --write-tree` for each merge."""

    def __init__(self, repo: Repository, folder: Path) -> None:
        self.repo, self.folder, self.written = repo, folder, 0
        self.hashes: Popen[bytes] | None = None

    def __enter__(self) -> _Git:
        return self

    def __exit__(self, *_: object) -> None:
        proc = self.hashes
        if proc is not None:
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            with suppress(OSError):  # it died: nothing more to tell it
                proc.stdin.close()
            if proc.wait() != 0:
                log.debug("%s -> %d\n%s", proc.args, proc.returncode, proc.stderr.read().decode("utf-8", "replace"))
            proc.stdout.close()
            proc.stderr.close()

    def commit(self, text: bytes) -> bytes:
        """Write a commit object; its SHA."""
        if self.hashes is None:
            self.hashes = popen(["hash-object", "-t", "commit", "-w", "--stdin-paths"], self.repo.path,
                                with_stdin=True)
        path = self.folder / str(self.written)
        self.written += 1
        path.write_bytes(text)
        self._ask(self.hashes, os.fsencode(path) + b"\n")
        assert self.hashes.stdout is not None
        sha = self.hashes.stdout.readline().rstrip(b"\n")
        if not SHA_RE.match(sha.decode("ascii", "replace")):
            raise _Lost(f"git hash-object answered {sha!r}")
        return sha

    def merge(self, ours: bytes, theirs: bytes) -> tuple[bool, bytes]:
        """(clean, the merged tree) of `git merge-tree --write-tree ours theirs`: a process of its own (git 2.39's
        `--stdin` answers only when its input ends, never a merge at a time)."""
        done = self.repo.run(["merge-tree", "--write-tree", "-z", "--no-messages", "--name-only",
                              ours.decode(), theirs.decode()], check=False)
        tree = done.stdout.partition(b"\0")[0]
        if done.status not in (0, 1) or not SHA_RE.match(tree.decode("ascii", "replace")):
            raise _Lost(f"git merge-tree -> {done.status}: {done.stderr.strip()}")
        return done.status == 0, tree

    @staticmethod
    def _ask(proc: Popen[bytes], line: bytes) -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(line)
            proc.stdin.flush()
        except OSError as failure:  # it died
            raise _Lost(f"{proc.args!r}: {failure}") from None
