"""How `kpatch init` and `kpatch import` results read for a person (--json prints the result itself)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kpatch.output.ui import UI, count, escape

if TYPE_CHECKING:
    from kpatch.engine.adopt import ImportResult
    from kpatch.engine.init import InitResult


def print_init(ui: UI, result: InitResult) -> None:
    for pin in result.upstreams:
        base = pin.base if pin.base == pin.base_commit else f"{pin.base} = {pin.base_commit[:12]}"
        ui.plain(f"{pin.name}  {escape(pin.url)} ({escape(pin.branch)}), base {escape(base)}")
    for path in result.written:
        ui.plain(f"wrote {path.relative_to(result.root)}")
    for path in result.extended:
        ui.plain(f"added lines to {path.relative_to(result.root)}")
    names = [pin.name for pin in result.upstreams]
    ui.note(f"next: 'kpatch import {names[0]} --from URL_OR_PATH@BRANCH' (a fork) or '--series DIR' (patches), "
            "then 'kpatch apply'")


def print_import(ui: UI, result: ImportResult, root: Path) -> None:
    for skipped in result.skipped:
        what = f"commit {skipped.commit[:12]} \"{skipped.subject}\"" if skipped.commit else skipped.subject
        if skipped.why == "upstream":
            assert skipped.upstream_commit is not None
            ui.plain(f"skipped {escape(what)}: already upstream as {skipped.upstream_commit[:12]}")
        else:
            ui.plain(f"skipped {escape(what)}: it changes nothing")
    for suggestion in result.suggestions:
        ui.plain(f"{suggestion.patch} calls op {suggestion.op}: add 'Requires: {suggestion.requires}' "
                 "(or import with --requires-auto)")
    for path in result.files:
        ui.plain(f"wrote {path.relative_to(root)}")
    if result.base_pinned:
        ui.plain(f"kpatch.toml: base of {result.name} set to {result.base} (--base)")
    ui.note(f"{result.name}: {count(len(result.files), 'patch', 'patches')} on {result.base[:12]}; "
            "'kpatch apply' puts them in a worktree")
