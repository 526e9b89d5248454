"""`kpatch init`: a new project in the current folder (kpatch.toml, an empty series per upstream, .gitignore)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kpatch.commands._common import KpatchCommand, assignments, make_ui, output_options
from kpatch.errors import UsageError
from kpatch.output.ui import UI, escape

if TYPE_CHECKING:
    from kpatch.adopt.init import InitResult


@click.command("init", cls=KpatchCommand)
@click.option("--upstream", "upstreams", multiple=True, metavar="NAME=URL@BASE", required=True,
              help="An upstream and the tag or commit its stack goes onto (repeatable; the last '@' ends the URL).")
@click.option("--branch", "branches", multiple=True, metavar="NAME=BRANCH",
              help="The branch NAME follows (default: main, else master, else its only branch).")
@click.option("--requires", multiple=True, metavar="NAME:OTHER", help="NAME's stack goes onto OTHER's (repeatable).")
@click.option("--line", "lines", multiple=True, metavar="LINE:NAME=BRANCH@BASE",
              help="Where upstream NAME stands on release line LINE (repeatable; a line places every upstream).")
@click.option("--ci", is_flag=True, help="Also write the nightly workflows: .github/workflows/nightly.yml and the "
              "nightly-line.yml it runs per release line.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), envvar="KPATCH_CACHE_DIR",
              help="Mirrors and logs (default: $XDG_CACHE_HOME/kpatch).")
@output_options
def command(upstreams: tuple[str, ...], branches: tuple[str, ...], requires: tuple[str, ...], lines: tuple[str, ...],
            ci: bool, cache_dir: Path | None, json_mode: bool, quiet: bool, verbose: bool) -> int:
    """Start a project here: kpatch.toml, an empty series per upstream, .gitignore entries; writes only new
    files."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.adopt import init as adopting

    ui = make_ui("init", json_mode, quiet, verbose)
    specs = [adopting.parse_upstream(value) for value in upstreams]
    chosen = assignments(branches, "--branch")
    unknown = next((n for n in chosen if n not in {s.name for s in specs}), None)
    if unknown:
        raise UsageError(f"--branch {unknown}: no --upstream named {unknown!r}")
    specs = [replace(s, branch=chosen.get(s.name)) for s in specs]
    graph = adopting.parse_requires(requires, [s.name for s in specs])
    result = adopting.init(Path.cwd(), specs, graph, ui, ci=ci, cache_dir=cache_dir,
                           lines=[adopting.parse_line(value) for value in lines])
    if ui.json_mode:
        ui.result(result)
    else:
        show(ui, result)
    return 0


def show(ui: UI, result: InitResult) -> None:
    for pin in result.upstreams:
        base = pin.base if pin.base == pin.base_commit else f"{pin.base} = {pin.base_commit[:12]}"
        ui.plain(f"{pin.name}  {escape(pin.url)} ({escape(pin.branch)}), base {escape(base)}")
    for path in result.written:
        ui.plain(f"wrote {path.relative_to(result.root)}")
    for path in result.extended:
        ui.plain(f"added lines to {path.relative_to(result.root)}")
    names = [pin.name for pin in result.upstreams]
    ui.note(f"next: 'kpatch import {names[0]} --from URL_OR_PATH@BRANCH' (a fork) or '--series DIR' (patches), "
            "then 'kpatch apply'")
