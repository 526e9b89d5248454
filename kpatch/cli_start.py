"""The command line of a newcomer's first minutes: `kpatch demo` and `kpatch doctor` (click parsing and printing)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from kpatch.cli import Context, guarded, kpatch_command, main, output_options
from kpatch.errors import ConfigError, ExitCode
from kpatch.output.ui import UI


@main.command("demo")
@click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path),
              help="Build it in this new or empty folder, and keep it (default: a temp folder).")
@click.option("--keep", is_flag=True, help="Keep the temp folder (default: removed when the demo ends).")
@click.option("--backend", type=click.Choice(["auto", "docker", "local"]), default="auto", show_default=True,
              help="auto: the Docker engine if it answers and has a base image, else this host.")
@click.option("--base-image", metavar="REF", envvar="KPATCH_BASE_IMAGE",
              help="A local image with python3, pip and setuptools to build on (default: $KPATCH_BASE_IMAGE, else "
              "kpatch-test-base:bookworm, else the oneAPI image, if the engine has one; never pulled).")
@click.option("--json", "json_mode", is_flag=True, help="Print the result as JSON.")
@output_options
def demo_(folder: Path | None, keep: bool, backend: str, base_image: str | None, json_mode: bool, quiet: bool,
          verbose: bool) -> None:
    """Run the whole pipeline on example upstreams kpatch builds itself, offline: apply, an upstream that moved,
    rebase (a merged patch dropped, a conflict resolved by a recorded resolution), build-wheels, verify, test."""
    from kpatch.commands import demo as cmd
    from kpatch.printers import print_demo_step, print_demo_summary

    ui = UI(json_mode=json_mode, quiet=quiet, verbose=verbose)
    source = click.get_current_context().get_parameter_source("base_image")
    image = None if backend == "local" and source is click.core.ParameterSource.ENVIRONMENT else base_image

    def body() -> int:
        choice = cmd.choose(backend, image)
        if not ui.json_mode and not ui.quiet:
            ui.line(f"[bold]backend:[/] {choice.backend.value} ({choice.why})")

        def on_step(step: Any, result: Any) -> None:
            if not ui.json_mode and not ui.quiet:  # --quiet: the summary alone
                print_demo_step(ui, step, result)

        result = cmd.demo(folder, ui, choice, keep=keep, on_step=on_step)
        if ui.json_mode:
            ui.json({"ok": result.ok, "log": str(ui.log_file) if ui.log_file else None, **_jsonable(result)})
        else:
            print_demo_summary(ui, result)
        return result.exit_code

    sys.exit(guarded(ui, body))


def _jsonable(value: Any) -> Any:
    from kpatch.output.ui import to_jsonable

    return to_jsonable(value)


@main.command("doctor")
@click.option("--fsck", is_flag=True, help="Also run git fsck on every mirror in the cache (slow on big mirrors).")
@click.option("--backend", type=click.Choice(["docker", "local"]), default="docker", show_default=True,
              help="The backend you build and test with: what it needs must be there.")
@click.option("--base-image", metavar="REF", envvar="KPATCH_BASE_IMAGE",
              help="The base image build-wheels will use (default: $KPATCH_BASE_IMAGE, else Intel oneAPI's).")
@kpatch_command
def doctor_(ctx: Context, fsck: bool, backend: str, base_image: str | None) -> int:
    """Check this machine for the configured stacks: each line OK or what to do; exit 1 if something needed is
    missing."""
    from kpatch.doctor import DoctorOptions, diagnose
    from kpatch.printers import print_doctor
    from kpatch.project.workspace import default_cache_dir
    from kpatch.wheels.pipeline import DEFAULT_BASE_IMAGE

    stack, problem = None, None
    try:
        ws = ctx.workspace()
        stack, cache = ws.stack, ws.cache_dir
    except ConfigError as err:  # doctor is for broken set-ups too: a missing or bad kpatch.toml is a finding
        problem, cache = err, (ctx.options.cache_dir or default_cache_dir()).resolve()
    root = stack.root if stack else Path.cwd()
    options = DoctorOptions(backend=backend, base_image=base_image or DEFAULT_BASE_IMAGE, fsck=fsck, cache_dir=cache,
                            dist=root / "dist", root=root)
    report = diagnose(stack, problem, options)
    if ctx.ui.json_mode:
        ctx.ui.json({"ok": report.ok, **_jsonable(report)})
    else:
        print_doctor(ctx.ui, report)
    return 0 if report.ok else int(ExitCode.CONFLICT)


