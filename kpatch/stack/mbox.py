"""One patch file: a `git format-patch` mbox, its mail headers, kpatch's trailers and the paths its diff touches."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from kpatch.errors import SeriesError
from kpatch.files import PATCH_FILE, Bound, read_input
from kpatch.forge.github.names import PR_PATTERN
from kpatch.stack.diff import FileDiff, diff_paths, file_diffs

MBOX_FIRST = re.compile(r"^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001$")
PATCH_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*\.patch$")
_HEADER = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):\s?(.*)$")
_FOLD = re.compile(r"\s*\n[ \t]+")  # a folded header line's break and the next line's indent
_TRAILER = re.compile(r"^(Upstream-Status|Upstream-PR|Requires|Backport-Of|Lines):\s*(.*?)\s*$", re.IGNORECASE)
_LINE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")  # config.NAME_RE: a release line's name
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
    """One mbox patch file as listed in a series: what the file says (headers, trailers, the diff's place). What
    an operation did to it is elsewhere (`project.state.PatchRun`, `engine.reports.PatchReport`)."""

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
    backport_of: tuple[str, ...] = ()  # `Backport-Of: <line>:<patch file>`: the patch of another line it carries
    lines: tuple[str, ...] = ()  # `Lines: main, 0.33`: the only release lines the patch applies to (empty: any)

    @property
    def name(self) -> str:
        return self.path.name


def is_pr(value: str) -> bool:
    """True for a well-formed `owner/repo#N` (nothing that could reach another GitHub API path)."""
    return _PR.fullmatch(value) is not None


def read_text(path: Path, bound: Bound = PATCH_FILE) -> str:
    """A stack file's text (a patch, a series: `bound`): not UTF-8, unreadable, not a regular file or over the
    bound is a one-line SeriesError naming it."""
    try:
        return read_input(path, bound, SeriesError).decode("utf-8")
    except UnicodeDecodeError as err:
        raise SeriesError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise SeriesError(f"{path}: cannot read: {err.strerror}") from None


def parse_patch(path: Path) -> Patch:
    """Parse one `git format-patch` mbox file; errors name the file and line."""
    return parse_patch_text(read_text(path), path)


def read_diff(path: Path) -> list[FileDiff]:
    """The files and hunks of a patch file's diff, read as `parse_patch` reads it."""
    lines = read_text(path).split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("diff --git ")), None)
    return [] if start is None else file_diffs(lines, start, path)


def parse_patch_text(text: str, path: Path) -> Patch:
    """The parser behind `parse_patch`, on text (also what the fuzz tests drive)."""
    lines, headers, diff_start, (status, prs, requires, lines_of) = _message(text, path)
    found = diff_paths(lines, diff_start, path)
    subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", headers["subject"])
    return Patch(path=path, subject=subject, author=headers["from"], date=headers["date"], status=status,
                 prs=tuple(prs), requires=tuple(requires), paths=found.paths, new_symlinks=found.new_symlinks,
                 new_files=found.new_files, renamed=found.renamed, backport_of=lines_of[0], lines=lines_of[1])


@dataclass(frozen=True)
class Head:
    """What a patch file's mail part says (its diff not read): `parse_patch`'s subject, date and PRs."""

    subject: str
    date: str
    prs: tuple[str, ...]


def parse_head(text: str, path: Path) -> Head:
    """A patch's subject, date and PRs read as `parse_patch_text` reads them, its diff not walked (for a file
    kpatch has written and read back already: the carry history's record of it)."""
    _lines, headers, _diff_start, (_status, prs, _requires, _lines_of) = _message(text, path)
    return Head(subject=re.sub(r"^\[PATCH[^\]]*\]\s*", "", headers["subject"]), date=headers["date"],
                prs=tuple(prs))


def _message(text: str, path: Path) -> tuple[list[str], dict[str, str], int, _Trailers]:
    """A patch's lines, its mail headers, where its diff starts and its trailers; errors name the file and line."""
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
    return lines, headers, diff_start, _trailers(lines, body_start, diff_start, path)


def _headers(lines: list[str], path: Path) -> tuple[dict[str, str], int]:
    """The mail headers (lower-case names, unfolded and decoded) and the index of the body's first line.

    The lines are checked first, so a malformed one is named (the email parser takes anything); then the email
    package's parser reads them. compat32: policy.default would also decode, at ten times the cost per patch."""
    end = next((i for i in range(1, len(lines)) if lines[i] == ""), None)
    if end is None:
        raise SeriesError(f"{path}: mail headers never end (no blank line)")
    for index in range(1, end):
        line = lines[index]
        if not (line[0] in " \t" and index > 1) and not _HEADER.match(line):
            raise SeriesError(f"{path}:{index + 1}: malformed mail header {line[:40]!r}")
    from email.parser import HeaderParser  # its default policy is compat32 (email.policy itself is not loaded)

    message = HeaderParser().parsestr("\n".join(lines[1:end]) + "\n\n")
    headers = {key.lower(): _decode(_FOLD.sub(" ", value.strip()), path, end) for key, value in message.items()}
    return headers, end + 1


def _decode(value: str, path: Path, index: int) -> str:
    if "=?" not in value:  # no RFC 2047 encoded word: nothing to decode
        return value
    from email.header import decode_header, make_header

    try:
        return str(make_header(decode_header(value)))
    except (ValueError, LookupError, UnicodeDecodeError) as err:
        raise SeriesError(f"{path}:{index}: undecodable mail header: {err}") from None


_Trailers = tuple[UpstreamStatus | None, list[str], list[PatchRef], tuple[tuple[str, ...], tuple[str, ...]]]


def _trailers(lines: list[str], start: int, end: int, path: Path) -> _Trailers:
    status: UpstreamStatus | None = None
    prs: list[str] = []
    requires: list[PatchRef] = []
    backport_of: list[str] = []
    only: list[str] = []
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
        elif key == "backport-of":
            line, sep, patch = value.partition(":")
            if not sep or not _LINE_NAME.match(line) or not PATCH_NAME.match(patch):
                raise SeriesError(f"{where}: Backport-Of must look like <line>:<patch-file> (main:0003-Fix.patch), "
                                  f"not {value!r}")
            backport_of.append(value)
        elif key == "lines":
            names = [n for n in re.split(r"[,\s]+", value) if n]
            if not names or not all(_LINE_NAME.match(n) for n in names):
                raise SeriesError(f"{where}: Lines must name release lines (main, 0.33), not {value!r}")
            only += names
        else:
            upstream, sep, patch = value.partition("/")
            if not sep or not upstream or not PATCH_NAME.match(patch):
                raise SeriesError(f"{where}: Requires must look like <upstream>/<patch-file>, not {value!r}")
            requires.append(PatchRef(upstream=upstream, patch=patch, line=index + 1))
    return status, prs, requires, (tuple(backport_of), tuple(only))


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
    diff = next((d for d in read_diff(patch) if d.header == f"diff --git a/{name} b/{name}"), None)
    if diff is None:
        raise SeriesError(f"{patch}: does not touch {name}")
    return [line for hunk in diff.hunks for line in hunk if line.startswith(("+", "-", " "))], diff.new_file
