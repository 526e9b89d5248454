"""`kpatch verify`: the pair against its lock, the op contract, and with --installed the live environment."""

from __future__ import annotations

from pathlib import Path

import click

from kpatch.commands._common import Context, kpatch_command
from kpatch.commands._views import show_verify
from kpatch.errors import ExitCode


@kpatch_command("verify")
@click.option("--lock", "lock_path", type=click.Path(dir_okay=False),
              help="The lock to check (default: dist/pylock.toml next to kpatch.toml).")
@click.option("--installed", is_flag=True, help="Also check this environment: versions, RECORD hashes, where it came "
              "from, the stack's patches, and the live dispatcher (in a child Python).")
@click.option("--explain", is_flag=True, help="Also say why each op call the contract leaves out is never reached "
              "on XPU (the platform check, caller or import that keeps it off).")
@click.option("--update-baseline", "reason", metavar="REASON", help="First record today's op-contract findings as "
              "accepted, with REASON (verify-baseline.toml); verify then fails only on new ones.")
def command(ctx: Context, lock_path: str | None, installed: bool, explain: bool, reason: str | None) -> int:
    """Check the built pair against its lock and the op contract between the two patched worktrees."""
    from kpatch.verify.model import Status
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
