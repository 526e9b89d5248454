"""The one reader of a patch's git diff: its files and hunks, walked the way `git apply` does (hunks by their
counts), every path checked to stay in the worktree.

A line inside a hunk is content, whatever it looks like: a deleted SQL comment `-- x` is the line `--- x`,
which a line-by-line reader would take for a file header.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kpatch.errors import SeriesError

_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_SPAN = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
Span = tuple[int, int, int, int]  # a hunk's `@@ -A,B +C,D @@`: B lines from line A become D lines from line C


def span(header: str) -> Span | None:
    """A hunk header's numbers (a count left out is 1, as git writes it); None when it is not one."""
    match = _SPAN.match(header)
    if not match:
        return None
    a, b, c, d = match.groups()
    return int(a), int(b) if b is not None else 1, int(c), int(d) if d is not None else 1
_PATH_LINE = re.compile(r"^(?:--- |\+\+\+ |rename from |rename to |copy from |copy to )(.*)$")


@dataclass(frozen=True)
class DiffPaths:
    paths: tuple[str, ...]  # every path the diff reads or writes, sorted
    new_symlinks: tuple[str, ...]  # paths it creates as symlinks
    new_files: tuple[str, ...]  # paths it creates
    renamed: tuple[str, ...] = ()  # paths it renames a file to


@dataclass
class FileDiff:
    """One file's part of a diff: the paths it names, what it creates or renames, and its hunks' lines."""

    header: str  # its `diff --git ...` line
    paths: set[str] = field(default_factory=set)  # every path it reads or writes
    new_path: str | None = None  # the `+++ b/` side (None: deleted, or a mode-only or binary change)
    new_file: bool = False
    new_symlink: bool = False
    renamed: set[str] = field(default_factory=set)  # paths it renames a file to
    hunks: list[list[str]] = field(default_factory=list)  # each hunk's lines after its @@ header
    old_path: str | None = None  # the `--- a/` side (None: a new file)
    spans: list[Span] = field(default_factory=list)  # each hunk's header: (old start, old count, new start, count)


def file_diffs(lines: list[str], start: int, path: Path, *, hunks: bool = True) -> list[FileDiff]:
    """Walk the diff from `lines[start]` (a `diff --git` line) to its end (or the mbox signature `-- `); without
    `hunks`, the hunks are walked (and checked) but not kept."""
    files: list[FileDiff] = []
    index = start
    while index < len(lines):
        line = lines[index]
        if line.startswith("diff --git "):
            files.append(FileDiff(header=line))
            header = index
            index = _file_header(lines, index + 1, path, files[-1])
            same = _same_name(line)
            if same is not None and not files[-1].paths:  # mode-only or binary: named only here
                _check_path(same, path, header)
                files[-1].paths.add(same)
        elif line.startswith("@@ "):
            end = _hunk(lines, index, path)
            numbers = span(line) if hunks else None
            if files and numbers:  # _hunk checked the header
                files[-1].hunks.append(lines[index + 1:end])
                files[-1].spans.append(numbers)
            index = end
        elif line == "-- ":  # the signature after the last file
            break
        else:
            index += 1
    return files


def diff_paths(lines: list[str], start: int, path: Path) -> DiffPaths:
    """The paths the diff from `lines[start]` reads, writes, creates (as files or symlinks) and renames to."""
    files = file_diffs(lines, start, path, hunks=False)

    def each(pick: Callable[[FileDiff], Iterable[str]]) -> tuple[str, ...]:
        return tuple(sorted({name for f in files for name in pick(f)}))

    return DiffPaths(paths=each(lambda f: f.paths),
                     new_symlinks=each(lambda f: [f.new_path] if f.new_symlink and f.new_path else []),
                     new_files=each(lambda f: [f.new_path] if f.new_file and f.new_path else []),
                     renamed=each(lambda f: f.renamed))


