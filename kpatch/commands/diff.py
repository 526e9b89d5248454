"""`kpatch diff [REV]`: what the patch files now do to each patch against the project at REV, as range-diff."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from kpatch.commands._common import Context, kpatch_command
from kpatch.commands._views import review_counts, show_upstream_commits
from kpatch.output.ui import UI, columns, escape

if TYPE_CHECKING:
    from kpatch.engine.diff import DiffResult


@kpatch_command("diff")
@click.argument("revision", required=False, metavar="[REV]")
@click.option("--upstream", "only", metavar="NAME", help="Only NAME's stack.")
@click.option("--stat", is_flag=True, help="One line per patch instead of the interdiffs.")
def command(ctx: Context, revision: str | None, only: str | None, stat: bool) -> int:
    """Show what each patch became since REV of the project (default: the last commit that changed patches/):
    unchanged, changed (with its interdiff), dropped or new, from the patch files alone."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.engine.diff import diff

    result = diff(ctx.workspace(), ctx.ui, revision, only)
    if ctx.ui.json_mode:
        ctx.ui.result(result)
    else:
        show(ctx.ui, result, stat=stat)
    return 0


def show(ui: UI, result: DiffResult, *, stat: bool) -> None:
    ui.note(f"against {result.revision[:12]} ({result.given})")
    for stack in result.stacks:
        old, new = (stack.old_base or "-")[:12], (stack.new_base or "-")[:12]
        ui.line(f"[bold]{escape(stack.upstream)}[/]  {old} -> {new}")
        if stat:
            for line in columns([[p.change.value, p.name + (f" (was {p.old_name})" if p.old_name else ""),
                                  p.subject] for p in stack.patches], indent="  "):
                ui.plain(line)
        else:
            for line in stack.range_diff.splitlines():
                ui.plain(line)
            for patch in stack.patches:
                show_upstream_commits(ui, patch.name, patch.change.value, patch.upstream_commits)
        ui.plain("  " + review_counts(stack))
