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
    upstream the pins were, the last nightly's stages and tests, the Upstream-PRs. On a project with release
    lines: every line that has a carry history, one page with a selector between them (--line: that line alone)."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.dashboard import record
    from kpatch.dashboard.report import report, with_history

    title = "kpatch carry dashboard"
    line = ctx.options.line
    others: list[tuple[str, Path]] = []
    if history_file is None:
        ws = ctx.workspace()
        stack = ws.stack
        history_file = record.location(stack, ws.nightly_dir)
        title += f": {stack.github or stack.root.name}"
        chosen = click.get_current_context().get_parameter_source("line") is click.core.ParameterSource.COMMANDLINE
        if not chosen:
            line, history_file, others = with_history(ctx.stack(), history_file)
        elif line != "main":
            title += f" (line {line})"
    done = report(history_file, html, title, line=line, others=others)
    if ctx.ui.json_mode:
        ctx.ui.result(done)
    elif done.page is not None:
        held = [(done.line, done.board), *((b.line, b.board) for b in done.others)]
        for name, board in held:
            where = f"line {name}: " if len(held) > 1 else ""
            ctx.ui.note(f"{where}{board.nights} night(s), {len(board.patches)} patch(es) from {board.history}")
        ctx.ui.plain(str(done.page))
    else:
        show_board(ctx.ui, done.board, done.line if done.others else None)
        for other in done.others:
            ctx.ui.plain("")
            show_board(ctx.ui, other.board, other.line)
        ctx.ui.plain("the page: kpatch report --html DIR; the numbers: kpatch report --json")
    return 0


def show_board(ui: UI, board: Dashboard, line: str | None = None) -> None:
    """A bare `kpatch report`: the dashboard's numbers on the terminal (the page: --html DIR); `line`: the release
    line it is, when there are several."""
    if line is not None:
        ui.line(f"[bold]line {escape(line)}[/]")
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
    for text in columns(rows):
        ui.plain(text)
