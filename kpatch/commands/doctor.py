"""`kpatch doctor`: what this machine lacks for the configured stacks (the checks are kpatch/doctor.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from kpatch.commands._common import BACKENDS, Context, kpatch_command
from kpatch.errors import ConfigError, ExitCode
from kpatch.output.ui import UI, count, escape

if TYPE_CHECKING:
    from kpatch.doctor import DoctorReport


@kpatch_command("doctor")
@click.option("--fsck", is_flag=True, help="Also run git fsck on every mirror in the cache (slow on big mirrors).")
@click.option("--backend", type=click.Choice(BACKENDS), default="auto", show_default=True,
              help="The backend you build and test with (auto: as build-wheels, test and nightly choose it); what "
                   "it needs must be there.")
@click.option("--base-image", metavar="REF", envvar="KPATCH_BASE_IMAGE",
              help="The base image build-wheels will use (default: $KPATCH_BASE_IMAGE, else Intel oneAPI's).")
def command(ctx: Context, fsck: bool, backend: str, base_image: str | None) -> int:
    """Check this machine for the configured stacks: each line OK or what to do; exit 1 if something needed is
    missing."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.doctor import DoctorOptions, diagnose
    from kpatch.project.places import default_cache_dir
    from kpatch.wheels.pipeline import DEFAULT_BASE_IMAGE

    stack, problem = None, None
    try:
        ws = ctx.workspace()
        stack, cache = ws.stack, ws.cache_dir
    except ConfigError as err:  # doctor is for broken set-ups too: a missing or bad kpatch.toml is a finding
        problem, cache = err, (ctx.options.cache_dir or default_cache_dir()).resolve()
    root = stack.root if stack else Path.cwd()
    backend, why = _which_backend(backend, base_image)
    options = DoctorOptions(backend=backend, backend_why=why, base_image=base_image or DEFAULT_BASE_IMAGE, fsck=fsck,
                            cache_dir=cache,
                            dist=root / "dist", root=root)
    report = diagnose(stack, problem, options)
    code = 0 if report.ok else int(ExitCode.CONFLICT)
    if ctx.ui.json_mode:
        ctx.ui.result(report, exit_code=code, message=_missing(report))
    else:
        show(ctx.ui, report)
    return code


def _which_backend(backend: str, base_image: str | None) -> tuple[str, str]:
    """The backend doctor checks: as given, or for `auto` the one build-wheels would take (`chosen_backend`: a
    --base-image given on the command line asks for the engine, else the engine when one answers, else this host),
    with why."""
    if backend != "auto":
        return backend, f"--backend {backend}"
    source = click.get_current_context().get_parameter_source("base_image")
    if base_image and source is not click.core.ParameterSource.ENVIRONMENT:
        return "docker", "auto: --base-image names an image of the Docker engine"
    from kpatch.container.docker import probe_engine

    engine = probe_engine()
    if engine.problem is None:
        return "docker", f"auto: the Docker engine at {engine.where} answers, version {engine.version}"
    return "local", f"auto: {engine.problem.splitlines()[0]}; --backend docker insists on one"


def _missing(report: DoctorReport) -> str:
    failed = sum(f.level.word == "fail" for f in report.findings)
    return f"{count(failed, 'thing')} needed {'is' if failed == 1 else 'are'} missing"


def show(ui: UI, report: DoctorReport) -> None:
    styles = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}
    for finding in report.findings:
        level = finding.level.word
        ui.line(f"[{styles[level]}]{level:<4}[/] {finding.area:<8} {escape(finding.detail)}")
        if finding.fix and finding.level.word != "ok":
            ui.line(f"              [dim]->[/] {escape(finding.fix)}")
    ui.line("doctor: " + ("[green]ready[/]" if report.ok else f"[bold red]{_missing(report)}[/]"))