def post_images(files: list[FileDiff]) -> dict[str, list[list[str]]]:
    """New path -> the new side of each of its hunks: context and added lines (an empty line is context whose space
    was lost in transit, as git apply counts it), a CR at a line's end dropped."""
    out: dict[str, list[list[str]]] = {}
    for diff in files:
        if diff.new_path is not None:
            out.setdefault(diff.new_path, []).extend(
                [line[1:].rstrip("\r") for line in hunk if line[:1] in (" ", "+") or line in ("", "\r")]
                for hunk in diff.hunks)
    return out


def _file_header(lines: list[str], index: int, path: Path, diff: FileDiff) -> int:
    """The extended header of one file's diff, up to its first hunk (or the next file)."""
    while index < len(lines) and not lines[index].startswith(("diff --git ", "@@ ")):
        line = lines[index]
        if line.startswith("new file mode "):
            diff.new_file, diff.new_symlink = True, line == "new file mode 120000"
        elif line == "GIT binary patch":
            while index < len(lines) and lines[index] != "":
                index += 1
            continue
        elif line == "-- ":
            return index
        match = _PATH_LINE.match(line)
        if match and match.group(1).rstrip("\t") != "/dev/null":
            name = _unquote(match.group(1).rstrip("\t"), path, index)
            if line.startswith(("--- ", "+++ ")):
                if not name.startswith(("a/", "b/")):
                    raise SeriesError(f"{path}:{index + 1}: path {name!r} lacks the a/ or b/ prefix")
                name = name[2:]
            _check_path(name, path, index)
            diff.paths.add(name)
            if line.startswith("rename to "):
                diff.renamed.add(name)
            if line.startswith("+++ "):
                diff.new_path = name
            elif line.startswith("--- "):
                diff.old_path = name
        index += 1
    return index


def _hunk(lines: list[str], index: int, path: Path) -> int:
    """Skip one hunk by its line counts; return the index after it."""
    match = _HUNK.match(lines[index])
    if not match:
        raise SeriesError(f"{path}:{index + 1}: malformed hunk header {lines[index][:40]!r}")
    old = int(match.group(1)) if match.group(1) is not None else 1
    new = int(match.group(2)) if match.group(2) is not None else 1
    index += 1
    end = len(lines)
    while old > 0 or new > 0:  # every line of every patch goes through here: by its first character, no calls
        if index >= end:
            raise SeriesError(f"{path}:{index}: the patch ends inside a hunk")
        line = lines[index]
        first = line[:1]
        if first == " " or not line or line == "\r":  # an empty context line may lose its space in transit
            old, new = old - 1, new - 1
        elif first == "-":
            old -= 1
        elif first == "+":
            new -= 1
        elif first != "\\":
            raise SeriesError(f"{path}:{index + 1}: hunk is shorter than its header says")
        index += 1
    while index < len(lines) and lines[index].startswith("\\"):
        index += 1
    return index


def _same_name(line: str) -> str | None:
    """P from `diff --git a/P b/P` (unambiguous only when both names are the same)."""
    rest = line[len("diff --git "):]
    if rest.startswith("a/") and len(rest) % 2 == 1:
        half = (len(rest) - 1) // 2
        old, new = rest[:half], rest[half + 1:]
        if rest[half] == " " and new.startswith("b/") and old[2:] == new[2:]:
            return old[2:]
    return None


def _unquote(raw: str, path: Path, index: int) -> str:
    if not raw.startswith('"'):
        return raw
    if len(raw) < 2 or not raw.endswith('"'):
        raise SeriesError(f"{path}:{index + 1}: badly quoted path {raw[:60]!r}")
    try:
        escaped = raw[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1")
    except (UnicodeDecodeError, UnicodeEncodeError):
        raise SeriesError(f"{path}:{index + 1}: badly quoted path {raw[:60]!r}") from None
    try:
        return escaped.decode("utf-8")
    except UnicodeDecodeError:
        raise SeriesError(f"{path}:{index + 1}: path {raw[:60]} is not UTF-8: kpatch reads UTF-8 file names only; "
                          "rename the file") from None


def _check_path(name: str, path: Path, index: int) -> None:
    parts = PurePosixPath(name).parts
    if not name or name.startswith("/") or ".." in parts or any(p.lower() == ".git" for p in parts):
        raise SeriesError(f"{path}:{index + 1}: patch writes outside the worktree: {name!r}")
