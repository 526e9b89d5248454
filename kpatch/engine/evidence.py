"""The upstream evidence behind a patch a rebase had to merge (three-way), that changed, or that conflicts: the
upstream commits of the range (old base..new base) that touched the lines the patch touches (the lines it changes
and the ones it keeps as context, as its file has them on the old base), with the pull request each names.

One `git log -p -U0` over the range and the patches' files (gitx.rangediff.upstream_hunks) is read once, not one
git call per patch: each patch's lines are carried from the old base forward through the upstream commits, oldest
first (as `git log -L` carries them backwards), and every commit whose hunks meet them is listed. The walk follows
the first-parent line and no renames.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the record below is read by the nightly's report too: it must not load the machinery
    from kpatch.gitx import Repository
    from kpatch.gitx.rangediff import UpstreamHunks
    from kpatch.project.workspace import Workspace
    from kpatch.stack import Patch

log = logging.getLogger("kpatch.evidence")


@dataclass(frozen=True)
class UpstreamCommit:
    """An upstream commit of the rebase's range that touched lines a patch touches."""

    sha: str
    subject: str
    author: str
    date: str
    pr: int | None  # the pull request number its subject names: `... (#NNNN)`, or `Merge pull request #NNNN ...`
    link: str | None  # that pull request on the upstream's forge (GitHub), when the upstream is there


Lines = tuple[int, int]  # the first and last line of a stretch of a file, inclusive
Span = tuple[int, int, int, int]  # a hunk's `@@ -A,B +C,D @@`: B lines from line A become D lines from line C
_WHOLE: Lines = (0, 1 << 62)  # every line of a file (one the stack creates: any upstream line there meets it)
_PR = re.compile(r"\(#(\d+)\)\s*$|^Merge pull request #(\d+) ")


def behind(repo: Repository, since: str, until: str, patches: Sequence[Patch], wanted: Collection[str],
           forge: str | None) -> dict[str, tuple[UpstreamCommit, ...]]:
    """Each `wanted` patch of the stack `patches` (its files on `since`, in order) -> the upstream commits of
    since..`until` that touched its lines, newest first (pull request links on `forge`, an https://github.com/O/R)."""
    # imported where used: loaded when a stack's evidence is gathered, not with rebase's import
    from kpatch.gitx.rangediff import upstream_hunks

    lines = patch_lines(patches, wanted)
    paths = sorted({path for files in lines.values() for path in files})
    found: dict[str, list[UpstreamCommit]] = {name: [] for name in lines}
    for commit in upstream_hunks(repo, since, until, paths):
        for name, files in lines.items():
            met = False
            for path, spans in commit.hunks.items():
                stretches = files.get(path)
                if stretches is None:
                    continue
                met = met or any(_meets(s, h) for s in stretches for h in spans)
                files[path] = [_carry(s, spans) for s in stretches]
            if met:
                found[name].append(_record(commit, forge))
    return {name: tuple(reversed(commits)) for name, commits in found.items()}


def for_stack(ws: Workspace, name: str, since: str, until: str, wanted: Collection[str]
              ) -> dict[str, tuple[UpstreamCommit, ...]]:
    """`behind` for the stack `name` as its patch files are now (a rebase's, before it commits); when it cannot be
    found it is said in the log and left out: the evidence never stops a rebase."""
    from kpatch.errors import KpatchError
    from kpatch.stack.series import load_series

    if not wanted:
        return {}
    upstream = ws.stack.get(name)
    try:
        series = load_series(name, upstream.patches)
        return behind(ws.mirror(name), since, until, series.patches, wanted, forge_url(upstream.mirror_url))
    except KpatchError as failure:
        log.warning("%s: the upstream commits behind %s not found: %s", name, ", ".join(sorted(wanted)), failure)
        return {}


