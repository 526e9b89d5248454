"""`kpatch import`: an empty stack made from a fork branch (--from) or a folder of patches (--series), one step."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from kpatch.commands._common import Context, kpatch_command
from kpatch.errors import UsageError
from kpatch.output.ui import UI, count, escape

if TYPE_CHECKING:
    from kpatch.adopt.branch import ImportResult


@kpatch_command("import")
@click.argument("name", required=False)
@click.option("--from", "source", metavar="URL_OR_PATH@BRANCH", help="A fork's branch: its commits since the base.")
@click.option("--series", "folder", type=click.Path(path_type=Path), metavar="DIR",
              help="A quilt series, or a folder of .patch/.diff files (applied in name order).")
@click.option("--base", "base_ref", metavar="REF", help="The commit the fork started from (default: kpatch.toml's).")
@click.option("--author", metavar="'NAME <EMAIL>'", help="--series: the author of patches whose header has none.")
@click.option("--include-upstream", is_flag=True, help="--from: keep commits already on the upstream branch.")
@click.option("--max-commits", type=click.IntRange(min=1), default=1000, show_default=True,  # adopt.MAX_COMMITS
              help="--from: refuse a branch with more commits than this since the base.")
@click.option("--requires-auto", is_flag=True, help="Write the suggested Requires: trailers (printed otherwise).")
@click.option("--continue", "continue_", is_flag=True, help="Finish an import that was interrupted.")
@click.option("--abort", is_flag=True, help="Undo an import that was interrupted: every file as it was.")
def command(ctx: Context, name: str | None, source: str | None, folder: Path | None, base_ref: str | None,
            author: str | None, include_upstream: bool, max_commits: int, requires_auto: bool, continue_: bool,
            abort: bool) -> int:
    """Make NAME's empty stack from a fork branch (--from) or a folder of patches (--series), as one step."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.adopt import branch as adopt

    if continue_ or abort:
        if (continue_ and abort) or name or source or folder:
            raise UsageError("--continue and --abort go alone")
        ws = ctx.workspace()
        if abort:
            adopt.abort_import(ws, ctx.ui)
            ctx.ui.note("import aborted: patches/ as it was")
            finished = False
        else:
            finished = adopt.continue_import(ws, ctx.ui)
            ctx.ui.note("import finished" if finished else "the interrupted import had written nothing: run it again")
        if ctx.ui.json_mode:
            ctx.ui.result({"aborted": abort, "finished": finished})
        return 0
    if name is None:
        raise UsageError("kpatch import needs the NAME of the upstream whose stack it makes")
    if (source is None) == (folder is None):
        raise UsageError("give one of --from URL_OR_PATH@BRANCH and --series DIR")
    ws = ctx.workspace()
    ws.stack.get(name)  # an unknown NAME is the first thing to say
    if source is not None:
        url, branch = adopt.parse_source(source, name)
        result = adopt.import_branch(ws, ctx.ui, name, url, branch, base_ref=base_ref,
                                     include_upstream=include_upstream, max_commits=max_commits,
                                     requires_auto=requires_auto)
    else:
        from kpatch.adopt import quilt

        result = quilt.import_series(ws, ctx.ui, name, folder.resolve() if folder else Path(), base_ref=base_ref,
                                     author=author, requires_auto=requires_auto)
    if ctx.ui.json_mode:
        ctx.ui.result(result)
    else:
        show(ctx.ui, result, ws.stack.root)
    return 0


def show(ui: UI, result: ImportResult, root: Path) -> None:
    for skipped in result.skipped:
        what = f"commit {skipped.commit[:12]} \"{skipped.subject}\"" if skipped.commit else skipped.subject
        if skipped.why == "upstream":
            ui.plain(f"skipped {escape(what)}: already upstream as {(skipped.upstream_commit or '?')[:12]}")
        else:
            ui.plain(f"skipped {escape(what)}: it changes nothing")
    if result.reworded:  # said once: what git am does to them, then which
        ui.plain(f"git am reads a subject with every run of spaces made one space: "
                 f"{count(len(result.reworded), 'subject')} written as it reads them")
        for reworded in result.reworded:
            what = f"commit {reworded.commit[:12]}" if reworded.commit else reworded.file
            ui.plain(f"  {escape(what)}: {escape(repr(reworded.subject))} -> {escape(repr(reworded.now))}")
    for suggestion in result.suggestions:
        ui.plain(f"{suggestion.patch} calls op {suggestion.op}: add 'Requires: {suggestion.requires}' "
                 "(or import with --requires-auto)")
    for path in result.files:
        ui.plain(f"wrote {path.relative_to(root)}")
    if result.base_pinned:
        ui.plain(f"kpatch.toml: base of {result.name} set to {result.base} (--base)")
    ui.note(f"{result.name}: {count(len(result.files), 'patch', 'patches')} on {result.base[:12]}; "
            "'kpatch apply' puts them in a worktree")
