"""`kpatch report`: the carry dashboard, a self-contained page (--html DIR) and its numbers (--json)."""

from __future__ import annotations

from pathlib import Path

import click

from kpatch.commands._common import Context, kpatch_command
from kpatch.errors import UsageError


@kpatch_command("report")
@click.option("--html", "html", type=click.Path(path_type=Path), metavar="DIR",
              help="Write the page (index.html, self-contained: nothing is fetched) into DIR.")
@click.option("--history", "history_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="The carry history (default: [dashboard] history in kpatch.toml, else "
              "reports/nightly/history.jsonl next to kpatch.toml).")
def command(ctx: Context, html: Path | None, history_file: Path | None) -> int:
    """The carry dashboard: each patch's class, conflicts, size and age over the nights, how far behind each
    upstream the pins were, the last nightly's stages and tests, the Upstream-PRs."""
    from kpatch.nightly.dashboard import record
    from kpatch.nightly.dashboard.report import report

    if html is None and not ctx.ui.json_mode:
        raise UsageError("give --html DIR (the page) or --json (the numbers), or both")
    title = "kpatch carry dashboard"
    if history_file is None:
        stack = ctx.workspace().stack
        history_file = record.location(stack, stack.root / "reports" / "nightly")
        title += f": {stack.github or stack.root.name}"
    done = report(history_file, html, title)
    if ctx.ui.json_mode:
        ctx.ui.result(done)
    else:
        ctx.ui.note(f"{done.board.nights} night(s), {len(done.board.patches)} patch(es) from {history_file}")
        ctx.ui.plain(str(done.page))
    return 0
