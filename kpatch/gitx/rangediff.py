"""A stack's commits made from its patch files alone, and `git range-diff` between two stacks.

The commits are made by one `git am` in a worktree of the mirror in a temp folder, on a stand-in for the base that
holds only the paths the stack touches (a diff of two trees shows only what differs, so the rest of the upstream's
tree changes nothing in them): no worktree of the person's is written, and the only thing left in the mirror is the
commits' objects, which no ref names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kpatch import killseam, scratch
from kpatch.gitx.am import AM_OPTIONS
from kpatch.gitx.mirror import Mirror
from kpatch.gitx.repo import Repository, literal
from kpatch.gitx.runner import COMMITTER

if TYPE_CHECKING:
    from concurrent.futures import Future

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
    with scratch.folder("index") as folder:
        env = {"GIT_INDEX_FILE": str(Path(folder) / "index")}
        listed = repo.run(["ls-tree", "-r", "-z", "--full-tree", "--end-of-options", base, "--", *literal(paths)])
        repo.run(["update-index", "-z", "--index-info"], stdin=listed.stdout, env=env)
        tree = repo.out(["write-tree"], env=env)
    fixed = {"GIT_AUTHOR_NAME": COMMITTER[0], "GIT_AUTHOR_EMAIL": COMMITTER[1], "GIT_AUTHOR_DATE": "@0 +0000",
             "GIT_COMMITTER_DATE": "@0 +0000"}
    return repo.out(["commit-tree", tree], stdin=f"kpatch: {base} with only the stack's files\n".encode(), env=fixed)


# range-diffs started ahead of need (prefetch_range_diff), by (repository, old range, new range); the latest few.
_AHEAD: dict[tuple[Path, str, str], Future[str]] = {}
_AHEAD_MAX = 4  # one per stack of a rebase; ones never asked for (the rebase went on with git am) age out


def prefetch_range_diff(repo: Repository, old: str, new: str) -> None:
    """Start `range_diff(repo, old, new)` (ranges of full SHAs) in a thread of its own: a later call for the same
    ranges takes its result, so range-diff runs beside what the caller does next (a rebase: classing its picks,
    format-patch, the stack writer) instead of after it."""
    from concurrent.futures import ThreadPoolExecutor  # only here: most runs never diff ahead

    while len(_AHEAD) >= _AHEAD_MAX:
        del _AHEAD[next(iter(_AHEAD))]
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kpatch-range-diff")  # joined at exit, not before
    _AHEAD[(repo.common_dir, old, new)] = pool.submit(_range_diff, repo, old, new)
    pool.shutdown(wait=False)


def range_diff(repo: Repository, old: str, new: str) -> str:
    """`git range-diff --no-color OLD NEW` (two A..B ranges, neither empty), as git prints it."""
    ahead = _AHEAD.pop((repo.common_dir, old, new), None) if _AHEAD else None
    if ahead is not None and ahead.exception() is None:  # a failure there is raised again here, by git
        return ahead.result()
    return _range_diff(repo, old, new)


def _range_diff(repo: Repository, old: str, new: str) -> str:
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


Span = tuple[int, int, int, int]  # a hunk's `@@ -A,B +C,D @@`: B lines from line A become D lines from line C
_SPAN = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class UpstreamHunks:
    """One upstream commit of a range (first-parent line, oldest first) and its -U0 hunks on the files asked for."""

    sha: str
    author: str  # `Name <email>`
    date: str  # ISO 8601
    subject: str
    hunks: dict[str, list[Span]]  # the path before the commit -> its hunks' `@@ -A,B +C,D @@` numbers


def upstream_hunks(repo: Repository, since: str, until: str, paths: Sequence[str]) -> list[UpstreamHunks]:
    """The commits of since..`until` on its first-parent line that touch `paths` (a merge as its diff against its
    first parent: the lines of one commit are the next one's), oldest first, with their -U0 hunks on those paths.

    Two `git log`s: the names each commit changes (no pathspec: git matches every pathspec against every tree entry
    of every commit, 6 s over 1,500 commits for 300 paths, where the names alone take 0.1 s), then the hunks of
    the commits that touch `paths`, read once, their changed lines skipped by the hunks' counts."""
    if not paths:
        return []
    listed = repo.run(["log", "--first-parent", "--diff-merges=first-parent", "--no-renames", "--name-only", "-z",
                       "--format=%x01%H", "--end-of-options", f"{since}..{until}"]).stdout
    wanted = {path.encode() for path in paths}
    touching = []
    for chunk in listed.split(b"\x01")[1:]:
        name, _, names = chunk.partition(b"\0")
        if wanted.intersection(names.strip(b"\n").split(b"\0")):
            touching.append(name.decode())
    if not touching:
        return []
    found = repo.run(["log", "--stdin", "--no-walk=unsorted", "--diff-merges=first-parent", "--no-renames",
                      "--no-color", "--no-ext-diff", "--no-textconv", "-p", "--unified=0",
                      "--format=%x00%H%x00%an <%ae>%x00%aI%x00%s", "--", *literal(paths)],
                     stdin="".join(f"{sha}\n" for sha in reversed(touching)).encode()).stdout
    commits: list[UpstreamHunks] = []
    lines = found.split(b"\n")
    index, old_path, new_path = 0, None, None
    while index < len(lines):
        line = lines[index]
        index += 1
        if line.startswith(b"\0"):
            sha, author, date, subject = line[1:].decode("utf-8", "replace").split("\0", 3)
            commits.append(UpstreamHunks(sha=sha, author=author, date=date, subject=subject, hunks={}))
        elif line.startswith(b"diff --git "):
            old_path = new_path = None
        elif line.startswith(b"--- "):
            old_path = _diff_path(line[4:], b"a/")
        elif line.startswith(b"+++ "):
            new_path = _diff_path(line[4:], b"b/")
        elif line.startswith(b"@@ ") and commits:
            match = _SPAN.match(line)
            if match is None:
                continue
            a, b, c, d = match.groups()
            numbers = (int(a), int(b) if b is not None else 1, int(c), int(d) if d is not None else 1)
            for skipped in (numbers[1], numbers[3]):  # the removed, then the added lines (-U0: no context)
                index += skipped
                while index < len(lines) and lines[index].startswith(b"\\"):  # `\ No newline at end of file`
                    index += 1
            path = old_path or new_path  # a new file's hunks go to its new name (nothing had its lines before)
            if path is not None:
                commits[-1].hunks.setdefault(path, []).append(numbers)
    return [c for c in commits if c.hunks]


def _diff_path(raw: bytes, prefix: bytes) -> str | None:
    """`a/P` (or `b/P`) from a `---`/`+++` line; None for /dev/null or a name git quoted (not followed)."""
    raw = raw.rstrip(b"\t")
    if not raw.startswith(prefix):
        return None
    return raw[len(prefix):].decode("utf-8", "replace")
