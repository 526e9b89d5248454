"""Wheel build steps that need no engine: cache keys, the pair's version labels, wheel metadata, the cache."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from kpatch.gitx import Repository

_PUBLIC = re.compile(r"^\d+(\.\d+)*$")


@dataclass(frozen=True)
class Wheel:
    path: Path
    package: str
    version: str
    requires: tuple[str, ...]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def cache_key(parts: dict[str, object]) -> str:
    """sha256 of everything that can change a wheel, as canonical JSON."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def public_version(repo: Path, base: str) -> str:
    """The upstream's version at `base` from its nearest tag: v0.33.0 -> 0.33.0, 12 commits later -> .post12."""
    found = Repository(repo).describe(base)
    if found is None:
        return "0.0.0"
    tag, count = found
    number = tag.removeprefix("v")
    if not _PUBLIC.match(number):
        number = "0.0.0"
    return f"{number}.post{count}" if count else number


def label(key: str, required: list[str]) -> str:
    """A local version label: kpatch.<own key>, after the labels of the wheels it is built against.

    The kernels wheel gets `kpatch.<k>`, vLLM `kpatch.<k>.<v>`: the vLLM label names the whole pair, and a
    change to vLLM alone leaves the kernels wheel (and its version) as it was.
    """
    parts = [p.removeprefix("kpatch.") for p in required]
    return "kpatch." + ".".join([*parts, key[:12]])


def read_wheel(path: Path) -> Wheel:
    """Name, version and Requires-Dist from a wheel's METADATA."""
    with zipfile.ZipFile(path) as archive:
        meta_name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(meta_name).decode("utf-8")
    fields: dict[str, list[str]] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(": ")
        fields.setdefault(key, []).append(value)
    return Wheel(path=path, package=fields["Name"][0], version=fields["Version"][0],
                 requires=tuple(fields.get("Requires-Dist", [])))


def cached(cache: Path, name: str, key: str) -> Wheel | None:
    folder = cache / name / key
    wheels = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    return read_wheel(wheels[0]) if len(wheels) == 1 else None


def store(cache: Path, name: str, key: str, filename: str, data: bytes) -> Wheel:
    """Put a freshly built wheel in the cache: a temp folder renamed into place, so a kill leaves no half."""
    target = cache / name / key
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=target.parent))
    (staging / filename).write_bytes(data)
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)
    return read_wheel(target / filename)


def sweep(cache: Path) -> None:
    """Remove staging folders a killed build left in the cache."""
    for staging in cache.glob("*/.*-*"):
        shutil.rmtree(staging, ignore_errors=True)
