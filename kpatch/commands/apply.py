"""`kpatch apply`: every stack onto its base, kernels first; `--continue` / `--abort` after a conflict."""

from __future__ import annotations

import click

from kpatch.commands._common import Context, assignments, complete_assignment, kpatch_command
from kpatch.commands._views import show_apply
from kpatch.errors import ExitCode, UsageError


@kpatch_command("apply")
@click.option("--onto", multiple=True, metavar="NAME=REF", shell_complete=complete_assignment,
              help="Apply NAME's stack onto REF instead of its base.")
@click.option("--continue", "continue_", is_flag=True, help="Go on after resolving a conflict (git add first).")
@click.option("--abort", is_flag=True, help="Put every worktree back as it was before the stopped apply.")
@click.option("--discard", is_flag=True, help="Move worktrees even if they hold commits not exported to patches/.")
def command(ctx: Context, onto: tuple[str, ...], continue_: bool, abort: bool, discard: bool) -> int:
    """Apply every stack onto its upstream, in dependency order."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.engine import apply as engine

    if (continue_ and abort) or ((continue_ or abort) and (onto or discard)):
        raise UsageError("--continue and --abort go alone")
    onto_refs = assignments(onto, "--onto")
    ws = ctx.workspace()
    if abort:
        restored = engine.abort_apply(ws, ctx.ui)
        if ctx.ui.json_mode:
            ctx.ui.result({"restored": restored})
        return 0
    result = engine.continue_apply(ws, ctx.ui) if continue_ else engine.apply(ws, ctx.ui, onto_refs, discard=discard)
    code = int(ExitCode.CONFLICT) if result.conflict else 0
    if ctx.ui.json_mode:
        conflict = result.conflict
        ctx.ui.result(result, exit_code=code, message=(conflict and f"{conflict.upstream}: patch {conflict.patch} "
                      f"does not apply in {conflict.worktree}") or "")
    else:
        show_apply(ctx.ui, result)
    return code
