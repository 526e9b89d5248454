"""The built pair against its lock: wheel files, exact pins between the halves, and the torch they share."""

from __future__ import annotations

import os
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kpatch.config import Stack
from kpatch.errors import BuildError
from kpatch.files import NotAFile, open_regular, sha256
from kpatch.verify.model import Check, Status, failed, passed
from kpatch.wheels.lock import Lock
from kpatch.wheels.metadata import WheelMetadata, read_wheel
from kpatch.wheels.record import Wheel

REBUILD = "run 'kpatch build-wheels' to rebuild the set and its lock"


def check_files(lock: Lock, folder: Path) -> list[Check]:
    """Every locked wheel is beside the lock with its locked size and sha256."""
    return [_check_file(wheel, folder) for wheel in lock.wheels]


def _check_file(wheel: Wheel, folder: Path) -> Check:
    """One wheel: only a regular file is opened, and only read (hashed) when its size is the locked one."""
    path = folder / wheel.filename
    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size != wheel.size:
                return failed("wheel", wheel.filename, f"size {size} differs from the lock's {wheel.size}", REBUILD)
            digest = sha256(handle)
    except FileNotFoundError:
        return failed("wheel", wheel.filename, f"missing from {folder}", REBUILD)
    except NotAFile as err:
        return failed("wheel", wheel.filename, str(err), REBUILD)
    except OSError as err:
        return failed("wheel", wheel.filename, f"cannot read {path}: {err.strerror}", REBUILD)
    if digest != wheel.sha256:
        return failed("wheel", wheel.filename, f"sha256 {digest} differs from the lock's {wheel.sha256} "
                      f"(size {size}, locked {wheel.size})", REBUILD)
    return passed("wheel", wheel.filename, f"{size} bytes, sha256 {digest[:16]}… as locked")


def read_locked(lock: Lock, folder: Path) -> tuple[dict[str, WheelMetadata], list[Check]]:
    """METADATA of each locked wheel that is on disk, by upstream; a wheel that is there but unreadable (not a
    zip, no or a bad METADATA) is a failed check. A missing one is left to check_files."""
    out, problems = {}, []
    for wheel in lock.wheels:
        path = folder / wheel.filename
        if not os.path.lexists(path):
            continue
        try:
            out[wheel.upstream] = read_wheel(path)
        except BuildError as err:
            problems.append(failed("wheel", wheel.filename, f"unreadable: {err}", REBUILD))
    return out, problems


def check_pins(lock: Lock, stack: Stack, wheels: dict[str, WheelMetadata]) -> list[Check]:
    """Each wheel's METADATA names it as locked, and requires exactly the locked version of what it requires."""
    locked = {w.upstream: w for w in lock.wheels}
    out = []
    for entry in lock.wheels:
        wheel = wheels.get(entry.upstream)
        if wheel is None:
            continue
        if (canonicalize_name(wheel.package), wheel.version) != (canonicalize_name(entry.package),
                                                                 _version(entry.version)):
            out.append(failed("pin", entry.filename, f"METADATA says {wheel.package} {wheel.version}, the lock "
                              f"{entry.package} {entry.version}", REBUILD))
    for upstream in stack.upstreams:
        mine = locked.get(upstream.name)
        if mine is None or upstream.name not in wheels:
            continue
        for dep in upstream.requires:
            theirs = locked.get(dep)
            if theirs is None:
                out.append(failed("pin", mine.filename, f"the lock has no wheel for {dep}, which "
                                  f"{upstream.name} requires", REBUILD))
                continue
            out.append(_pin(mine, theirs, wheels[upstream.name].requirement(theirs.package)))
    return out


def _pin(mine: Wheel, theirs: Wheel, req: Requirement | None) -> Check:
    subject = f"{mine.package} -> {theirs.package}"
    if req is None:
        return failed("pin", subject, f"{mine.filename} METADATA has no Requires-Dist on {theirs.package}", REBUILD)
    specs = list(req.specifier)
    exact = len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version
    if not exact or _version(specs[0].version) != _version(theirs.version):
        return failed("pin", subject, f"{mine.filename} requires '{req}', the lock has {theirs.package} "
                      f"{theirs.version}: the halves were not built together", REBUILD)
    return passed("pin", subject, f"requires exactly {theirs.package}=={theirs.version}, as locked")


def check_torch(lock: Lock, wheels: dict[str, WheelMetadata]) -> list[Check]:
    """The halves were built against one torch, and every torch requirement admits it."""
    built = {u.name: u.torch for u in lock.upstreams if u.torch}
    fix = "name one torch for the whole set ([set] torch in kpatch.toml) and rebuild: kpatch build-wheels"
    out: list[Check] = []
    if len(set(built.values())) > 1:
        which = ", ".join(f"{name} against {torch}" for name, torch in sorted(built.items()))
        out.append(failed("torch", "build", f"the halves were built against different torch: {which}", fix))
    if lock.set_torch:
        for name, torch in sorted(built.items()):
            if not _admits(f"=={lock.set_torch}", torch):
                out.append(failed("torch", name, f"built against {torch}, the lock's [set] torch is "
                                  f"{lock.set_torch}", fix))
    files = {w.upstream: w.filename for w in lock.wheels}
    for name, wheel in sorted(wheels.items()):
        req = wheel.requirement("torch")
        for other, torch in sorted(built.items()):
            if req is not None and not _admits(str(req.specifier), torch):
                out.append(failed("torch", name, f"{files[name]} requires '{req}', but {other} was built "
                                  f"against torch {torch}", fix))
    if not out:
        found = sorted(set(built.values()))
        out.append(passed("torch", "build", f"every half built against torch {found[0]}") if found else
                   Check("torch", "build", Status.SKIP, "no wheel in the set was built against torch"))
    return out


def check_environment_torch(lock: Lock, wheels: dict[str, WheelMetadata], installed: str | None) -> Check:
    """The environment's torch is the one the set was built against (and satisfies every requirement)."""
    built = sorted({u.torch for u in lock.upstreams if u.torch})
    if not built:
        return Check("torch", "environment", Status.SKIP, "the set was built against no torch")
    if installed is None:
        return failed("torch", "environment", f"torch is not installed; the set was built against {built[0]}",
                      f"pip install torch=={built[0]}")
    specs = [str(req.specifier) for w in wheels.values() if (req := w.requirement("torch")) is not None]
    wrong = [t for t in built if not _admits(f"=={t}", installed)] + [s for s in specs if not _admits(s, installed)]
    if wrong:
        return failed("torch", "environment", f"torch {installed} is installed; the set was built against "
                      f"{', '.join(built)}", f"pip install torch=={built[0]}")
    return passed("torch", "environment", f"torch {installed}, as the set was built against")


def _admits(specifier: str, version: str) -> bool:
    try:
        return SpecifierSet(specifier).contains(Version(version), prereleases=True)
    except (InvalidVersion, InvalidSpecifier):
        return False


def _version(text: str) -> Version | str:
    try:
        return Version(text)
    except InvalidVersion:
        return text
