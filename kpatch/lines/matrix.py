"""Which patch is on which line (`kpatch status --lines`): one row per patch, by the line it was written on, and a
cell per line: on the line, backported (a patch there carries `Backport-Of:` naming it), missing, or not
applicable (its `Lines:` trailer leaves the line out). Read from the patch files only: no mirror, no worktree."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from kpatch.config import Stack
from kpatch.engine.plan import load_all_series
from kpatch.gitx import Repository, file_patch_ids
from kpatch.stack import Patch


class Presence(StrEnum):
    ON_LINE = "on the line"  # written there, or the same change (patch-id) in its own stack
    BACKPORTED = "backported"  # a patch there says `Backport-Of:` this one
    MISSING = "missing"
    NOT_APPLICABLE = "not applicable"  # its `Lines:` trailer leaves this line out


@dataclass(frozen=True)
class Cell:
    line: str
    presence: Presence
    file: str | None  # the patch file that carries it on this line


@dataclass(frozen=True)
class MatrixRow:
    upstream: str
    patch: str  # its file on the line it was written on
    origin: str  # that line
    subject: str
    prs: tuple[str, ...]
    cells: tuple[Cell, ...]  # one per line, in LineMatrix.lines' order


@dataclass(frozen=True)
class LineMatrix:
    lines: tuple[str, ...]  # main first, then the declared lines in file order
    rows: tuple[MatrixRow, ...]

    @property
    def missing(self) -> int:
        return sum(1 for row in self.rows for cell in row.cells if cell.presence is Presence.MISSING)


@dataclass
class _Row:
    upstream: str
    origin: str
    patch: Patch
    pid: str | None
    cells: dict[str, Cell] = field(default_factory=dict)


def line_matrix(stack: Stack) -> LineMatrix:
    """The matrix of every upstream's patches over every line of the project (`stack` as kpatch.toml loads it)."""
    lines = stack.line_names
    stacks = {line: stack.on_line(line) for line in lines}
    series = {line: load_all_series(s) for line, s in stacks.items()}
    tree = Repository(stack.root)
    rows: list[_Row] = []
    for upstream in stack.upstreams:
        mine: list[_Row] = []
        for line in lines:
            patches = series[line][upstream.name].patches
            ids = file_patch_ids(tree, [p.path for p in patches]) if patches else []
            for patch, pid in zip(patches, ids, strict=True):
                row = _known(mine, line, patch, pid)
                if row is None:
                    row = _Row(upstream=upstream.name, origin=line, patch=patch, pid=pid)
                    mine.append(row)
                backport = any(f"{row.origin}:{row.patch.name}" == value for value in patch.backport_of)
                row.cells[line] = Cell(line=line, presence=Presence.BACKPORTED if backport else Presence.ON_LINE,
                                       file=patch.name)
        rows += mine
    out = []
    for row in rows:
        cells = []
        for line in lines:
            if line in row.cells:
                cells.append(row.cells[line])
            elif row.patch.lines and line not in row.patch.lines:
                cells.append(Cell(line=line, presence=Presence.NOT_APPLICABLE, file=None))
            else:
                cells.append(Cell(line=line, presence=Presence.MISSING, file=None))
        out.append(MatrixRow(upstream=row.upstream, patch=row.patch.name, origin=row.origin,
                             subject=row.patch.subject, prs=row.patch.prs, cells=tuple(cells)))
    return LineMatrix(lines=lines, rows=tuple(out))


def _known(rows: list[_Row], line: str, patch: Patch, pid: str | None) -> _Row | None:
    """The row a line's patch belongs to when it is another line's patch: backported (Backport-Of names it), the
    one it was backported from (its own Backport-Of), or the same change (patch-id)."""
    for row in rows:
        if line in row.cells:
            continue
        if f"{row.origin}:{row.patch.name}" in patch.backport_of or \
                any(f"{line}:{patch.name}" == value for value in row.patch.backport_of) or \
                (pid is not None and pid == row.pid):
            return row
    return None
