"""The GPU devices a test container is given: `--device HOST[:CONTAINER]` as asked, else the DRI folder's Intel
render nodes, and the host groups that own them (the unprivileged build user joins them)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from kpatch.errors import UsageError

DRI_ENV = "KPATCH_DRI_DIR"  # where to look for Intel GPU render nodes (default /dev/dri)
INTEL_VENDOR = "0x8086"


@dataclass(frozen=True)
class Devices:
    specs: tuple[str, ...]  # docker device specs, "HOST:CONTAINER:rwm"
    paths: tuple[str, ...]  # the same devices inside the container
    groups: tuple[int, ...]  # the host groups that own them (render, video): the build user joins them
    none_because: str  # when there are none: why, for the message


def find_devices(requested: tuple[str, ...], dri: Path) -> Devices:
    """`--device HOST[:CONTAINER]` as given; otherwise the DRI folder, when it has an Intel GPU render node."""
    if requested:
        specs, paths = [], []
        for value in requested:
            host, _, inside = value.partition(":")
            if not host.startswith("/") or (inside and not inside.startswith("/")):
                raise UsageError(f"--device takes an absolute PATH or HOST:CONTAINER, got {value!r}")
            if os.environ.get("DOCKER_HOST", "unix://").startswith("unix://"):
                _check_device(host)
            specs.append(f"{host}:{inside or host}:rwm")
            paths.append(inside or host)
        return Devices(specs=tuple(specs), paths=tuple(paths), groups=_groups([Path(v.split(":")[0])
                                                                                 for v in requested]),
                       none_because="")
    nodes = sorted(dri.glob("renderD*")) if dri.is_dir() else []
    if not nodes:
        return Devices(specs=(), paths=(), groups=(), none_because=f"no GPU render node in {dri}")
    intel = [n for n in nodes if _vendor(n) in (INTEL_VENDOR, None)]
    if not intel:
        return Devices(specs=(), paths=(), groups=(), none_because=f"no Intel GPU (vendor {INTEL_VENDOR}) in {dri}")
    return Devices(specs=(f"{dri}:/dev/dri:rwm",), paths=("/dev/dri",),
                   groups=_groups([p for p in dri.iterdir()]), none_because="")


def _check_device(host: str) -> None:
    """A local engine is given only a device file (or a folder of them, like /dev/dri): anything else is refused
    here in one line, not by the engine as an API error."""
    try:
        mode = Path(host).stat().st_mode
    except FileNotFoundError:
        raise UsageError(f"--device {host}: no such device on this host") from None
    except OSError as err:
        raise UsageError(f"--device {host}: {err.strerror}") from None
    if not (stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISDIR(mode)):
        raise UsageError(f"--device {host}: not a device file (give a GPU node such as /dev/dri/renderD128, or "
                         "/dev/dri)")


def _vendor(node: Path) -> str | None:
    """The PCI vendor of a DRM node from sysfs, or None when sysfs does not say (then assume Intel)."""
    try:
        return (Path("/sys/class/drm") / node.name / "device" / "vendor").read_text().strip()
    except OSError:
        return None


def _groups(paths: list[Path]) -> tuple[int, ...]:
    """The groups owning these device files (not root): the unprivileged user needs them to open the GPU."""
    gids = set()
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            continue
        if stat.S_ISCHR(info.st_mode) and info.st_gid != 0:
            gids.add(info.st_gid)
    return tuple(sorted(gids))
