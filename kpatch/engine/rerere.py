"""Recorded conflict resolutions kept with the stacks (`patches/.rerere/<upstream>/<id>/{preimage,postimage}`).

They travel in the repository, so they are input like any patch: only plain files in plain folders are
read; a symlink anywhere in there is refused (it would copy its target into the mirror).

They belong to their project, and a mirror (its rr-cache) is shared by every project of that URL: git reads and
writes the rr-cache only inside a `session`, which holds the mirror's lock, starts from an empty rr-cache with
this project's resolutions only (patches/.rerere and those of the rebase in progress, `.kpatch/rerere/`), and at
its end keeps in `.kpatch/rerere/` what git recorded there for this project's conflicts. A rebase's commit takes
the resolutions from `.kpatch/rerere/`, never from the rr-cache.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kpatch.errors import SeriesError
from kpatch.files import write_atomic
from kpatch.gitx import Mirror, Repository
from kpatch.project.workspace import Workspace

RERERE = ".rerere"
_ID = re.compile(r"^[0-9a-f]{40}$")
_PART = re.compile(r"^(?:pre|post)image(?:\.\d+)?$")


def folder(resolutions: Path, name: str) -> Path:
    """Upstream `name`'s recorded resolutions in a line's folder of them (`Stack.resolutions`: patches/.rerere)."""
    return resolutions / name


def check(resolutions: Path, name: str) -> None:
    """Refuse symlinks and anything but <sha>/{preimage,postimage} files under patches/.rerere/<name>."""
    kept = folder(resolutions, name)
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


def load(resolutions: Path, name: str, rr_cache: Path) -> set[str]:
    """The resolutions kept in the repository -> the mirror's rr-cache (plain files only); their ids."""
    check(resolutions, name)
    return _copy(folder(resolutions, name), rr_cache)


def _copy(source: Path, target: Path, ids: set[str] | None = None) -> set[str]:
    """Copy each <id>/{preimage,postimage} (of `ids`, when given) from `source` to `target`; the ids copied."""
    copied: set[str] = set()
    if not source.is_dir() or source.is_symlink():
        return copied
    for entry in sorted(source.iterdir()):
        if not _ID.match(entry.name) or not entry.is_dir() or entry.is_symlink() or \
                (ids is not None and entry.name not in ids):
            continue
        for part in sorted(entry.iterdir()):
            if _PART.match(part.name) and part.is_file() and not part.is_symlink():
                (target / entry.name).mkdir(parents=True, exist_ok=True)
                write_atomic(target / entry.name / part.name, part.read_bytes(), durable=False)
                copied.add(entry.name)
    return copied


def conflicts(tree: Repository) -> set[str]:
    """The ids of the conflicts git rerere saw in this worktree's merge in progress (its MERGE_RR)."""
    try:
        listing = (tree.git_dir / "MERGE_RR").read_bytes().decode("utf-8", "replace")
    except OSError:
        return set()
    return {entry.split("\t", 1)[0].split(".", 1)[0] for entry in listing.split("\0") if "\t" in entry}


@contextmanager
def session(ws: Workspace, mirror: Mirror, name: str, tree: Repository) -> Iterator[None]:
    """git am with rerere in `tree` (a worktree of `mirror`), seeing upstream `name`'s resolutions of this project
    only, and keeping in `.kpatch/rerere/<name>` those git used or recorded for it (see the module's note)."""
    own = ws.rerere_dir / name
    with ws.mirror_lock(mirror.path, doing=f"rebase (git am in {tree.path})"):
        rr_cache = mirror.enable_rerere()
        # A person's own `git am --continue` since the last session recorded the resolution of a conflict of ours
        # there: keep it, then start from an empty rr-cache (what is left is another project's, or a kill's).
        pending = {p.name for p in own.iterdir() if _ID.match(p.name)} if own.is_dir() else set()
        _copy(rr_cache, own, pending)
        shutil.rmtree(rr_cache, ignore_errors=True)
        rr_cache.mkdir(parents=True, exist_ok=True)
        ids = load(ws.stack.resolutions, name, rr_cache) | _copy(own, rr_cache)
        try:
            yield
        finally:
            _copy(rr_cache, own, ids | conflicts(tree))


def recorded(resolutions: Path, name: str, rr_cache: Path) -> dict[Path, bytes]:
    """Resolutions in `rr_cache` (the project's `.kpatch/rerere/<name>`) that have a postimage -> their files under
    patches/.rerere/<name>."""
    files: dict[Path, bytes] = {}
    if not rr_cache.is_dir():
        return files
    for entry in sorted(rr_cache.iterdir()):
        if not _ID.match(entry.name) or entry.is_symlink() or not (entry / "postimage").is_file():
            continue
        for source in sorted(entry.iterdir()):
            if _PART.match(source.name) and source.is_file() and not source.is_symlink():
                files[folder(resolutions, name) / entry.name / source.name] = source.read_bytes()
    return files
