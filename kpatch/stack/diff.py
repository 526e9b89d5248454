"""The paths a git diff reads and writes, found by walking it the way `git apply` does: hunks by their counts.

A line inside a hunk is content, whatever it looks like: a deleted SQL comment `-- x` is the line `--- x`,
which a line-by-line reader would take for a file header.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kpatch.errors import SeriesError

_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_PATH_LINE = re.compile(r"^(?:--- |\+\+\+ |rename from |rename to |copy from |copy to )(.*)$")


@dataclass(frozen=True)
class DiffPaths:
    paths: tuple[str, ...]  # every path the diff reads or writes, sorted
    new_symlinks: tuple[str, ...]  # paths it creates as symlinks
    new_files: tuple[str, ...]  # paths it creates
    renamed: tuple[str, ...] = ()  # paths it renames a file to


def diff_paths(lines: list[str], start: int, path: Path) -> DiffPaths:
    """Walk the diff from `lines[start]` (a `diff --git` line); every path is checked to stay in the worktree."""
    found: set[str] = set()
    symlinks: set[str] = set()
    created: set[str] = set()
    renamed: set[str] = set()
    index = start
    while index < len(lines):
        line = lines[index]
        if line.startswith("diff --git "):
            before, header = len(found), index
            index = _file_header(lines, index + 1, path, found, symlinks, created, renamed)
            same = _same_name(line)
            if same is not None and len(found) == before:  # mode-only or binary: named only here
                _check_path(same, path, header)
                found.add(same)
        elif line.startswith("@@ "):
            index = _hunk(lines, index, path)
        elif line == "-- ":  # the signature after the last file
            break
        else:
            index += 1
    return DiffPaths(paths=tuple(sorted(found)), new_symlinks=tuple(sorted(symlinks)), new_files=tuple(sorted(created)),
                     renamed=tuple(sorted(renamed)))


def _file_header(lines: list[str], index: int, path: Path, found: set[str], symlinks: set[str],
                 created: set[str], renamed: set[str]) -> int:
    """The extended header of one file's diff, up to its first hunk (or the next file)."""
    new_symlink = new_file = False
    while index < len(lines) and not lines[index].startswith(("diff --git ", "@@ ")):
        line = lines[index]
        if line.startswith("new file mode "):
            new_file, new_symlink = True, line == "new file mode 120000"
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
            found.add(name)
            if line.startswith("rename to "):
                renamed.add(name)
            if line.startswith("+++ "):
                if new_symlink:
                    symlinks.add(name)
                if new_file:
                    created.add(name)
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
    while old > 0 or new > 0:
        if index >= len(lines):
            raise SeriesError(f"{path}:{index}: the patch ends inside a hunk")
        line = lines[index]
        if line.startswith(" ") or line in ("", "\r"):  # an empty context line may lose its space in transit
            old, new = old - 1, new - 1
        elif line.startswith("-"):
            old -= 1
        elif line.startswith("+"):
            new -= 1
        elif not line.startswith("\\"):
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
