"""`kpatch build-wheels`: the kernels wheel first, then vLLM built against exactly it, and the set's lock."""

from __future__ import annotations

from pathlib import Path

import click

from kpatch.commands._common import BACKEND_HELP, BACKENDS, Context, checked_base_image, chosen_backend, kpatch_command
from kpatch.commands._views import show_build


@kpatch_command("build-wheels")
@click.option("--backend", type=click.Choice(BACKENDS), default="auto", show_default=True, help=BACKEND_HELP)
@click.option("--image", metavar="REF", help="Build in this existing image instead of building the Dockerfile.")
@click.option("--base-image", metavar="REF", envvar="KPATCH_BASE_IMAGE",
              help="BASE_IMAGE for the Dockerfile (default: $KPATCH_BASE_IMAGE, else Intel oneAPI's).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Where the wheel pair and pylock.toml go (default: dist/ next to kpatch.toml; dist-LINE/ for "
                   "--line).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="Stop a wheel's build after S seconds (default: its [upstream.build] timeout).")
def command(ctx: Context, backend: str, image: str | None, base_image: str | None, out: Path | None,
            timeout: float | None) -> int:
    """Build the kernels wheel, then vLLM against exactly it; write the pair's pylock.toml."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.verify import gate
    from kpatch.wheels.build import build_wheels

    backend = chosen_backend(ctx.ui, backend, image, base_image)
    base = checked_base_image(backend, image, base_image)
    ws = ctx.workspace()
    result = build_wheels(ws, ctx.ui, backend=backend, image=image, base_image=base, gate=gate.gate,
                          out=out.resolve() if out else ws.dist_dir, timeout=timeout)
    if ctx.ui.json_mode:
        ctx.ui.result(result)
    else:
        show_build(ctx.ui, result)
    return 0
