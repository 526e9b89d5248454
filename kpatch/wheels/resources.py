"""The build image's Dockerfile and the in-build script: shipped inside kpatch, overridable by a project.

A project that keeps `docker/Dockerfile` or `scripts/build-wheel.sh` next to its kpatch.toml builds with its
own file instead of kpatch's; both are read as bytes, so either one is part of the cache keys as it is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kpatch.errors import BuildError, UsageError
from kpatch.files import BUILD_FILE, read_input

DOCKERFILE = "docker/Dockerfile"
BUILD_SCRIPT = "scripts/build-wheel.sh"
_PACKAGED = {DOCKERFILE: "Dockerfile", BUILD_SCRIPT: "build-wheel.sh"}


@dataclass(frozen=True)
class Resource:
    """A file a build uses, and where it came from (the project's path, or kpatch's packaged copy)."""

    data: bytes
    origin: str
    overridden: bool


def load(project_root: Path, name: str) -> Resource:
    """`name` (DOCKERFILE or BUILD_SCRIPT) from the project if it has one, else kpatch's own."""
    own = project_root / name
    if os.path.lexists(own):  # a FIFO, device or runaway file there is refused, never passed over or read
        try:
            return Resource(data=read_input(own, BUILD_FILE, UsageError), origin=str(own), overridden=True)
        except OSError as err:
            raise BuildError(f"cannot read {own}: {err.strerror}") from None
    packaged = resources.files("kpatch.wheels").joinpath("data", _PACKAGED[name])
    try:
        return Resource(data=packaged.read_bytes(), origin=f"kpatch:{name}", overridden=False)
    except OSError as err:  # a broken install: say so rather than crash
        raise BuildError(f"kpatch's packaged {name} is missing ({err}): reinstall kpatch") from None
