"""Recorded conflict resolutions kept with the stacks (`patches/.rerere/<upstream>/<id>/{preimage,postimage}`).

They travel in the repository, so they are input like any patch: only plain files in plain folders are
read; a symlink anywhere in there is refused (it would copy its target into the mirror).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from kpatch.errors import SeriesError

RERERE = ".rerere"
_ID = re.compile(r"^[0-9a-f]{40}$")
_PART = re.compile(r"^(?:pre|post)image(?:\.\d+)?$")


def folder(root: Path, name: str) -> Path:
    return root / "patches" / RERERE / name


def check(root: Path, name: str) -> None:
    """Refuse symlinks and anything but <sha>/{preimage,postimage} files under patches/.rerere/<name>."""
    kept = folder(root, name)
    for path in (kept.parent, kept):
        if path.is_symlink():
            raise SeriesError(f"{path}: recorded resolutions may not be a symlink")
    if not kept.is_dir():
        return
    for entry in sorted(kept.rglob("*")):
        if entry.is_symlink():
            raise SeriesError(f"{entry}: recorded resolutions may not contain symlinks")
        relative = entry.relative_to(kept).parts
        ok = (len(relative) == 1 and _ID.match(relative[0]) and entry.is_dir()) or \
            (len(relative) == 2 and _ID.match(relative[0]) and _PART.match(relative[1]) and entry.is_file())
        if not ok:
            raise SeriesError(f"{entry}: not a recorded resolution (expected <id>/preimage or <id>/postimage)")


def load(root: Path, name: str, rr_cache: Path) -> None:
    """The resolutions kept in the repository -> the mirror's rr-cache (plain files only)."""
    check(root, name)
    kept = folder(root, name)
    if not kept.is_dir():
        return
    for entry in kept.iterdir():
        for source in entry.iterdir():
            if _PART.match(source.name) and source.is_file() and not source.is_symlink():
                (rr_cache / entry.name).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, rr_cache / entry.name / source.name, follow_symlinks=False)


def recorded(root: Path, name: str, rr_cache: Path) -> dict[Path, bytes]:
    """Resolutions in the mirror's rr-cache that have a postimage -> their files under patches/.rerere/<name>."""
    files: dict[Path, bytes] = {}
    if not rr_cache.is_dir():
        return files
    for entry in sorted(rr_cache.iterdir()):
        if not _ID.match(entry.name) or entry.is_symlink() or not (entry / "postimage").is_file():
            continue
        for source in sorted(entry.iterdir()):
            if _PART.match(source.name) and source.is_file() and not source.is_symlink():
                files[folder(root, name) / entry.name / source.name] = source.read_bytes()
    return files
