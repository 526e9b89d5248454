"""`kpatch rebase`: all stacks onto their upstreams' new heads, one transaction; `--continue` / `--abort`."""

from __future__ import annotations

import click

from kpatch.commands._common import Context, assignments, complete_assignment, kpatch_command
from kpatch.commands._views import show_rebase
from kpatch.errors import ExitCode, UsageError


@kpatch_command("rebase")
@click.option("--onto", multiple=True, metavar="NAME=REF", shell_complete=complete_assignment,
              help="Rebase NAME onto REF (default: its branch head).")
@click.option("--force", is_flag=True, help="Allow a new base that is not a descendant of the pinned one.")
@click.option("--continue", "continue_", is_flag=True, help="Go on after resolving a conflict (git add first).")
@click.option("--abort", is_flag=True, help="Drop the rebase; kpatch.toml and patches/ stay as they were.")
@click.option("--discard", is_flag=True, help="Move worktrees even if they hold commits not exported to patches/.")
def command(ctx: Context, onto: tuple[str, ...], force: bool, continue_: bool, abort: bool, discard: bool) -> int:
    """Move every stack onto its upstream's new head, as one transaction: all stacks or none."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.engine import rebase as engine

    if (continue_ and abort) or ((continue_ or abort) and (onto or force or discard)):
        raise UsageError("--continue and --abort go alone")
    onto_refs = assignments(onto, "--onto")
    ws = ctx.workspace()
    if abort:
        names = engine.abort_rebase(ws, ctx.ui)
        if ctx.ui.json_mode:
            ctx.ui.result({"aborted": names})
        return 0
    if continue_:
        result = engine.continue_rebase(ws, ctx.ui)
    else:
        result = engine.rebase(ws, ctx.ui, onto_refs, force=force, discard=discard)
    # The carry history's modules load once the rebase is done: beside the dropped journal's removal (files.py).
    from kpatch.dashboard.record import record_rebase

    record_rebase(ctx.ui, ws, result)  # the carry history ([dashboard] history, else reports/nightly/)
    code = int(ExitCode.CONFLICT) if result.conflict else 0
    if ctx.ui.json_mode:
        conflict = result.conflict
        ctx.ui.result(result, exit_code=code, message=(conflict and f"patch {conflict.name} conflicts: nothing was "
                      "written to kpatch.toml or patches/") or "")
    else:
        show_rebase(ctx.ui, result, ws.scratch_dir, ws.stack.root)
    return code
