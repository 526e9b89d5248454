"""What a release line's night flags: main's patches whose Upstream-PR is merged that the line still lacks (the fix
landed upstream on main; the release people run does not carry it yet: backport it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kpatch.config.model import MAIN
from kpatch.lines.matrix import Presence, line_matrix

if TYPE_CHECKING:
    from kpatch.forge.model import PullCheck
    from kpatch.project.workspace import Workspace


@dataclass(frozen=True)
class Lacking:
    """A main patch, its merged Upstream-PR, and the line that lacks it."""

    upstream: str
    patch: str
    pr: str
    merge_commit: str | None
    note: str


def merged_on_main_lacking(ws: Workspace, notes: list[str]) -> list[Lacking]:
    """For a release line's night (none for main): each main patch missing on this line (neither on it, backported,
    nor left out by its `Lines:` trailer) whose Upstream-PR GitHub says is merged. GitHub not answering is a note."""
    from kpatch import config
    from kpatch.forge import hosts

    line = ws.stack.line
    if line == MAIN:
        return []
    matrix = line_matrix(config.load(ws.stack.path))
    column = matrix.lines.index(line)
    wanted = [row for row in matrix.rows if row.origin == MAIN and row.prs
              and row.cells[column].presence is Presence.MISSING]
    if not wanted:
        return []
    check: PullCheck = hosts.check_pulls({pr for row in wanted for pr in row.prs})
    if check.unavailable:
        notes.append(f"main's merged Upstream-PRs line {line} lacks not flagged: {check.unavailable}")
        return []
    found = []
    for row in wanted:
        for pr in row.prs:
            state = check.pulls.get(pr)
            if state is not None and state.merged:
                found.append(Lacking(upstream=row.upstream, patch=row.patch, pr=pr, merge_commit=state.merge_commit,
                                     note=f"merged upstream, on main, missing on line {line}: 'kpatch backport "
                                          f"{row.upstream}/{row.patch} --to {line}'"))
    return found
