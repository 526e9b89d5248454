"""`kpatch verify`: the pair against its lock, the op contract, and with --installed the live environment; with
--wheel twice, the op contract of any released pair (wheels, sdists, folders, requirements), no project needed."""

from __future__ import annotations

from pathlib import Path

import click

from kpatch.commands._common import Context, kpatch_command
from kpatch.commands._views import show_verify
from kpatch.errors import ExitCode, UsageError


@kpatch_command("verify")
@click.option("--lock", "lock_path", type=click.Path(dir_okay=False),
              help="The lock to check (default: dist/pylock.toml next to kpatch.toml; dist-LINE/ with --line).")
@click.option("--installed", is_flag=True, help="Also check this environment: versions, RECORD hashes, where it came "
              "from, the stack's patches, and the live dispatcher (in a child Python).")
@click.option("--explain", is_flag=True, help="Also say why each op call the contract leaves out is never reached "
              "on XPU (the platform check, caller or import that keeps it off).")
@click.option("--update-baseline", "reason", metavar="REASON", help="First record today's op-contract findings as "
              "accepted, with REASON (verify-baseline.toml); verify then fails only on new ones.")
@click.option("--wheel", "wheels", multiple=True, metavar="KERNELS|APP", help="Twice, kernels first: check the op "
              "contract of two released halves instead of the project's pair; each a wheel, an sdist, a folder, or "
              "a requirement (vllm_xpu_kernels==0.1.15.4: downloaded from the package index, sha256 checked).")
@click.option("--python", "python", metavar="PATH", help="With --wheel NAME: read the distribution NAME installed "
              "in the environment of this Python.")
def command(ctx: Context, lock_path: str | None, installed: bool, explain: bool, reason: str | None,
            wheels: tuple[str, ...], python: str | None) -> int:
    """Check the built pair against its lock and the op contract between the two patched worktrees."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.verify.model import Status

    if wheels or python:
        if len(wheels) != 2:
            raise UsageError(f"--wheel takes two halves, the kernels' then the application's (got {len(wheels)})")
        if lock_path or installed or reason is not None:
            raise UsageError("--wheel checks two released halves: --lock, --installed and --update-baseline are "
                             "for the project's own pair")
        from kpatch.project.places import default_cache_dir
        from kpatch.verify.released import verify_released

        cache = (ctx.options.cache_dir or default_cache_dir()) / "releases"
        result = verify_released(ctx.ui, wheels[0], wheels[1], python=python, cache=cache)
    else:
        from kpatch.verify.run import verify

        result = verify(ctx.workspace(), ctx.ui, lock_path=Path(lock_path).resolve() if lock_path else None,
                        installed=installed, update_baseline=reason)
    code = 0 if result.ok else int(ExitCode.CONFLICT)
    if ctx.ui.json_mode:
        failed = [c for c in result.checks if c.status is Status.FAIL]
        ctx.ui.result(result, exit_code=code, message=(failed and f"verify failed: {len(failed)} check(s), first "
                      f"{failed[0].area} {failed[0].subject}: {failed[0].detail}") or "")
    else:
        show_verify(ctx.ui, result, explain)
    return code
