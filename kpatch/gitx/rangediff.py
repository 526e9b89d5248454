"""A stack's commits made from its patch files alone, and `git range-diff` between two stacks.

The commits are made by one `git am` in a worktree of the mirror in a temp folder, on a stand-in for the base that
holds only the paths the stack touches (a diff of two trees shows only what differs, so the rest of the upstream's
tree changes nothing in them): no worktree of the person's is written, and the only thing left in the mirror is the
commits' objects, which no ref names.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kpatch import killseam, scratch
from kpatch.gitx.am import AM_OPTIONS
from kpatch.gitx.mirror import Mirror
from kpatch.gitx.repo import Repository, literal
from kpatch.gitx.runner import COMMITTER

THROWAWAY_KIND = "stack"  # the temp folders of those worktrees (kpatch/scratch.py): a killed kpatch's are swept by the
THROWAWAY_PREFIX = f"kpatch-{THROWAWAY_KIND}-"  # next writer, and their records in the mirror removed


class NotApplied(Exception):
    """A patch file does not apply onto the commits made so far (carries its path)."""

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.path = path


def commits_from_patches(mirror: Mirror, base: str, patches: Sequence[Path], paths: Sequence[str]) -> list[str]:
    """A stand-in for `base` that holds only its files `paths` names (a root commit), then the commits one
    `git am -3` of the patch files makes on it, in a worktree of the mirror in a temp folder that holds only those
    files; raise NotApplied at a patch that does not apply. `stand-in..last` is the stack's range, each commit's
    diff the one it has on `base`: [stand-in, *commits]."""
    start = _stand_in(mirror, base, paths)
    if not patches:
        return [start]
    with scratch.folder(THROWAWAY_KIND) as folder:
        where = folder / "tree"
        mirror.add_worktree(where, start)
        try:
            tree = Repository(where)
            went = tree.run(["-c", "rerere.enabled=false", "am", *AM_OPTIONS, "--", *map(str, patches)], check=False)
            killseam.reached(f"scratch:{THROWAWAY_KIND}")  # test seam: the worktree and its record still there
            if went.status != 0:
                next_file = tree.git_dir / "rebase-apply" / "next"
                stopped = int(next_file.read_text().strip()) if next_file.is_file() else 1
                raise NotApplied(patches[min(stopped, len(patches)) - 1])
            return [start, *tree.commits(start, "HEAD")]
        finally:
            mirror.remove_worktree(where)


def _stand_in(repo: Repository, base: str, paths: Sequence[str]) -> str:
    """A root commit whose tree is `base`'s files that `paths` names, nothing else (its date fixed: the same
    files give the same commit)."""
    with tempfile.TemporaryDirectory(prefix="kpatch-index-") as folder:
        env = {"GIT_INDEX_FILE": str(Path(folder) / "index")}
        listed = repo.run(["ls-tree", "-r", "-z", "--full-tree", "--end-of-options", base, "--", *literal(paths)])
        repo.run(["update-index", "-z", "--index-info"], stdin=listed.stdout, env=env)
        tree = repo.out(["write-tree"], env=env)
    fixed = {"GIT_AUTHOR_NAME": COMMITTER[0], "GIT_AUTHOR_EMAIL": COMMITTER[1], "GIT_AUTHOR_DATE": "@0 +0000",
             "GIT_COMMITTER_DATE": "@0 +0000"}
    return repo.out(["commit-tree", tree], stdin=f"kpatch: {base} with only the stack's files\n".encode(), env=fixed)


def range_diff(repo: Repository, old: str, new: str) -> str:
    """`git range-diff --no-color OLD NEW` (two A..B ranges, neither empty), as git prints it."""
    return repo.run(["range-diff", "--no-color", old, new]).stdout.decode("utf-8", "replace")


def own_changes(repo: Repository, commits: Sequence[str]) -> dict[str, str]:
    """Commit -> its message and a hash of its own changed lines only (`-U0`, line numbers ignored): equal for two
    commits whose diffs differ only in offsets and context."""
    if not commits:
        return {}
    def log(*options: str) -> bytes:
        return repo.run(["log", "--no-walk=unsorted", "--no-color", *options, "--end-of-options", *commits]).stdout

    ids = repo.run(["patch-id", "--verbatim"], stdin=log("-p", "-U0", "--format=commit %H")).text
    found = {commit: patch_id for patch_id, commit in (line.split() for line in ids.splitlines())}
    parts = log("--format=%x00%H%x00%B").decode("utf-8", "replace").split("\0")[1:]
    messages = {parts[i]: parts[i + 1] for i in range(0, len(parts) - 1, 2)}
    return {c: found.get(c, "") + "\0" + messages.get(c, "") for c in commits}


_HUNK_OLD = re.compile(r"^@@ -(\d+)(?:,(\d+))? ")


def line_history(repo: Repository, since: str, commit: str) -> list[tuple[str, str, str, str]]:
    """(SHA, author, ISO date, subject) of the commits in since..`commit`^ that touched the lines `commit` changes
    or keeps as context (`git log -L` over each of its hunks, on its parent's lines), newest first; none when git
    cannot follow them."""
    parent = f"{commit}^"
    diff = repo.run(["diff", "-U3", "--no-color", "--no-ext-diff", "--no-renames", parent, commit]).text
    ranges, path = [], None
    for line in diff.splitlines():
        if line.startswith("--- "):
            path = line[6:] if line.startswith("--- a/") else None  # a new file, or a quoted name: nothing to follow
        elif (match := _HUNK_OLD.match(line)) and path:
            start, length = int(match.group(1)), int(match.group(2) or 1)
            ranges += ["-L", f"{max(start, 1)},+{max(length, 1)}:{path}"]  # an insertion: the line it follows
    if not ranges:
        return []
    found = repo.run(["log", "--no-merges", "--format=%x00%H%x00%an <%ae>%x00%aI%x00%s", *ranges,
                      "--end-of-options", f"{since}..{parent}"], check=False)
    if found.status != 0:  # a range past a file's end: git refuses the whole walk
        return []
    out = []
    for line in found.stdout.decode("utf-8", "replace").splitlines():
        if line.startswith("\0"):
            sha, author, date, subject = line[1:].split("\0", 3)
            out.append((sha, author, date, subject))
    return out
