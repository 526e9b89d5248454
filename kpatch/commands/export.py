"""`kpatch export`: worktree commits -> patch files and series (byte-stable); `--check` writes nothing."""

from __future__ import annotations

import click

from kpatch.commands._common import Context, complete_upstreams, kpatch_command
from kpatch.errors import ExitCode, UsageError
from kpatch.output.ui import columns, count


@kpatch_command("export")
@click.argument("names", nargs=-1, metavar="[NAME]...", shell_complete=complete_upstreams)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when a patch file or series is stale.")
@click.option("--continue", "continue_", is_flag=True, help="Finish an export that was interrupted.")
@click.option("--abort", is_flag=True, help="Undo an export that was interrupted: every file as it was.")
def command(ctx: Context, names: tuple[str, ...], check: bool, continue_: bool, abort: bool) -> int:
    """Regenerate patch files and series from the worktree commits."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.engine import export as engine

    if sum((check, continue_, abort)) > 1 or ((continue_ or abort) and names):
        raise UsageError("--check, --continue and --abort go alone")
    ws = ctx.workspace()
    if abort:
        engine.abort_export(ws, ctx.ui)
        ctx.ui.note("export aborted: patches/ as it was")
        if ctx.ui.json_mode:
            ctx.ui.result({"aborted": True})
        return 0
    result = engine.continue_export(ws, ctx.ui) if continue_ else engine.export(ws, ctx.ui, names, check=check)
    code = int(ExitCode.CONFLICT) if check and result.stale else 0
    if ctx.ui.json_mode:  # written: a file changed
        ctx.ui.result({"written": result.written and bool(result.stale), "files": result.files}, exit_code=code,
                      message=f"{count(len(result.stale), 'file')} stale")
    else:
        for line in columns([[change.change.value, str(change.path)] for change in result.stale]):
            ctx.ui.plain(line)
        ctx.ui.note(f"{count(len(result.stale), 'file')} {'stale' if check else 'written'}")
    return code
