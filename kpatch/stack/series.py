"""A patch stack on disk: the `series` file and the patches it lists, in order; the stack hash."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kpatch.errors import SeriesError
from kpatch.files import PATCH_FILE, SERIES_FILE, read_input
from kpatch.stack.mbox import PATCH_NAME, Patch, parse_patch, read_text

SERIES = "series"
_DROPPED = re.compile(r"^#\s*dropped\s+(\S+\.patch):\s*(.*?)\s*$")


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
        return hash_files((patch.name, read_input(patch.path, PATCH_FILE, SeriesError)) for patch in self.patches)


def hash_files(files: Iterable[tuple[str, bytes]]) -> str:
    """`Series.stack_hash` of patch files given as (name, bytes) in series order."""
    import hashlib  # only builds and rebases hash a stack: the other commands never import it

    digest = hashlib.sha256()
    for name, data in files:
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def load_series(upstream: str, folder: Path) -> Series:
    """Read `folder/series` and every patch it names; a missing folder is an empty stack."""
    if not folder.exists():
        return Series(upstream=upstream, folder=folder, patches=())
    series_file = folder / SERIES
    text = read_text(series_file, SERIES_FILE) if os.path.lexists(series_file) else ""
    names = parse_series_text(text, str(series_file))
    files = sorted(p.name for p in folder.glob("*.patch"))
    for name, number in names.items():  # a series line naming no file first: a typo there is the cause
        path = folder / name
        if path.is_symlink() or not os.path.lexists(path):  # a FIFO or device: parse_patch says so
            what = "is a symlink" if path.is_symlink() else "does not exist" + _nearest(name, files, names)
            raise SeriesError(f"{series_file}:{number}: patch file {name} {what}")
    for name in files:
        if name not in names:
            raise SeriesError(f"{folder / name}: patch file is not listed in {series_file}")
    patches = [parse_patch(folder / name) for name in names]
    return Series(upstream=upstream, folder=folder, patches=tuple(patches), dropped=parse_dropped(text))


def _nearest(name: str, files: list[str], listed: dict[str, int]) -> str:
    """`(the nearest file: 0002-Fix-x.patch)` for a series line that names no file: the folder's file closest to
    it, those no other line names first."""
    import difflib

    unlisted = [f for f in files if f not in listed]
    close = difflib.get_close_matches(name, unlisted, n=1, cutoff=0.5) or \
        difflib.get_close_matches(name, files, n=1, cutoff=0.5)
    return f" (the nearest file: {close[0]})" if close else ""


def parse_dropped(text: str) -> dict[str, str]:
    """`# dropped NAME.patch: why` comment lines: patches a rebase found upstream and removed."""
    return {m.group(1): m.group(2) for m in map(_DROPPED.match, text.splitlines()) if m}


def dropped_line(name: str, why: str) -> str:
    return f"# dropped {name}: {' '.join(why.split())}\n"


def parse_series_text(text: str, where: str) -> dict[str, int]:
    """Series lines -> {file name: line number}, in order; `#` starts a comment."""
    names: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        entry = raw.split("#", 1)[0].strip()
        if not entry:
            continue
        if not PATCH_NAME.match(entry):
            raise SeriesError(f"{where}:{number}: {entry!r} is not a patch file name (NAME.patch, no folders)")
        if entry in names:
            raise SeriesError(f"{where}:{number}: {entry} is listed twice (first on line {names[entry]})")
        names[entry] = number
    return names


def header_comments(text: str) -> str:
    """The comment lines at the top of a series file (not `# dropped` notes), kept as they are."""
    lines = []
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            break
        if not parse_dropped(line):
            lines.append(line)
    return "".join(lines)


def render_series(header: str, dropped: dict[str, str], names: list[str]) -> bytes:
    """A series file's bytes: header comments, `# dropped` notes, then one patch per line."""
    notes = "".join(dropped_line(name, why) for name, why in dropped.items())
    return (header + notes + "".join(f"{n}\n" for n in names)).encode()
