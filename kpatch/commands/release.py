"""`kpatch release`: the verified set in dist/ published as a static package index (PEP 503/691/658) with a lock
whose wheels have URLs, on a channel (stable, nightly); `--yank TAG --why TEXT` marks a release yanked (PEP 592)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from kpatch.commands._common import Context, kpatch_command
from kpatch.errors import UsageError


@kpatch_command("release")
@click.option("--to", "to", metavar="DIR|github",
              help="The folder the channels' indexes live in (served as it is: GitHub Pages, a bucket, any web "
                   "server), or github (a GitHub Release and the index's branch). Default: [release] to in "
                   "kpatch.toml.")
@click.option("--channel", default="stable", show_default=True, type=click.Choice(["stable", "nightly"]),
              help="The channel's index the set joins (nightly keeps the last [release] keep sets); with --line L "
                   "the line's own channel, in DIR/L/<channel>/.")
@click.option("--tag", metavar="TAG", help="The release's name (default: v<version of the top package>).")
@click.option("--lock", "lock_path", type=click.Path(dir_okay=False, path_type=Path),
              help="The set to release (default: dist/pylock.toml next to kpatch.toml; dist-LINE/ with --line).")
@click.option("--base-url", metavar="URL", help="The URL DIR is served at (default: [release] url, else DIR's "
              "file:// URL).")
@click.option("--yank", metavar="TAG", help="Mark release TAG yanked instead (installers skip it unless pinned).")
@click.option("--why", metavar="TEXT", help="Why the release is yanked (with --yank).")
def command(ctx: Context, to: str | None, channel: str, tag: str | None, lock_path: Path | None, base_url: str | None,
            yank: str | None, why: str | None) -> int:
    """Publish the verified set into a static package index, with its lock, notes and the one install command."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.wheels import release

    if (yank is None) != (why is None):
        raise UsageError("--yank TAG and --why TEXT go together")
    if yank is not None and (tag is not None or lock_path is not None):
        raise UsageError("--yank takes no --tag or --lock: it marks a release that exists")
    ws = ctx.workspace()
    from kpatch.verify.releasing import destination

    to = destination(ws.stack, to)
    if yank is not None and to == "github":
        from kpatch.wheels import release_github

        assert why is not None
        result = release_github.yank(ws.stack, os.environ, channel, base_url, yank, why)
    elif yank is not None:
        assert why is not None
        result = release.yank(release.target(ws.stack, Path(to), channel, base_url), yank, why)
    else:
        from kpatch.verify.releasing import publish_verified

        release.check_names(channel, tag)
        result = publish_verified(ws, ctx.ui, to, channel, tag, lock_path, base_url)
    if ctx.ui.json_mode:
        ctx.ui.result(result)
    else:
        _show(ctx, result)
    return 0


def _show(ctx: Context, result: object) -> None:
    from kpatch.wheels.release import Published, of_line

    assert isinstance(result, Published)
    ui = ctx.ui
    channel = of_line(result.line, result.channel)
    if result.yanked is not None:
        ui.plain(f"yanked {result.tag} ({result.package} {result.version}) on {channel}: {result.yanked}")
    else:
        ui.plain(f"released {result.package} {result.version} as {result.tag} on {channel}: "
                 f"{result.github or result.folder}")
    if result.yanked is not None and result.pages is not None:  # --to github
        said = f"GitHub release: {result.github} (its notes say it is yanked; its assets stay); " if result.github \
            else ""
        ui.plain(f"{said}index {result.pages}")
    elif result.github is not None:
        sent = f"{len(result.uploaded)} asset(s) uploaded" + (" (a stopped release finished)" if result.resumed
                                                             else "")
        ui.plain(f"GitHub release: {result.github}; {sent}; index {result.pages}")
    for tag in result.left_index:
        ui.plain(f"{tag} left the {channel} index ([release] keep); its files stay")
    ui.plain(f"index: {result.index_url} ({len(result.pages_written)} page(s) written)")
    if result.yanked is not None:
        return
    ui.plain("install it with pip:")
    ui.plain(f"  {result.pip_command}")
    ui.plain("or with uv, exactly the locked set:")
    ui.plain(f"  {result.uv_command}")
