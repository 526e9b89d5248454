"""The Upstream-PRs in the night's report: tonight's state of each PR a patch named before the rebase, against the
last state a night recorded in the carry history, and a flag on each one closed without a merge."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from kpatch.dashboard import history
from kpatch.dashboard.night import CLOSED_NOTE, PullLine
from kpatch.errors import KpatchError


def last_states(path: Path, prs: Iterable[str]) -> dict[str, str]:
    """The last recorded state of each of `prs` in the history at `path` ({} when there is none, or it cannot be
    read: the night records its warning when it appends)."""
    try:
        return history.last_pull_states(path, prs)
    except KpatchError:
        return {}


def pull_lines(named: Sequence[tuple[str, str, str]], states: dict[str, str] | None,
               before: dict[str, str]) -> tuple[PullLine, ...]:
    """One line per (upstream, patch, PR) named, in series order; none when GitHub was not asked (`states` None)."""
    if states is None:
        return ()
    lines = []
    for upstream, patch, pr in named:
        state, last = states.get(pr, "not found"), before.get(pr)
        lines.append(PullLine(pr=pr, upstream=upstream, patch=patch, state=state, before=last,
                              changed=state != last, note=CLOSED_NOTE if state == "closed unmerged" else ""))
    return tuple(lines)