def patch_lines(patches: Sequence[Patch], wanted: Collection[str]) -> dict[str, dict[str, list[Lines]]]:
    """Each `wanted` patch -> path -> the stretches its hunks cover (changed lines and context) on the stack's
    base: a patch file's line numbers are the earlier patches' result, carried back through their changes here."""
    from kpatch.stack.mbox import read_diff

    shared = {path for p in patches if p.name in wanted for path in p.paths}
    last = max((i for i, p in enumerate(patches) if p.name in wanted), default=-1)
    earlier: dict[str, list[list[Span]]] = {}  # path -> each earlier patch's changed lines there (-U0 spans)
    created: set[str] = set()  # paths an earlier patch creates
    out: dict[str, dict[str, list[Lines]]] = {}
    for patch in patches[:last + 1]:
        if not shared.intersection(patch.paths):
            continue  # it cannot move the lines of a wanted patch
        diffs = read_diff(patch.path)
        if patch.name in wanted:
            files: dict[str, list[Lines]] = {}
            for d in diffs:
                if d.old_path is None or d.old_path in created:
                    if d.new_path is not None:
                        files[d.new_path] = [_WHOLE]
                    continue
                stretches = [_covered(s) for s in d.spans]
                for changes in reversed(earlier.get(d.old_path, [])):
                    stretches = [_carry(s, [(c, n, a, b) for a, b, c, n in changes]) for s in stretches]
                files.setdefault(d.old_path, []).extend(stretches)
            out[patch.name] = files
        for d in diffs:
            if d.old_path is None and d.new_path is not None:
                created.add(d.new_path)
            elif d.old_path is not None and d.old_path == d.new_path:
                earlier.setdefault(d.old_path, []).append(
                    [change for s, lines in zip(d.spans, d.hunks, strict=True) for change in changed(s, lines)])
    return out


def changed(span: Span, lines: Sequence[str]) -> list[Span]:
    """A hunk with context as the -U0 hunks of its changed lines alone (as `git diff -U0` would number them)."""
    old = span[0] if span[1] else span[0] + 1
    new = span[2] if span[3] else span[2] + 1
    out: list[Span] = []
    run: list[int] | None = None  # [old start, removed, new start, added]

    def close() -> None:
        if run is not None:
            a, b, c, d = run
            out.append((a if b else a - 1, b, c if d else c - 1, d))

    for line in lines:
        tag = line[:1]
        if tag in ("-", "+"):
            run = run or [old, 0, new, 0]
            if tag == "-":
                run[1], old = run[1] + 1, old + 1
            else:
                run[3], new = run[3] + 1, new + 1
        elif tag != "\\":  # context (an empty line is context whose space was lost in transit)
            close()
            run, old, new = None, old + 1, new + 1
    close()
    return out


def _covered(span: Span) -> Lines:
    """The old lines a hunk covers; a hunk that covers none sits between line A and the next."""
    a, b = span[0], span[1]
    return (a, a + b - 1) if b else (a, a + 1)


def _meets(stretch: Lines, hunk: Span) -> bool:
    """An upstream -U0 hunk changes a line of the stretch, or inserts lines inside it."""
    low, high = stretch
    a, b = hunk[0], hunk[1]
    return a <= high and a + b - 1 >= low if b else low <= a < high


def _carry(stretch: Lines, hunks: Sequence[Span]) -> Lines:
    """A stretch's lines after one commit's -U0 hunks on its file (in order); a stretch whose lines went keeps the
    line where they were."""
    low, high = _point(stretch[0], hunks, first=True), _point(stretch[1], hunks, first=False)
    return low, max(low, high)


def _point(line: int, hunks: Sequence[Span], *, first: bool) -> int:
    """Where `line` is after the hunks; a line they replace goes to the first (or last) line that replaced it."""
    shift = 0
    for a, b, c, d in hunks:
        if b and a <= line <= a + b - 1:
            if first:
                return c if d else c + 1
            return c + d - 1 if d else c
        if (a + b - 1 if b else a) >= line:
            break
        shift += d - b
    return line + shift


def _record(commit: UpstreamHunks, forge: str | None) -> UpstreamCommit:
    match = _PR.search(commit.subject)
    pr = int(match.group(1) or match.group(2)) if match else None
    return UpstreamCommit(sha=commit.sha, subject=commit.subject, author=commit.author, date=commit.date, pr=pr,
                          link=f"{forge}/pull/{pr}" if forge and pr else None)


def forge_url(url: str) -> str | None:
    """`https://github.com/OWNER/REPO` for an upstream on GitHub (https or ssh URL), else None."""
    match = re.match(r"^(?:https://(?:[^@/]+@)?github\.com/|git@github\.com:|ssh://git@github\.com(?::\d+)?/)"
                     r"([\w.-]+)/([\w.-]+?)(?:\.git)?/?$", url)
    return f"https://github.com/{match.group(1)}/{match.group(2)}" if match else None
