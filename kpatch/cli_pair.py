"""The command line of the wheel pair: build-wheels, verify, test and nightly (click parsing and printing)."""

from __future__ import annotations

from pathlib import Path

import click

from kpatch.cli import Context, kpatch_command, main
from kpatch.errors import ExitCode, UsageError


def _base_image(backend: str, image: str | None, base_image: str | None) -> str | None:
    """--base-image, checked against --image and --backend; $KPATCH_BASE_IMAGE gives way to either of them."""
    source = click.get_current_context().get_parameter_source("base_image")
    if source is click.core.ParameterSource.ENVIRONMENT and (image or backend == "local"):
        return None
    if image and base_image or backend == "local" and (image or base_image):
        raise UsageError("--image and --base-image go alone, and only with --backend docker")
    return base_image


@main.command("build-wheels")
@click.option("--backend", type=click.Choice(["docker", "local"]), default="docker", show_default=True,
              help="docker: the engine (local, or DOCKER_HOST); local: this host (with oneAPI installed).")
@click.option("--image", metavar="REF", help="Build in this existing image instead of building the Dockerfile.")
@click.option("--base-image", metavar="REF", envvar="KPATCH_BASE_IMAGE",
              help="BASE_IMAGE for the Dockerfile (default: $KPATCH_BASE_IMAGE, else Intel oneAPI's).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Where the wheel pair and pylock.toml go (default: dist/ next to kpatch.toml).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="Stop a wheel's build after S seconds (default: its [upstream.build] timeout).")
@kpatch_command
def build_wheels_(ctx: Context, backend: str, image: str | None, base_image: str | None, out: Path | None,
                  timeout: float | None) -> int:
    """Build the kernels wheel, then vLLM against exactly it; write the pair's pylock.toml."""
    from kpatch.commands import build_wheels as cmd

    base_image = _base_image(backend, image, base_image)
    ws = ctx.workspace()
    with ws.writer("build-wheels", ctx.ui):
        result = cmd.build_wheels(ws, ctx.ui, backend=backend, image=image, base_image=base_image,
                                  out=out.resolve() if out else ws.stack.root / "dist", timeout=timeout)
    if ctx.ui.json_mode:
        ctx.ui.json(result)
    else:
        from kpatch.printers import print_build

        print_build(ctx.ui, result)
    return 0


@main.command("verify")
@click.option("--lock", "lock_path", type=click.Path(dir_okay=False),
              help="The lock to check (default: dist/pylock.toml next to kpatch.toml).")
@click.option("--installed", is_flag=True, help="Also check this environment: versions, RECORD hashes, where it came "
              "from, the stack's patches, and the live dispatcher (in a child Python).")
@click.option("--explain", is_flag=True, help="Also say why each op call the contract leaves out is never reached "
              "on XPU (the platform check, caller or import that keeps it off).")
@click.option("--update-baseline", "reason", metavar="REASON", help="First record today's op-contract findings as "
              "accepted, with REASON (verify-baseline.toml); verify then fails only on new ones.")
@kpatch_command
def verify_(ctx: Context, lock_path: str | None, installed: bool, explain: bool, reason: str | None) -> int:
    """Check the built pair against its lock and the op contract between the two patched worktrees."""
    from kpatch.commands import verify as cmd
    from kpatch.output.ui import to_jsonable
    from kpatch.printers import print_verify

    result = cmd.verify(ctx.workspace(), ctx.ui, lock_path=Path(lock_path).resolve() if lock_path else None,
                        installed=installed, update_baseline=reason)
    if ctx.ui.json_mode:
        ctx.ui.json({"ok": result.ok, **to_jsonable(result)})
    else:
        print_verify(ctx.ui, result, explain)
    return 0 if result.ok else int(ExitCode.CONFLICT)


@main.command("test")
@click.option("--upstream", "names", multiple=True, metavar="NAME", help="Only NAME's tests (default: every suite).")
@click.option("--device", "devices", multiple=True, metavar="PATH",
              help="Pass this device (HOST[:CONTAINER]) instead of /dev/dri; repeatable.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="Stop a suite after S seconds (default: its [upstream.test] timeout).")
@click.option("--lock", "lock_path", type=click.Path(dir_okay=False),
              help="The pair's lock (default: dist/pylock.toml next to kpatch.toml).")
@click.option("--reports", type=click.Path(file_okay=False),
              help="Where JUnit XML and logs go (default: reports/ next to kpatch.toml).")
@click.option("--backend", type=click.Choice(["docker", "local"]), default="docker", show_default=True,
              help="docker: in the build image; local: on this host, in a fresh venv of kpatch's own.")
@kpatch_command
def test_(ctx: Context, names: tuple[str, ...], devices: tuple[str, ...], timeout: float | None,
          lock_path: str | None, reports: str | None, backend: str) -> int:
    """Run each upstream's tests in the build image, with the locked pair installed from its lock."""
    from kpatch.commands import test as cmd
    from kpatch.printers import print_test

    result = cmd.test(ctx.workspace(), ctx.ui, names=names, devices=devices, timeout=timeout,
                      lock=Path(lock_path).resolve() if lock_path else None,
                      reports=Path(reports).resolve() if reports else None, backend=backend)
    if ctx.ui.json_mode:
        ctx.ui.json(result)
    else:
        print_test(ctx.ui, result)
    for suite in result.suites:
        if suite.message:  # under --json the messages are also in the result
            ctx.ui.error(f"{suite.upstream}: {suite.message}", int(result.exit_code), final=False)
    return int(result.exit_code)


@main.command("nightly")
@click.option("--dry-run", is_flag=True, help="Run every stage, but push, open, comment on or close nothing on GitHub "
              "(say what would be).")
@click.option("--report", "report_dir", type=click.Path(path_type=Path),
              help="Where report.md and report.json go (default: reports/nightly/ next to kpatch.toml).")
@click.option("--backend", type=click.Choice(["docker", "local"]), default="docker", show_default=True,
              help="Where the pair is built (as build-wheels).")
@click.option("--image", metavar="REF", help="Build in this existing image (as build-wheels).")
@click.option("--base-image", metavar="REF", envvar="KPATCH_BASE_IMAGE",
              help="BASE_IMAGE for the Dockerfile (as build-wheels; default: $KPATCH_BASE_IMAGE).")
@click.option("--device", "devices", multiple=True, metavar="PATH", help="Pass this device to the tests (as test).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="Stop a test suite after S seconds (as test).")
@click.option("--no-publish", is_flag=True, help="Write the report and the refreshed files only; ask GitHub nothing "
              "(a later 'nightly --publish-saved', with the token, reports it).")
@click.option("--publish-saved", is_flag=True, help="Run no stage: report to GitHub the night in --report (run "
              "with --no-publish elsewhere; its refreshed files in this checkout).")
@kpatch_command
def nightly_(ctx: Context, dry_run: bool, report_dir: Path | None, backend: str, image: str | None,
             base_image: str | None, devices: tuple[str, ...], timeout: float | None, no_publish: bool,
             publish_saved: bool) -> int:
    """Rebase onto the upstream heads, build, verify and test the pair; report (markdown, JSON, GitHub)."""
    from kpatch.commands import nightly as cmd
    from kpatch.nightly.run import Options
    from kpatch.nightly.stages import Settings
    from kpatch.output.ui import to_jsonable
    from kpatch.printers import print_nightly, print_nightly_stage

    base_image = _base_image(backend, image, base_image)
    if no_publish and publish_saved:
        raise UsageError("--no-publish and --publish-saved are the two halves of a night: give one")
    ws = ctx.workspace()
    folder = (report_dir or ws.stack.root / "reports" / "nightly").resolve()
    settings = Settings(backend=backend, image=image, base_image=base_image, devices=devices, timeout=timeout)
    options = Options(report_dir=folder, dry_run=dry_run, settings=settings, publish=not no_publish)
    if publish_saved:
        night = cmd.publish_saved(ws, ctx.ui, options)
    else:
        night = cmd.nightly(ws, ctx.ui, options, lambda stage, result: None if ctx.ui.json_mode else
                            print_nightly_stage(ctx.ui, ws.scratch_dir, stage, result))
    report = night.report
    if ctx.ui.json_mode:
        ctx.ui.json({"ok": report.ok, **to_jsonable(report)})
    else:
        print_nightly(ctx.ui, night)
    if report.failure is not None:
        ctx.ui.error(f"nightly failed at {report.failure.stage.value}: {report.failure.message}", report.exit_code,
                     final=False)
    return report.exit_code
