"""The set as installed in this environment: versions, RECORD hashes, which lock it came from, its patches."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kpatch.files import record_digest
from kpatch.output.ui import count
from kpatch.stack import Series
from kpatch.stack.diff import post_images
from kpatch.stack.mbox import read_diff
from kpatch.verify.model import Check, Status, failed, passed
from kpatch.wheels.lock import Lock
from kpatch.wheels.record import Wheel


@dataclass(frozen=True)
class Provenance:
    """Which lock the environment's set was installed from, or that it matches none."""

    lock: Path | None  # None: it matches no lock kpatch knows of
    stacks: tuple[tuple[str, str], ...]  # (upstream, stack hash) of that lock
    detail: str


def distribution(package: str) -> metadata.Distribution | None:
    try:
        return metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return None


def check_versions(lock: Lock, folder: Path) -> tuple[list[Check], dict[str, metadata.Distribution]]:
    """Each locked package is installed at its locked version; one half alone is an error naming the other."""
    found = {w.upstream: d for w in lock.wheels if (d := distribution(w.package)) is not None}
    out: list[Check] = []
    absent = [w for w in lock.wheels if w.upstream not in found]
    if absent and found:
        have = ", ".join(f"{w.package} {found[w.upstream].version}" for w in lock.wheels if w.upstream in found)
        for wheel in absent:
            out.append(failed("installed", wheel.package, f"only one half of the set is installed ({have}); "
                              f"{wheel.package} is missing", _install(folder, wheel)))
    elif absent:
        out.append(failed("installed", "set", f"none of the set is installed ({', '.join(w.package for w in absent)})",
                          f"pip install {' '.join(str(folder / w.filename) for w in lock.wheels)}"))
    mixed = mixed_sets(lock, found)
    if mixed is not None:
        out.append(failed("installed", "set", mixed, "install one set: pip install --force-reinstall --no-deps "
                          + " ".join(str(folder / w.filename) for w in lock.wheels)))
    for wheel in lock.wheels:
        dist = found.get(wheel.upstream)
        if dist is None:
            continue
        if _same(dist.version, wheel.version):
            out.append(passed("installed", wheel.package, f"{dist.version}, as locked"))
        else:
            out.append(failed("installed", wheel.package, f"{dist.version} is installed, the lock has "
                              f"{wheel.version}", _install(folder, wheel)))
    return out, found


def mixed_sets(lock: Lock, found: dict[str, metadata.Distribution]) -> str | None:
    """Why the installed packages are two sets, naming both (None when they are one): a package installed at the
    lock's version beside one that is not (this set and another), or a package whose `==` requirement on another
    of the set is not what is installed (the set it was built in, and the one the other came from)."""
    ours = [w for w in lock.wheels if w.upstream in found and _same(found[w.upstream].version, w.version)]
    other = [w for w in lock.wheels if w.upstream in found and not _same(found[w.upstream].version, w.version)]
    pinned = _broken_pins(lock, found)
    if pinned is None and not (ours and other):
        return None
    parts = []
    if ours and other:
        parts.append(f"{', '.join(f'{w.package} {w.version}' for w in ours)} from this lock's set, "
                     f"{', '.join(f'{w.package} {found[w.upstream].version}' for w in other)} from another set "
                     f"(this lock has {', '.join(f'{w.package} {w.version}' for w in other)})")
    if pinned is not None:
        parts.append(pinned)
    return "the environment mixes two sets: " + "; ".join(parts)


def _broken_pins(lock: Lock, found: dict[str, metadata.Distribution]) -> str | None:
    """The first installed package of the set whose `==` requirement on another installed one is not met."""
    by_name = {canonicalize_name(w.package): w for w in lock.wheels if w.upstream in found}
    for wheel in lock.wheels:
        dist = found.get(wheel.upstream)
        if dist is None:
            continue
        for text in dist.requires or []:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            target = by_name.get(canonicalize_name(req.name))
            pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
            if target is None or not pins or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
                continue
            have = found[target.upstream].version
            if not any(_same(have, pin) for pin in pins):
                return (f"{dist.metadata['Name']} {dist.version} was built in the set with {target.package} "
                        f"{pins[0]}, and {target.package} {have} is installed (from another set)")
    return None


