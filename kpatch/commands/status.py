"""`kpatch status`: pins, mirror heads, commits behind, each patch and its state. Reads only, takes no lock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kpatch.commands._common import Context, kpatch_command
from kpatch.output.ui import UI, article, columns, count, escape

if TYPE_CHECKING:
    from kpatch.engine.status import StatusResult


@kpatch_command("status")
def command(ctx: Context) -> int:
    """Show each upstream, its pin and mirror, and the state of every patch."""
    from kpatch.engine.status import status

    result = status(ctx.workspace(), ctx.ui)
    if ctx.ui.json_mode:
        ctx.ui.result(result)
    else:
        show(ctx.ui, result)
    return 0


def show(ui: UI, result: StatusResult) -> None:
    for report in result.upstreams:
        behind = "? commits" if report.behind is None else count(report.behind, "commit")
        ui.line(f"[bold]{escape(report.name)}[/]  {escape(report.url)} ({escape(report.branch)})")
        resolved = report.base_commit or "unresolved (no mirror yet)"
        pin = report.base if report.base == report.base_commit else f"{report.base} = {resolved}"
        ui.plain(f"  base {pin}; mirror head {report.mirror_head or '-'}; {behind} behind")
        if result.journal:  # patches/ is half-written until the interrupted write is resumed or undone
            ui.plain(f"  worktree head {report.head or '-'}; patches not read")
            continue
        rows = [["#", "patch", "state", "upstream", "PR", "requires"]]
        rows += [[str(index), patch.name, patch.state.value, patch.upstream_status or "-",
                  ", ".join(patch.upstream_prs) or "-", ", ".join(patch.requires) or "-"]
                 for index, patch in enumerate(report.patches, start=1)]
        for line in columns(rows, indent="  "):
            ui.plain(line)
        if report.unexported:
            ui.plain(f"  {count(report.unexported, 'worktree commit')} not in the patch files: run 'kpatch export'")
    if result.journal:
        ui.plain(f"an interrupted 'kpatch {result.journal}' is pending: run 'kpatch {result.journal} --continue' "
                 "or '--abort'")
    elif result.operation:
        ui.plain(f"{article(result.operation)} is in progress: 'kpatch {result.operation} --continue' or '--abort'")
