"""`kpatch report`: the carry dashboard, a self-contained page (--html DIR), its numbers (--json), and without
either a summary on the terminal."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from kpatch.commands._common import Context, kpatch_command
from kpatch.output.ui import UI, columns, count, escape

if TYPE_CHECKING:
    from kpatch.dashboard.summary import Dashboard


@kpatch_command("report")
@click.option("--html", "html", type=click.Path(path_type=Path), metavar="DIR",
              help="Write the page (index.html, self-contained: nothing is fetched) into DIR.")
@click.option("--history", "history_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="The carry history (default: [dashboard] history in kpatch.toml, else "
              "reports/nightly/history.jsonl next to kpatch.toml; reports-LINE/ with --line).")
def command(ctx: Context, html: Path | None, history_file: Path | None) -> int:
    """The carry dashboard: each patch's class, conflicts, size and age over the nights, how far behind each
    upstream the pins were, the last nightly's stages and tests, the Upstream-PRs."""
    from kpatch.dashboard import record
    from kpatch.dashboard.report import report

    title = "kpatch carry dashboard"
    if history_file is None:
        ws = ctx.workspace()
        stack = ws.stack
        history_file = record.location(stack, ws.nightly_dir)
        title += f": {stack.github or stack.root.name}"
    done = report(history_file, html, title)
    if ctx.ui.json_mode:
        ctx.ui.result(done)
    elif done.page is not None:
        ctx.ui.note(f"{done.board.nights} night(s), {len(done.board.patches)} patch(es) from {history_file}")
        ctx.ui.plain(str(done.page))
    else:
        show_board(ctx.ui, done.board)
    return 0


def show_board(ui: UI, board: Dashboard) -> None:
    """A bare `kpatch report`: the dashboard's numbers on the terminal (the page: --html DIR)."""
    span = f", {board.first} to {board.last}" if board.first and board.first != board.last else \
        f", {board.last}" if board.last else ""
    ui.line(f"carry history {escape(board.history)}: {count(board.nights, 'night')}, "
            f"{count(len(board.patches), 'patch', 'patches')}{span}")
    night = board.last_night
    if night is not None:
        ui.plain(f"last night {night.date}: {night.outcome}: {night.summary}")
        behind = ", ".join(f"{b.upstream} {count(b.commits, 'commit')}" for b in night.behind)
        if behind:
            ui.plain(f"behind the branch heads: {behind}")
    rows = [["upstream", "patch", "class", "conflicts", "lines", "age", "PRs"]]
    rows += [[row.upstream, row.patch, row.klass, f"{row.conflicts}/{row.nights}",
              "-" if row.lines is None else str(row.lines), "-" if row.age_days is None else f"{row.age_days} d",
              ", ".join(f"{pr} ({row.pr_state})" if row.pr_state else pr for pr in row.prs) or "-"]
             for row in board.patches]
    for line in columns(rows):
        ui.plain(line)
    ui.plain("the page: kpatch report --html DIR; the numbers: kpatch report --json")
