"""The wheel cache: one folder per build key holding the wheel and what its build saw; keys from everything
that can change a wheel."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from pathlib import Path

from kpatch.errors import BuildError
from kpatch.files import sha256
from kpatch.wheels.metadata import read_wheel
from kpatch.wheels.record import Wheel

log = logging.getLogger("kpatch.wheels")
INFO = "build.json"


def cache_key(parts: dict[str, object]) -> str:
    """sha256 of everything that can change a wheel, as canonical JSON."""
    return sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode())


def path(cache: Path, wheel: Wheel, key: str) -> Path:
    """Where the cache keeps `wheel`, built under `key`."""
    return cache / wheel.upstream / key / wheel.filename


def cached(cache: Path, name: str, key: str, commit: str | None = None) -> Wheel | None:
    """The wheel of upstream `name` built under `key` (from `commit`), or None; an unreadable entry is a miss (it
    is rebuilt), not an error."""
    folder = cache / name / key
    wheels = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    if len(wheels) != 1 or not (folder / INFO).is_file():
        return None
    try:
        torch = json.loads((folder / INFO).read_text(encoding="utf-8"))["torch"]
        return _record(wheels[0], name, torch, commit)
    except (BuildError, OSError, ValueError, KeyError) as err:
        log.warning("ignoring broken cache entry %s: %s", folder, err)
        return None


def store(cache: Path, name: str, key: str, filename: str, data: bytes, torch: str | None,
          commit: str | None = None) -> Wheel:
    """Put a freshly built wheel in the cache: a temp folder renamed into place, so a kill leaves no half."""
    target = cache / name / key
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=target.parent))
    try:
        (staging / filename).write_bytes(data)
        (staging / INFO).write_text(json.dumps({"torch": torch}), encoding="utf-8")
        read_wheel(staging / filename)  # a broken wheel never enters the cache
        if target.exists() and cached(cache, name, key) is None:  # a broken entry: replaced
            shutil.rmtree(target)
        try:
            staging.replace(target)
        except OSError:
            # A build of the same key beside this one (the nightly search's local workers) put its wheel first.
            if cached(cache, name, key) is None:
                raise
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    kept = cached(cache, name, key, commit)
    return kept if kept is not None else _record(target / filename, name, torch, commit)


def _record(file: Path, upstream: str, torch: str | None, commit: str | None) -> Wheel:
    meta = read_wheel(file)
    return Wheel(upstream=upstream, package=meta.package, version=str(meta.version), filename=file.name,
                 sha256=sha256(file), size=file.stat().st_size, torch=torch, commit=commit,
                 requires=tuple(str(r) for r in meta.requires))


STAGING_AGE = 600.0  # seconds: a staging folder untouched this long is a killed build's, not one being written


def sweep(cache: Path) -> None:
    """Remove staging folders a killed build left in the cache (not one a build beside this one is writing)."""
    now = time.time()
    for staging in cache.glob("*/.*-*"):
        try:
            if now - staging.stat().st_mtime < STAGING_AGE:
                continue
        except OSError:
            continue
        shutil.rmtree(staging, ignore_errors=True)
