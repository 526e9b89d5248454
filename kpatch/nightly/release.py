"""`[release] nightly = true`: a green night publishes its set on the nightly channel of `[release] to` (a folder
relative to kpatch.toml, or github; a `--line L` night on line L's own nightly channel), as `kpatch release
--channel nightly` would. What happened is one line of the night's notes; a release that cannot be made is said
there too and never turns a green night red."""

from __future__ import annotations

from pathlib import Path

from kpatch.config.model import MAIN
from kpatch.errors import KpatchError
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace
from kpatch.wheels import lock as lockfile
from kpatch.wheels import release

CHANNEL = "nightly"


def nightly_tag(lock: Path) -> str:
    """The tag of a night's set: nightly-<version of its top package> (stable's are v<version>)."""
    return "nightly-" + release.default_tag(release.top_wheel(lockfile.read(lock)).version).removeprefix("v")


def release_night(ws: Workspace, ui: UI, lock: Path, dry_run: str | None) -> str:
    """Publish the green night's set (the lock it built) on the nightly channel; the line the report keeps."""
    # imported where used: the release machinery only on a green night with [release] nightly
    from kpatch.verify.releasing import GITHUB, destination, publish_verified

    settings = ws.stack.release
    assert settings.to is not None  # [release] nightly = true needs `to` (checked when kpatch.toml is read)
    to = destination(ws.stack, None)
    tag = nightly_tag(lock)
    # a line's night publishes on that line's own nightly channel
    channel = f"{CHANNEL} channel" + ("" if ws.stack.line == MAIN else f" of line {ws.stack.line}")
    if dry_run is not None and (settings.to == GITHUB or dry_run == "--dry-run"):
        return f"release: would publish {tag} on the {channel} of {settings.to} ({dry_run})"
    try:
        done = publish_verified(ws, ui, to, CHANNEL, tag, lock, None)
    except KpatchError as err:
        ui.warn(f"the green night's set was not released: {err}")
        return f"release: {tag} not published on the {channel} of {settings.to}: {err}"
    gone = f"; {', '.join(done.left_index)} left the index ([release] keep)" if done.left_index else ""
    ui.note(f"released {done.package} {done.version} as {done.tag} on the {channel}: {done.index_url}")
    return (f"release: {done.package} {done.version} published as {done.tag} on the {channel} "
            f"({done.github or done.index_url}){gone}; install: {done.pip_command}")
