"""Exact pins written into an upstream's requirement files before its source goes into the build.

Two kinds: the wheels of the upstreams it requires (`name==<the version kpatch built>`: replaced where the
file names the package, appended to a requirements file otherwise) and the set's torch (replaced only where
the file already requires torch: a build that never asked for torch is not given one). Requirements files
(`*.txt`) are edited line by line, keeping markers, extras and comments; `pyproject.toml` through tomlkit,
in `[build-system] requires`, `[project] dependencies` and `optional-dependencies`.
"""

from __future__ import annotations

import io
import re
import tarfile
from dataclasses import dataclass

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Array, Table

from kpatch.errors import BuildError

_COMMENT = re.compile(r"(^|\s)#")


@dataclass(frozen=True)
class Pin:
    """`package==version`; `append` adds it to a requirements file that does not name the package yet."""

    package: str
    version: str
    append: bool

    def applied_to(self, requirement: Requirement) -> str:
        """The same requirement (name spelling, extras, marker kept), pinned to exactly this version."""
        extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
        marker = f"; {requirement.marker}" if requirement.marker else ""
        return f"{requirement.name}{extras}=={self.version}{marker}"

    def matches(self, name: str) -> bool:
        return canonicalize_name(name) == canonicalize_name(self.package)


def pin_text(path: str, text: str, pins: tuple[Pin, ...]) -> str:
    """`text` of pin file `path` with every pin applied."""
    if path.rsplit("/", 1)[-1] == "pyproject.toml":
        return _pin_pyproject(path, text, pins)
    return _pin_requirements(text, pins)


def _requirement(text: str) -> Requirement | None:
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None  # an option (-r, --extra-index-url), a path or URL: not ours to pin


def _pin_requirements(text: str, pins: tuple[Pin, ...]) -> str:
    lines = text.splitlines()
    found: set[str] = set()
    for index, line in enumerate(lines):
        match = _COMMENT.search(line)
        body, comment = (line[:match.start()], line[match.start():]) if match else (line, "")
        if not body.strip() or body.lstrip().startswith("-"):
            continue
        requirement = _requirement(body.strip())
        pin = next((p for p in pins if requirement and p.matches(requirement.name)), None)
        if requirement is not None and pin is not None:
            lead, trail = body[:len(body) - len(body.lstrip())], body[len(body.rstrip()):]
            lines[index] = lead + pin.applied_to(requirement) + trail + comment
            found.add(pin.package)
    lines += [f"{p.package}=={p.version}" for p in pins if p.append and p.package not in found]
    return "\n".join(lines) + "\n"


def _pin_pyproject(path: str, text: str, pins: tuple[Pin, ...]) -> str:
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as err:
        raise BuildError(f"pin file {path}: not valid TOML ({err})") from None
    arrays: list[object] = [doc.get("build-system", {}).get("requires"), doc.get("project", {}).get("dependencies")]
    extras = doc.get("project", {}).get("optional-dependencies")
    if isinstance(extras, Table):
        arrays += list(extras.values())
    for array in arrays:
        if not isinstance(array, Array):
            continue
        for index, item in enumerate(array):
            requirement = _requirement(str(item)) if isinstance(item, str) else None
            pin = next((p for p in pins if requirement and p.matches(requirement.name)), None)
            if requirement is not None and pin is not None:
                array[index] = pin.applied_to(requirement)
    return tomlkit.dumps(doc)


def pin_source(name: str, source_tar: bytes, prefix: str, files: tuple[str, ...], pins: tuple[Pin, ...]) -> bytes:
    """The source archive with `pins` applied to pin `files`; unchanged bytes when there is nothing to pin."""
    if not files or not pins:
        return source_tar
    wanted = {prefix + f for f in files}
    out = io.BytesIO()
    seen: set[str] = set()
    with tarfile.open(fileobj=io.BytesIO(source_tar)) as source, tarfile.open(fileobj=out, mode="w",
                                                                                format=tarfile.PAX_FORMAT) as target:
        for member in source.getmembers():
            extracted = source.extractfile(member) if member.isfile() else None
            data = extracted.read() if extracted is not None else None
            if member.name in wanted and data is not None:
                seen.add(member.name)
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    raise BuildError(f"{name}: pin file {member.name.removeprefix(prefix)} is not UTF-8") from None
                data = pin_text(member.name.removeprefix(prefix), text, pins).encode("utf-8")
                member.size = len(data)
            target.addfile(member, io.BytesIO(data) if data is not None else None)
    missing = sorted(f.removeprefix(prefix) for f in wanted - seen)
    if missing:
        raise BuildError(f"{name}: pin file {missing[0]} is not in the source (see [upstream.build] pin-files)")
    return out.getvalue()
