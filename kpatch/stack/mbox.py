"""One patch file: a `git format-patch` mbox, its mail headers, kpatch's trailers and the paths its diff touches."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from kpatch.errors import SeriesError
from kpatch.forge.github.names import PR_PATTERN
from kpatch.stack.diff import diff_paths

MBOX_FIRST = re.compile(r"^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001$")
PATCH_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*\.patch$")
_HEADER = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):\s?(.*)$")
_TRAILER = re.compile(r"^(Upstream-Status|Upstream-PR|Requires):\s*(.*?)\s*$", re.IGNORECASE)
_PR = re.compile(PR_PATTERN)  # GitHub's name rules: no `.`/`..` segment can climb the API path


class UpstreamStatus(Enum):
    """Where a patch stands with its upstream (the `Upstream-Status:` trailer)."""

    PENDING = "pending"
    SUBMITTED = "submitted"
    BACKPORT = "backport"


@dataclass(frozen=True)
class PatchRef:
    """`Requires: <upstream>/<patch-file>`: a patch of another stack this one needs."""

    upstream: str
    patch: str
    line: int

    def __str__(self) -> str:
        return f"{self.upstream}/{self.patch}"


@dataclass(frozen=True, kw_only=True)
class Patch:
    """One mbox patch file as listed in a series."""

    path: Path
    subject: str
    author: str
    date: str
    status: UpstreamStatus | None
    prs: tuple[str, ...]
    requires: tuple[PatchRef, ...]
    paths: tuple[str, ...]  # every path the diff reads or writes
    new_symlinks: tuple[str, ...]  # paths the diff creates as symlinks
    new_files: tuple[str, ...] = ()  # paths the diff creates
    renamed: tuple[str, ...] = ()  # paths the diff renames a file to

    @property
    def name(self) -> str:
        return self.path.name


def is_pr(value: str) -> bool:
    """True for a well-formed `owner/repo#N` (nothing that could reach another GitHub API path)."""
    return _PR.fullmatch(value) is not None


def parse_patch(path: Path) -> Patch:
    """Parse one `git format-patch` mbox file; errors name the file and line."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise SeriesError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise SeriesError(f"{path}: cannot read: {err.strerror}") from None
    return parse_patch_text(text, path)


def parse_patch_text(text: str, path: Path) -> Patch:
    """The parser behind `parse_patch`, on text (also what the fuzz tests drive)."""
    lines = text.split("\n")
    if not MBOX_FIRST.match(lines[0]):
        raise SeriesError(f"{path}:1: not a git format-patch mbox (first line must be 'From <sha> Mon Sep 17 ...')")
    headers, body_start = _headers(lines, path)
    for needed in ("from", "subject", "date"):
        if needed not in headers:
            raise SeriesError(f"{path}: missing {needed.capitalize()}: header")
    diff_start = next((i for i in range(body_start, len(lines)) if lines[i].startswith("diff --git ")), None)
    if diff_start is None:
        raise SeriesError(f"{path}: no 'diff --git' section: the patch changes nothing")
    status, prs, requires = _trailers(lines, body_start, diff_start, path)
    found = diff_paths(lines, diff_start, path)
    subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", headers["subject"])
    return Patch(path=path, subject=subject, author=headers["from"], date=headers["date"], status=status,
                 prs=tuple(prs), requires=tuple(requires), paths=found.paths, new_symlinks=found.new_symlinks,
                 new_files=found.new_files, renamed=found.renamed)


def _headers(lines: list[str], path: Path) -> tuple[dict[str, str], int]:
    headers: dict[str, str] = {}
    key = ""
    for index in range(1, len(lines)):
        line = lines[index]
        if line == "":
            return {k: _decode(v, path, index) for k, v in headers.items()}, index + 1
        if line[0] in " \t" and key:
            headers[key] += " " + line.strip()
            continue
        match = _HEADER.match(line)
        if not match:
            raise SeriesError(f"{path}:{index + 1}: malformed mail header {line[:40]!r}")
        key = match.group(1).lower()
        headers[key] = match.group(2)
    raise SeriesError(f"{path}: mail headers never end (no blank line)")


def _decode(value: str, path: Path, index: int) -> str:
    if "=?" not in value:  # no RFC 2047 encoded word: the email package (slow to import) would return it as it is
        return value
    from email.header import decode_header, make_header

    try:
        return str(make_header(decode_header(value)))
    except (ValueError, LookupError, UnicodeDecodeError) as err:
        raise SeriesError(f"{path}:{index}: undecodable mail header: {err}") from None


def _trailers(
    lines: list[str], start: int, end: int, path: Path
) -> tuple[UpstreamStatus | None, list[str], list[PatchRef]]:
    status: UpstreamStatus | None = None
    prs: list[str] = []
    requires: list[PatchRef] = []
    for index in range(start, end):
        if lines[index] == "---":
            break
        match = _TRAILER.match(lines[index])
        if not match:
            continue
        key, value, where = match.group(1).lower(), match.group(2), f"{path}:{index + 1}"
        if key == "upstream-status":
            try:
                status = UpstreamStatus(value)
            except ValueError:
                raise SeriesError(
                    f"{where}: Upstream-Status must be pending, submitted or backport, not {value!r}") from None
        elif key == "upstream-pr":
            if not is_pr(value):
                raise SeriesError(f"{where}: Upstream-PR must look like owner/repo#123, not {value!r}")
            prs.append(value)
        else:
            upstream, sep, patch = value.partition("/")
            if not sep or not upstream or not PATCH_NAME.match(patch):
                raise SeriesError(f"{where}: Requires must look like <upstream>/<patch-file>, not {value!r}")
            requires.append(PatchRef(upstream=upstream, patch=patch, line=index + 1))
    return status, prs, requires


def added_file(patch: Path, name: str) -> str:
    """The full text of file `name` as a patch creates it (a `new file` diff): the patch is its only copy."""
    lines, new = _file_diff(patch, name)
    if not new:
        raise SeriesError(f"{patch}: {name} is not a new file in this patch")
    return "".join(line[1:] + "\n" for line in lines if line.startswith("+"))


def added_text(patch: Path, name: str) -> str:
    """The lines a patch adds to file `name`, joined (for reading declarations out of a patch)."""
    lines, _ = _file_diff(patch, name)
    return "".join(line[1:] + "\n" for line in lines if line.startswith("+"))


def _file_diff(patch: Path, name: str) -> tuple[list[str], bool]:
    """The hunk lines of `name` in a patch, and whether the patch creates it."""
    lines = patch.read_text(encoding="utf-8").split("\n")
    try:
        start = lines.index(f"diff --git a/{name} b/{name}")
    except ValueError:
        raise SeriesError(f"{patch}: does not touch {name}") from None
    new = False
    hunk: list[str] = []
    in_hunk = False
    for line in lines[start + 1:]:
        if line.startswith("diff --git ") or line == "-- ":
            break
        if not in_hunk:
            new = new or line.startswith("new file mode")
            in_hunk = line.startswith("@@ ")
            continue
        if line.startswith(("+", "-", " ")):
            hunk.append(line)
    return hunk, new