def _install(folder: Path, wheel: Wheel) -> str:
    return f"pip install --force-reinstall --no-deps {folder / wheel.filename}"


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def check_record(wheel: Wheel, dist: metadata.Distribution, folder: Path) -> Check:
    """Every installed file with a RECORD hash still has that hash."""
    bad, count = [], 0
    for file in dist.files or ():
        if file.hash is None or file.hash.mode != "sha256":
            continue
        count += 1
        path = Path(str(file.locate()))
        try:
            data = path.read_bytes()
        except OSError:
            bad.append(f"{file} (missing)")
            continue
        if record_digest(data) != file.hash.value:
            bad.append(str(file))
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        return failed("record", wheel.package, f"{len(bad)} of {count} installed files differ from RECORD: "
                      f"{', '.join(bad[:3])}{more}", _install(folder, wheel))
    return passed("record", wheel.package, f"{count} installed files match their RECORD hashes")


def provenance(lock: Lock, path: Path, found: dict[str, metadata.Distribution]) -> Provenance:
    """The lock the environment came from: its versions, and where the wheels are beside it, their RECORDs."""
    stacks = tuple((u.name, u.stack_hash) for u in lock.upstreams)
    for wheel in lock.wheels:
        dist = found.get(wheel.upstream)
        if dist is None or not _same(dist.version, wheel.version):
            have = dist.version if dist else "nothing"
            return Provenance(None, (), f"not from {path}: {wheel.package} is {have}, the lock has {wheel.version}")
        record = _wheel_record(path.parent / wheel.filename)
        installed = {str(f): f.hash.value for f in dist.files or () if f.hash is not None}
        if record is not None and any(installed.get(name) not in (None, digest) for name, digest in record.items()):
            return Provenance(None, (), f"not from {path}: {wheel.package} {dist.version} has other files than "
                              f"{wheel.filename} (same version, another build)")
    return Provenance(path, stacks, f"installed from {path}")


def _wheel_record(wheel: Path) -> dict[str, str] | None:
    """name -> urlsafe sha256 from a wheel's RECORD, or None when the wheel is not there."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            name = next(n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/RECORD"))
            text = archive.read(name).decode("utf-8")
    except (OSError, zipfile.BadZipFile, StopIteration, UnicodeDecodeError):
        return None
    out = {}
    for row in text.splitlines():
        parts = row.rsplit(",", 2)
        if len(parts) == 3 and parts[1].startswith("sha256="):
            out[parts[0]] = parts[1].removeprefix("sha256=")
    return out


def check_patches(series: Series, dist: metadata.Distribution) -> list[Check]:
    """Each patch of the stack is in the installed files: every hunk's new text is there, line for line."""
    files = {str(f): f for f in dist.files or ()}
    out = []
    for patch in series.patches:
        checked, missing = [], []
        for name, hunks in post_images(read_diff(patch.path)).items():
            if name not in files:
                continue  # compiled, or not shipped in the wheel (csrc/, tests/)
            checked.append(name)
            try:
                have = _lines(Path(str(files[name].locate())).read_text(encoding="utf-8", errors="replace"))
            except OSError:
                missing.append(name)
                continue
            if not all(_contains(have, hunk) for hunk in hunks):
                missing.append(name)
        subject = f"{series.upstream}/{patch.name}"
        if missing:
            out.append(failed("patches", subject, f"not in the installed {dist.metadata['Name']}: "
                              f"{', '.join(missing)}", "install the set built from this stack: kpatch "
                              "build-wheels, then pip install --force-reinstall --no-deps dist/*.whl"))
        elif checked:
            out.append(passed("patches", subject, f"carried ({count(len(checked), 'installed file')} checked)"))
        else:
            out.append(Check("patches", subject, Status.SKIP, "touches no installed Python file (compiled or not "
                             "shipped): the dispatcher check covers compiled code"))
    return out


def _lines(text: str) -> list[str]:
    return [line.rstrip("\r") for line in text.split("\n")]


def _contains(have: list[str], block: list[str]) -> bool:
    if not block:
        return True
    first = block[0]
    return any(have[i:i + len(block)] == block for i, line in enumerate(have) if line == first)


def installed_version(package: str) -> str | None:
    dist = distribution(package)
    return None if dist is None else dist.version


def packages_of(dist: metadata.Distribution) -> tuple[str, ...]:
    """The top-level import packages a distribution installs (from its RECORD)."""
    tops = {str(f).split("/", 1)[0] for f in dist.files or () if "/" in str(f)}
    return tuple(sorted(t for t in tops if not t.endswith((".dist-info", ".data")) and t != "__pycache__"))

