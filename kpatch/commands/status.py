"""`kpatch status`: pins, mirror heads, commits behind, each patch and its state. Reads only, takes no lock."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from kpatch.commands._common import Context, kpatch_command
from kpatch.errors import UsageError
from kpatch.output.ui import UI, article, columns, count, escape

if TYPE_CHECKING:
    from kpatch.engine.status import StatusResult, UpstreamReport
    from kpatch.lines.matrix import LineMatrix


@kpatch_command("status")
@click.option("--prs", "pulls", is_flag=True,
              help="Also ask GitHub each Upstream-PR's state (open or draft with its review and checks, merged, "
                   "closed unmerged), in one query.")
@click.option("--lines", "matrix", is_flag=True,
              help="Show which patch is on which release line: on the line, backported, missing, or not applicable "
                   "(its Lines: trailer).")
def command(ctx: Context, pulls: bool, matrix: bool) -> int:
    """Show each upstream, its pin and mirror, and the state of every patch."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.engine.status import status

    if matrix:
        from kpatch.lines.matrix import line_matrix

        if pulls:
            raise UsageError("--lines and --prs go alone")
        found = line_matrix(ctx.stack("main"))
        if ctx.ui.json_mode:
            ctx.ui.result(found)
        else:
            show_matrix(ctx.ui, found)
        return 0
    result = status(ctx.workspace(), ctx.ui, pulls=pulls)
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
                  ", ".join(_pr(pr, result.pr_states) for pr in patch.prs) or "-",
                  ", ".join(patch.requires) or "-"]
                 for index, patch in enumerate(report.patches, start=1)]
        for line in columns(rows, indent="  "):
            ui.plain(line)
        if report.worktree_base is not None:
            ui.plain(f"  {_elsewhere(report)}")
        if report.unexported:
            ui.plain(f"  {count(report.unexported, 'worktree commit')} not in the patch files: run 'kpatch export'")
    if result.pr_states_unavailable:
        ui.warn(result.pr_states_unavailable)
    if result.journal:
        ui.plain(f"an interrupted 'kpatch {result.journal}' is pending: run 'kpatch {result.journal} --continue' "
                 "or '--abort'")
    elif result.operation:
        ui.plain(f"{article(result.operation)} is in progress: 'kpatch {result.operation} --continue' or '--abort'")


def _elsewhere(report: UpstreamReport) -> str:
    """A worktree not on the base (a rebase left it, with its changes, where it was): where it is, and the
    commands that bring it across."""
    assert report.worktree_base is not None
    tree = escape(str(report.worktree))
    where = f"worktree at the old base {report.worktree_base[:12]}, not on the base"
    if report.modified_files:
        return (f"{where}, with {count(report.modified_files, 'modified file')}: bring it across with 'git -C {tree} "
                f"stash', 'kpatch apply', then 'git -C {tree} stash pop'")
    return f"{where}: bring it across with 'kpatch apply'"


def _pr(pr: str, pulls: dict[str, str] | None) -> str:
    """`owner/repo#N`, with its state when --prs asked for it."""
    return pr if pulls is None or pr not in pulls else f"{pr} ({pulls[pr]})"


def show_matrix(ui: UI, matrix: LineMatrix) -> None:
    """Patch x line, one table per upstream; a cell says how the line carries the patch."""
    for upstream in dict.fromkeys(row.upstream for row in matrix.rows):
        ui.line(f"[bold]{escape(upstream)}[/]")
        rows = [["patch", *matrix.lines]]
        for row in (r for r in matrix.rows if r.upstream == upstream):
            cells = []
            for cell in row.cells:
                shown = cell.presence.value
                if cell.file and cell.file != row.patch:
                    shown += f" ({cell.file})"
                cells.append(shown)
            rows.append([f"{row.origin}:{row.patch}" if row.origin != "main" else row.patch, *cells])
        for line in columns(rows, indent="  "):
            ui.plain(line)
    ui.note(f"{count(matrix.missing, 'patch', 'patches')} missing from a line")
