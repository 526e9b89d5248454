"""The wheel cache: one folder per build key holding the wheel and what its build saw; keys from everything
that can change a wheel."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kpatch.errors import BuildError
from kpatch.files import sha256
from kpatch.wheels.metadata import Wheel, read_wheel

log = logging.getLogger("kpatch.wheels")
INFO = "build.json"


@dataclass(frozen=True)
class CachedWheel:
    """A built wheel in the cache and the torch (version with local label) it was built against."""

    wheel: Wheel
    torch: str | None


def cache_key(parts: dict[str, object]) -> str:
    """sha256 of everything that can change a wheel, as canonical JSON."""
    return sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode())


def cached(cache: Path, name: str, key: str) -> CachedWheel | None:
    """The wheel built under `key`, or None; an unreadable entry is a miss (it is rebuilt), not an error."""
    folder = cache / name / key
    wheels = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    if len(wheels) != 1 or not (folder / INFO).is_file():
        return None
    try:
        torch = json.loads((folder / INFO).read_text(encoding="utf-8"))["torch"]
        return CachedWheel(wheel=read_wheel(wheels[0]), torch=torch)
    except (BuildError, OSError, ValueError, KeyError) as err:
        log.warning("ignoring broken cache entry %s: %s", folder, err)
        return None


def store(cache: Path, name: str, key: str, filename: str, data: bytes, torch: str | None) -> CachedWheel:
    """Put a freshly built wheel in the cache: a temp folder renamed into place, so a kill leaves no half."""
    target = cache / name / key
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=target.parent))
    try:
        (staging / filename).write_bytes(data)
        (staging / INFO).write_text(json.dumps({"torch": torch}), encoding="utf-8")
        read_wheel(staging / filename)  # a broken wheel never enters the cache
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return CachedWheel(wheel=read_wheel(target / filename), torch=torch)


def sweep(cache: Path) -> None:
    """Remove staging folders a killed build left in the cache."""
    for staging in cache.glob("*/.*-*"):
        shutil.rmtree(staging, ignore_errors=True)
