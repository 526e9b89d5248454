"""Wheel files: METADATA read with `packaging.metadata`, and an exact requirement written into a built wheel."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from packaging.metadata import InvalidMetadata, Metadata
from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from kpatch.errors import BuildError
from kpatch.files import NotAFile, open_regular, record_digest


@dataclass(frozen=True)
class WheelMetadata:
    """What a wheel file's METADATA (and its name's tags) say; the wheel itself travels as `record.Wheel`."""

    package: str
    version: Version
    requires: tuple[Requirement, ...]
    pure: bool  # tagged py*-none-any: no compiled code, so not bound to the torch it was built beside

    def requirement(self, package: str) -> Requirement | None:
        """Its Requires-Dist on `package`, if any."""
        key = canonicalize_name(package)
        return next((r for r in self.requires if canonicalize_name(r.name) == key), None)


METADATA_LIMIT = 8 << 20  # bytes of METADATA kpatch reads; a larger one is refused before it is read


def read_wheel(path: Path) -> WheelMetadata:
    """Name, version, Requires-Dist and purity of a wheel; a broken wheel is one BuildError line.

    Only a regular file is opened, and only its METADATA member is read (after its size is checked)."""
    name, text = _read_member(path)
    meta = _parse(path.name, name, text)
    return WheelMetadata(package=meta.name, version=meta.version, requires=tuple(meta.requires_dist or ()),
                         pure=is_pure(path.name))


def core_metadata(path: Path) -> bytes:
    """A wheel's METADATA as it is in the wheel: what a PEP 658 `.metadata` file beside it holds."""
    return _read_member(path)[1].encode("utf-8")


def _read_member(path: Path) -> tuple[str, str]:
    """The METADATA member's name and text of the wheel at `path` (a regular file only); a broken wheel is one
    BuildError line."""
    try:
        with open_regular(path) as handle:
            return _metadata_member(path.name, handle)
    except NotAFile as err:
        raise BuildError(f"cannot read wheel {err}") from None
    except OSError as err:
        raise BuildError(f"cannot read wheel {path}: {err.strerror}") from None


def is_pure(filename: str) -> bool:
    """Whether a wheel's tags say it holds no compiled code (py*-none-any)."""
    return all(t.abi == "none" and t.platform == "any" for t in _tags(filename))


def require_exactly(data: bytes, filename: str, requirement: str) -> bytes:
    """The wheel `data` with its Requires-Dist on the requirement's package replaced by `requirement`.

    METADATA and its RECORD line change; every other member is copied as it was, in the same order.
    """
    pin = Requirement(requirement)
    member, text = _metadata_member(filename, data)
    head, sep, body = text.partition("\n\n")
    lines = [line for line in head.rstrip("\n").split("\n") if not _requires(line, pin.name)]
    last = max((i for i, line in enumerate(lines) if line.startswith("Requires-Dist:")), default=len(lines) - 1)
    lines.insert(last + 1, f"Requires-Dist: {pin}")
    new_meta = ("\n".join(lines) + ("\n\n" + body if sep else "\n")).encode("utf-8")
    written = _parse(filename, member, new_meta.decode("utf-8"))
    if pin not in (written.requires_dist or []):  # the headers must still end where they ended
        raise BuildError(f"{filename}: could not add Requires-Dist: {pin} to {member}")
    record_name = member.rsplit("/", 1)[0] + "/RECORD"
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            content = source.read(info)
            if info.filename == member:
                content = new_meta
            elif info.filename == record_name:
                content = _record(content, member, new_meta)
            target.writestr(info, content)
    return out.getvalue()


def _requires(line: str, package: str) -> bool:
    if not line.startswith("Requires-Dist:"):
        return False
    try:
        return canonicalize_name(Requirement(line.partition(":")[2].strip()).name) == canonicalize_name(package)
    except InvalidRequirement:
        return False


def _record(content: bytes, member: str, new_meta: bytes) -> bytes:
    digest = record_digest(new_meta)
    lines = content.decode("utf-8").splitlines()
    out = [f"{member},sha256={digest},{len(new_meta)}" if line.split(",", 1)[0] == member else line
           for line in lines]
    return ("\n".join(out) + "\n").encode("utf-8")


def _tags(filename: str) -> frozenset[Tag]:
    try:
        return parse_wheel_filename(filename)[3]
    except InvalidWheelFilename as err:
        raise BuildError(f"{filename}: not a wheel file name ({err})") from None


def _metadata_member(filename: str, source: bytes | BinaryIO) -> tuple[str, str]:
    """The one top-level `*.dist-info/METADATA` of a wheel (its bytes or an open file), as text."""
    try:
        with zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source) as archive:
            names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if len(names) != 1:
                found = "no" if not names else f"{len(names)}"
                raise BuildError(f"{filename}: {found} .dist-info/METADATA in the wheel (expected one)")
            size = archive.getinfo(names[0]).file_size
            if size > METADATA_LIMIT:
                raise BuildError(f"{filename}: {names[0]} is {size} bytes (kpatch reads at most {METADATA_LIMIT})")
            with archive.open(names[0]) as member:
                raw = member.read(METADATA_LIMIT + 1)
            if len(raw) > METADATA_LIMIT:
                raise BuildError(f"{filename}: {names[0]} is over {METADATA_LIMIT} bytes")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError,
            RuntimeError) as err:  # NotImplementedError: a compression method zipfile lacks; RuntimeError: encrypted
        raise BuildError(f"{filename}: not a readable wheel ({err})") from None
    try:
        return names[0], raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BuildError(f"{filename}: {names[0]} is not UTF-8") from None


def _parse(filename: str, member: str, text: str) -> Metadata:
    try:
        return Metadata.from_email(text, validate=True)
    except (InvalidMetadata, ExceptionGroup) as err:
        problems = err.exceptions if isinstance(err, ExceptionGroup) else (err,)
        raise BuildError(f"{filename}: bad {member}: {'; '.join(str(p) for p in problems)}") from None
