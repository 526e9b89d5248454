"""`kpatch export`: regenerate patch files and series from the worktree commits above the base."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from kpatch import git
from kpatch.errors import WorktreeError
from kpatch.plan import Item, resolve_items
from kpatch.series import SERIES, Series, dropped_line, parse_dropped, parse_patch_text
from kpatch.transaction import Transaction
from kpatch.ui import UI
from kpatch.workspace import Workspace


class Change(Enum):
    UNCHANGED = "unchanged"
    MODIFIED = "modified"
    ADDED = "added"
    REMOVED = "removed"


@dataclass(frozen=True)
class FileChange:
    upstream: str
    path: Path
    change: Change


@dataclass(frozen=True)
class ExportResult:
    files: tuple[FileChange, ...]
    written: bool

    @property
    def stale(self) -> tuple[FileChange, ...]:
        return tuple(f for f in self.files if f.change is not Change.UNCHANGED)


def export(ws: Workspace, ui: UI, names: Sequence[str], *, check: bool) -> ExportResult:
    """Compare (and unless `check`, write) every chosen stack's files with what its worktree commits give."""
    for name in names:
        ws.stack.get(name)
    state = ws.read_state()
    planned: list[tuple[Item, dict[Path, bytes], bytes]] = []
    changes: list[FileChange] = []
    for item in resolve_items(ws, ui, {}, fetch=False):
        if names and item.upstream.name not in names:
            continue
        base = state.upstreams[item.upstream.name].base if state and item.upstream.name in state.upstreams \
            else item.base
        files, series_text = _render(item, base)
        planned.append((item, files, series_text))
        changes.extend(_compare(item, files, series_text))
    if not check:  # every stack's files change in one journaled step, as a rebase's do
        txn = Transaction(ws.workdir / ".kpatch-export.journal")
        for item, files, series_text in planned:
            for path, data in files.items():
                txn.write(path, data)
            txn.write(item.upstream.patches / SERIES, series_text)
        for change in changes:
            if change.change is Change.REMOVED:
                txn.delete(change.path)
        txn.commit()
    return ExportResult(files=tuple(changes), written=not check)


def _render(item: Item, base: str | None) -> tuple[dict[Path, bytes], bytes]:
    worktree = item.worktree
    if not worktree.exists():
        raise WorktreeError(f"no worktree for {item.upstream.name} at {worktree}: run 'kpatch apply' first")
    busy = git.operation_in_progress(worktree)
    if busy:
        raise WorktreeError(f"worktree {worktree} is in the middle of a git {busy}; finish it first")
    if base is None:
        raise WorktreeError(f"base of {item.upstream.name} is unknown: run 'kpatch apply' first")
    return render(worktree, base, item.series, item.series.dropped)


def render(worktree: Path, base: str, series: Series, dropped: Mapping[str, str]) -> tuple[dict[Path, bytes], bytes]:
    """The patch files and series text that base..HEAD of `worktree` give, reusing the series' file names."""
    texts = git.format_patches(worktree, base)
    old = list(series.patches)
    files: dict[Path, bytes] = {}
    for index, data in enumerate(texts):
        subject = parse_patch_text(data.decode("utf-8", "replace"), Path("<export>")).subject
        same = next((p for p in old if p.subject == subject and series.folder / p.name not in files), None)
        if index < len(old) and old[index].subject == subject:
            name = old[index].name
        elif same is not None:
            name = same.name
        else:
            name = _fresh_name(index, subject, {p.name for p in old} | {p.name for p in files})
        files[series.folder / name] = data
    header = _header_comments(series.folder / SERIES)
    notes = "".join(dropped_line(name, why) for name, why in dropped.items())
    series_text = header + notes + "".join(f"{p.name}\n" for p in files)
    return files, series_text.encode()


def _compare(item: Item, files: dict[Path, bytes], series_text: bytes) -> list[FileChange]:
    name = item.upstream.name
    changes = []
    for path, data in files.items():
        if not path.is_file():
            changes.append(FileChange(name, path, Change.ADDED))
        else:
            changes.append(FileChange(name, path, Change.UNCHANGED if path.read_bytes() == data else Change.MODIFIED))
    for patch in item.series.patches:
        if patch.path not in files:
            changes.append(FileChange(name, patch.path, Change.REMOVED))
    series = item.upstream.patches / SERIES
    current = series.read_bytes() if series.is_file() else None
    kind = Change.ADDED if current is None else Change.UNCHANGED if current == series_text else Change.MODIFIED
    changes.append(FileChange(name, series, kind))
    return changes


def _fresh_name(index: int, subject: str, taken: set[str]) -> str:
    """format-patch style `NNNN-subject-words.patch`, unique in the folder."""
    slug = "".join(c if c.isascii() and c.isalnum() else "-" for c in subject)
    slug = "-".join(filter(None, slug.split("-")))[:52].rstrip("-.") or "patch"
    name, extra = f"{index + 1:04d}-{slug}.patch", 2
    while name in taken:
        name, extra = f"{index + 1:04d}-{slug}-{extra}.patch", extra + 1
    return name


def _header_comments(series: Path) -> str:
    """The comment lines at the top of an existing series file, kept as they are."""
    if not series.is_file():
        return ""
    lines = []
    for line in series.read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.startswith("#"):
            break
        if not parse_dropped(line):
            lines.append(line)
    return "".join(lines)
