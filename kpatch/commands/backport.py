"""`kpatch backport PATCH... --to LINE`: patches of one line onto another's stacks; `--continue` / `--abort`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from kpatch.commands._common import Context, complete_lines, complete_patches, kpatch_command
from kpatch.errors import ExitCode, UsageError
from kpatch.output.ui import UI, columns, count

if TYPE_CHECKING:
    from kpatch.lines.backport import BackportResult


@kpatch_command("backport")
@click.argument("patches", nargs=-1, metavar="PATCH...", shell_complete=complete_patches)
@click.option("--to", "to_line", metavar="LINE", required=True, shell_complete=complete_lines,
              help="The release line the patches go onto.")
@click.option("--from", "from_line", metavar="LINE", default="main", show_default=True,
              shell_complete=complete_lines, help="The line the patches come from.")
@click.option("--continue", "continue_", is_flag=True, help="Go on after resolving a conflict (git add first).")
@click.option("--abort", is_flag=True, help="Drop the backport; the line's patch folders stay as they were.")
def command(ctx: Context, patches: tuple[str, ...], to_line: str, from_line: str, continue_: bool,
            abort: bool) -> int:
    """Apply patches of one line (UPSTREAM/FILE.patch) onto another line's stacks, each with a 3-way merge."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.lines import backport as engine

    if (continue_ and abort) or ((continue_ or abort) and patches):
        raise UsageError("--continue and --abort go alone (with --to)")
    if not (continue_ or abort or patches):
        raise UsageError("name the patches to backport (UPSTREAM/FILE.patch), or give --continue or --abort")
    ws = ctx.workspace(to_line)
    if abort:
        names = engine.abort_backport(ws, ctx.ui)
        if ctx.ui.json_mode:
            ctx.ui.result({"aborted": names})
        return 0
    source = ctx.stack(from_line)
    result = engine.continue_backport(ws, ctx.ui, source) if continue_ else \
        engine.backport(ws, ctx.ui, source, patches)
    code = int(ExitCode.CONFLICT) if result.conflict else 0
    if ctx.ui.json_mode:
        conflict = result.conflict
        ctx.ui.result(result, exit_code=code, message=(conflict and f"{conflict.upstream}/{conflict.patch} conflicts "
                      f"on line {result.target}: nothing was written to its patch folders") or "")
    else:
        show(ctx.ui, result)
    return code


def show(ui: UI, result: BackportResult) -> None:
    rows = [["patch", "outcome", "why"]]
    rows += [[f"{p.upstream}/{p.patch}", p.outcome.value, p.why] for p in result.patches]
    for line in columns(rows):
        ui.plain(line)
    conflict = result.conflict
    if conflict is not None:
        culprit = conflict.culprit
        blame = f"; it stopped applying at {culprit.sha[:12]} \"{culprit.subject}\" on line " \
            f"{result.target}'s history" if culprit else ""
        where = f" in {result.worktree}" if result.worktree else ""
        ui.plain(f"{conflict.upstream}/{conflict.patch} conflicts on line {result.target}{blame}")
        ui.plain(f"resolve it{where}, git add, then 'kpatch backport --continue --to {result.target}' "
                 f"(or --abort)")
    elif result.committed:
        done = sum(1 for p in result.patches if p.outcome.value == "backported")
        ui.note(f"{count(done, 'patch', 'patches')} backported onto line {result.target}: run 'kpatch apply --line "
                f"{result.target}' to bring its worktrees up")
