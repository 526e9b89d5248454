"""`kpatch test`: the upstreams' test suites in the build image, against the pair installed from its lock."""

from __future__ import annotations

from pathlib import Path

import click

from kpatch.commands._common import BACKENDS, Context, complete_upstreams, kpatch_command
from kpatch.commands._views import show_test


@kpatch_command("test")
@click.option("--upstream", "names", multiple=True, metavar="NAME", shell_complete=complete_upstreams,
              help="Only NAME's tests (default: every suite).")
@click.option("--device", "devices", multiple=True, metavar="PATH",
              help="Pass this device (HOST[:CONTAINER]) instead of /dev/dri; repeatable.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="Stop a suite after S seconds (default: its [upstream.test] timeout).")
@click.option("--lock", "lock_path", type=click.Path(dir_okay=False),
              help="The pair's lock (default: dist/pylock.toml next to kpatch.toml; dist-LINE/ with --line).")
@click.option("--reports", type=click.Path(file_okay=False),
              help="Where JUnit XML and logs go (default: reports/ next to kpatch.toml).")
@click.option("--backend", type=click.Choice(BACKENDS), default="auto", show_default=True,
              help="auto: where the lock's pair was built (this host, or the image of the Docker engine), said as a "
              "note; docker: in the build image; local: on this host, in a fresh venv of kpatch's own.")
def command(ctx: Context, names: tuple[str, ...], devices: tuple[str, ...], timeout: float | None,
            lock_path: str | None, reports: str | None, backend: str) -> int:
    """Run each upstream's tests in the build image, with the locked pair installed from its lock."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.testing.suites import run_suites

    result = run_suites(ctx.workspace(), ctx.ui, names=names, devices=devices, timeout=timeout,
                        lock=Path(lock_path).resolve() if lock_path else None,
                        reports=Path(reports).resolve() if reports else None, backend=backend)
    code = int(result.exit_code)
    failed = [f"{suite.upstream}: {suite.message}" for suite in result.suites if suite.message]
    if ctx.ui.json_mode:
        ctx.ui.result(result, exit_code=code, message="; ".join(failed) or f"test exited {code}")
    else:
        show_test(ctx.ui, result)
    for line in failed:  # under --json the messages are also in the result
        ctx.ui.error(line, code, final=False)
    return code
