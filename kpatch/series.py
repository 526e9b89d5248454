"""A patch stack on disk: the series file, mbox patch files, their trailers and the stack hash."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from email.header import decode_header, make_header
from enum import Enum
from pathlib import Path, PurePosixPath

from kpatch.errors import SeriesError
from kpatch.github.names import PR_PATTERN

SERIES = "series"
_MBOX_FIRST = re.compile(r"^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001$")
_HEADER = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):\s?(.*)$")
_TRAILER = re.compile(r"^(Upstream-Status|Upstream-PR|Requires):\s*(.*?)\s*$", re.IGNORECASE)
_PR = re.compile(PR_PATTERN)  # GitHub's name rules: no `.`/`..` segment can climb the API path
_SERIES_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*\.patch$")
_DROPPED = re.compile(r"^#\s*dropped\s+(\S+\.patch):\s*(.*?)\s*$")
_PATH_LINE = re.compile(r"^(?:--- |\+\+\+ |rename from |rename to |copy from |copy to )(.*)$")


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

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True, kw_only=True)
class Series:
    """An upstream's ordered patches."""

    upstream: str
    folder: Path
    patches: tuple[Patch, ...]
    dropped: dict[str, str] = field(default_factory=dict)  # patch name -> why (`# dropped NAME: why` lines)

    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.patches)

    def stack_hash(self) -> str:
        """sha256 over the patch names and bytes in series order: changes iff the stack does."""
        digest = hashlib.sha256()
        for patch in self.patches:
            data = patch.path.read_bytes()
            digest.update(f"{patch.name}\0{len(data)}\0".encode())
            digest.update(data)
        return digest.hexdigest()


def load_series(upstream: str, folder: Path) -> Series:
    """Read `folder/series` and every patch it names; a missing folder is an empty stack."""
    if not folder.exists():
        return Series(upstream=upstream, folder=folder, patches=())
    series_file = folder / SERIES
    text = series_file.read_text(encoding="utf-8") if series_file.is_file() else ""
    names = parse_series_text(text, str(series_file))
    on_disk = sorted(p.name for p in folder.glob("*.patch"))
    for name in on_disk:
        if name not in names:
            raise SeriesError(f"{folder / name}: patch file is not listed in {series_file}")
    patches = []
    for name, number in names.items():
        path = folder / name
        if not path.is_file():
            raise SeriesError(f"{series_file}:{number}: patch file {name} does not exist")
        patches.append(parse_patch(path))
    return Series(upstream=upstream, folder=folder, patches=tuple(patches), dropped=parse_dropped(text))


def parse_dropped(text: str) -> dict[str, str]:
    """`# dropped NAME.patch: why` comment lines: patches a rebase found upstream and removed."""
    return {m.group(1): m.group(2) for m in map(_DROPPED.match, text.splitlines()) if m}


def dropped_line(name: str, why: str) -> str:
    return f"# dropped {name}: {why}\n"


def parse_series_text(text: str, where: str) -> dict[str, int]:
    """Series lines -> {file name: line number}, in order; `#` starts a comment."""
    names: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        entry = raw.split("#", 1)[0].strip()
        if not entry:
            continue
        if not _SERIES_NAME.match(entry):
            raise SeriesError(f"{where}:{number}: {entry!r} is not a patch file name (NAME.patch, no folders)")
        if entry in names:
            raise SeriesError(f"{where}:{number}: {entry} is listed twice (first on line {names[entry]})")
        names[entry] = number
    return names


def parse_patch(path: Path) -> Patch:
    """Parse one `git format-patch` mbox file; errors name the file and line."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise SeriesError(f"{path}: not UTF-8 text (byte {err.start})") from None
    return parse_patch_text(text, path)


def parse_patch_text(text: str, path: Path) -> Patch:
    """The parser behind `parse_patch`, on text (also what the fuzz tests drive)."""
    lines = text.split("\n")
    if not _MBOX_FIRST.match(lines[0]):
        raise SeriesError(f"{path}:1: not a git format-patch mbox (first line must be 'From <sha> Mon Sep 17 ...')")
    headers, body_start = _headers(lines, path)
    for needed in ("from", "subject", "date"):
        if needed not in headers:
            raise SeriesError(f"{path}: missing {needed.capitalize()}: header")
    diff_start = next((i for i in range(body_start, len(lines)) if lines[i].startswith("diff --git ")), None)
    if diff_start is None:
        raise SeriesError(f"{path}: no 'diff --git' section: the patch changes nothing")
    status, prs, requires = _trailers(lines, body_start, diff_start, path)
    paths, symlinks = _diff_paths(lines, diff_start, path)
    subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", headers["subject"])
    return Patch(
        path=path, subject=subject, author=headers["from"], date=headers["date"], status=status,
        prs=tuple(prs), requires=tuple(requires), paths=tuple(paths), new_symlinks=tuple(symlinks),
    )


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
            if not _PR.fullmatch(value):
                raise SeriesError(f"{where}: Upstream-PR must look like owner/repo#123, not {value!r}")
            prs.append(value)
        else:
            upstream, sep, patch = value.partition("/")
            if not sep or not upstream or not _SERIES_NAME.match(patch):
                raise SeriesError(f"{where}: Requires must look like <upstream>/<patch-file>, not {value!r}")
            requires.append(PatchRef(upstream=upstream, patch=patch, line=index + 1))
    return status, prs, requires


def _diff_paths(lines: list[str], start: int, path: Path) -> tuple[list[str], list[str]]:
    """Every path named in the diff, each checked to stay inside the worktree, and new symlinks."""
    found: list[str] = []
    symlinks: list[str] = []
    new_symlink = False
    for index in range(start, len(lines)):
        line = lines[index]
        if line.startswith("diff --git "):
            new_symlink = False
        elif line == "new file mode 120000":
            new_symlink = True
        match = _PATH_LINE.match(line)
        if not match or match.group(1).rstrip("\t") == "/dev/null":
            continue
        name = _unquote(match.group(1).rstrip("\t"), path, index)
        if line.startswith(("--- ", "+++ ")):
            if not name.startswith(("a/", "b/")):
                raise SeriesError(f"{path}:{index + 1}: path {name!r} lacks the a/ or b/ prefix")
            name = name[2:]
        _check_path(name, path, index)
        found.append(name)
        if new_symlink and line.startswith("+++ "):
            symlinks.append(name)
    return sorted(set(found)), sorted(set(symlinks))


def _unquote(raw: str, path: Path, index: int) -> str:
    if not raw.startswith('"'):
        return raw
    if len(raw) < 2 or not raw.endswith('"'):
        raise SeriesError(f"{path}:{index + 1}: badly quoted path {raw[:60]!r}")
    try:
        escaped = raw[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        return escaped.encode("latin-1").decode("utf-8")
    except (UnicodeDecodeError, UnicodeEncodeError):
        raise SeriesError(f"{path}:{index + 1}: badly quoted path {raw[:60]!r}") from None


def _check_path(name: str, path: Path, index: int) -> None:
    parts = PurePosixPath(name).parts
    if not name or name.startswith("/") or ".." in parts or any(p.lower() == ".git" for p in parts):
        raise SeriesError(f"{path}:{index + 1}: patch writes outside the worktree: {name!r}")


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
