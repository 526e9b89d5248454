"""The verified set published where `--to` says: a folder's index, or GitHub (a release and the index's branch).
One entry for `kpatch release` and for a green night with `[release] nightly = true`."""

from __future__ import annotations

import os
from pathlib import Path

from kpatch.config.model import Stack
from kpatch.errors import UsageError
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace
from kpatch.verify.run import release_verified
from kpatch.wheels import release
from kpatch.wheels.release import Published

GITHUB = "github"


def destination(stack: Stack, given: str | None) -> str:
    """Where `kpatch release` publishes: `--to` (a folder, relative to the current directory, or "github"), else
    `[release] to` in kpatch.toml (a folder relative to kpatch.toml, or "github")."""
    if given is not None:
        return given
    to = stack.release.to
    if to is None:
        raise UsageError("kpatch release needs --to DIR|github, or [release] to = DIR|\"github\" in kpatch.toml")
    return to if to == GITHUB else str(stack.root / to)


def publish_verified(ws: Workspace, ui: UI, to: str, channel: str, tag: str | None, lock_path: Path | None,
                     base_url: str | None) -> Published:
    """Verify the set of `lock_path` (default dist/pylock.toml) and publish it on `channel` of `to` (a folder,
    relative to the current directory, or "github")."""
    lock = (lock_path or ws.dist_dir / "pylock.toml").resolve()
    release.check_names(channel, tag)
    release.check_line(ws.stack.line)  # before the set is read or verified
    if to == GITHUB:
        # imported where used: the GitHub destination's machinery only for a GitHub destination
        from kpatch.wheels import release_github

        return release_verified(ws, ui, lock, lambda notes: release_github.publish(
            ws.stack, os.environ, channel, base_url, lock, tag, notes))
    target = release.target(ws.stack, Path(to), channel, base_url)
    return release_verified(ws, ui, lock, lambda notes: release.publish(target, lock, tag, notes))
