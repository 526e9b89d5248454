"""The command line of starting and adopting: `kpatch init` and `kpatch import` (click parsing and printing)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kpatch.cli import Context, guarded, kpatch_command, main, output_options
from kpatch.errors import UsageError
from kpatch.output.ui import UI


@main.command("init")
@click.option("--upstream", "upstreams", multiple=True, metavar="NAME=URL@BASE", required=True,
              help="An upstream and the tag or commit its stack goes onto (repeatable; the last '@' ends the URL).")
@click.option("--branch", "branches", multiple=True, metavar="NAME=BRANCH",
              help="The branch NAME follows (default: main, else master, else its only branch).")
@click.option("--requires", multiple=True, metavar="NAME:OTHER", help="NAME's stack goes onto OTHER's (repeatable).")
@click.option("--ci", is_flag=True, help="Also write .github/workflows/nightly.yml, the nightly workflow.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), envvar="KPATCH_CACHE_DIR",
              help="Mirrors and logs (default: $XDG_CACHE_HOME/kpatch).")
@click.option("--json", "json_mode", is_flag=True, help="Print the result as JSON.")
@output_options
def init_(upstreams: tuple[str, ...], branches: tuple[str, ...], requires: tuple[str, ...], ci: bool,
          cache_dir: Path | None, json_mode: bool, quiet: bool, verbose: bool) -> None:
    """Start a project here: kpatch.toml, an empty series per upstream, .gitignore entries; writes only new
    files."""
    from kpatch.printers_adopt import print_init

    ui = UI(json_mode=json_mode, quiet=quiet, verbose=verbose)

    def body() -> int:
        from dataclasses import replace

        from kpatch.config import parse_assignments
        from kpatch.engine import init as engine

        specs = [engine.parse_upstream(value) for value in upstreams]
        chosen = parse_assignments(branches, "--branch")
        unknown = next((n for n in chosen if n not in {s.name for s in specs}), None)
        if unknown:
            raise UsageError(f"--branch {unknown}: no --upstream named {unknown!r}")
        specs = [replace(s, branch=chosen.get(s.name)) for s in specs]
        graph = engine.parse_requires(requires, [s.name for s in specs])
        result = engine.init(Path.cwd(), specs, graph, ui, ci=ci, cache_dir=cache_dir)
        if ui.json_mode:
            ui.json(result)
        else:
            print_init(ui, result)
        return 0

    sys.exit(guarded(ui, body))


@main.command("import")
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
@kpatch_command
def import_(ctx: Context, name: str | None, source: str | None, folder: Path | None, base_ref: str | None,
            author: str | None, include_upstream: bool, max_commits: int, requires_auto: bool, continue_: bool,
            abort: bool) -> int:
    """Make NAME's empty stack from a fork branch (--from) or a folder of patches (--series), as one step."""
    from kpatch.engine import adopt
    from kpatch.printers_adopt import print_import

    if continue_ or abort:
        if continue_ and abort or name or source or folder:
            raise UsageError("--continue and --abort go alone")
        ws = ctx.workspace()
        if abort:
            adopt.abort_import(ws, ctx.ui)
            ctx.ui.note("import aborted: patches/ as it was")
        elif adopt.continue_import(ws, ctx.ui):
            ctx.ui.note("import finished")
        else:
            ctx.ui.note("the interrupted import had written nothing: run it again")
        return 0
    if name is None:
        raise UsageError("kpatch import needs the NAME of the upstream whose stack it makes")
    if (source is None) == (folder is None):
        raise UsageError("give one of --from URL_OR_PATH@BRANCH and --series DIR")
    ws = ctx.workspace()
    ws.stack.get(name)  # an unknown NAME is the first thing to say
    if source is not None:
        url, branch = adopt.parse_source(source)
        result = adopt.import_branch(ws, ctx.ui, name, url, branch, base_ref=base_ref,
                                     include_upstream=include_upstream, max_commits=max_commits,
                                     requires_auto=requires_auto)
    else:
        from kpatch.engine import quilt

        assert folder is not None
        result = quilt.import_series(ws, ctx.ui, name, folder.resolve(), base_ref=base_ref, author=author,
                                     requires_auto=requires_auto)
    if ctx.ui.json_mode:
        ctx.ui.json(result)
    else:
        print_import(ctx.ui, result, ws.stack.root)
    return 0
