"""The matched-pair lock: PEP 751 `pylock.toml` (wheel names, sizes, sha256) plus a [tool.kpatch] table.

Deterministic for the same inputs (no clock), written atomically, read back and checked against the files.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from kpatch.errors import BuildError
from kpatch.files import write_atomic

LOCK_NAME = "pylock.toml"


@dataclass(frozen=True)
class LockedWheel:
    upstream: str
    package: str
    version: str
    filename: str
    sha256: str
    size: int


@dataclass(frozen=True)
class LockedUpstream:
    name: str
    url: str
    base: str  # the upstream commit the stack is applied onto
    commit: str  # the patched commit that was built
    stack_hash: str  # sha256 of the patch stack in series order
    build_key: str  # everything the wheel depends on, hashed: equal keys = same wheel
    command: str
    env: dict[str, str]


@dataclass(frozen=True)
class Lock:
    wheels: tuple[LockedWheel, ...]
    upstreams: tuple[LockedUpstream, ...]
    image: str
    image_digest: str
    base_image: str
    base_image_digest: str
    kpatch_version: str


def render(lock: Lock) -> bytes:
    q = json.dumps  # a JSON string is a valid TOML basic string
    out = ['lock-version = "1.0"', 'created-by = "kpatch"', ""]
    for wheel in lock.wheels:
        out += ["[[packages]]", f"name = {q(wheel.package)}", f"version = {q(wheel.version)}",
                f"wheels = [{{ name = {q(wheel.filename)}, path = {q(wheel.filename)}, size = {wheel.size}, "
                f"hashes = {{ sha256 = {q(wheel.sha256)} }} }}]", ""]
    out += ["[tool.kpatch]", f"version = {q(lock.kpatch_version)}", f"image = {q(lock.image)}",
            f"image-digest = {q(lock.image_digest)}", f"base-image = {q(lock.base_image)}",
            f"base-image-digest = {q(lock.base_image_digest)}", ""]
    for up in lock.upstreams:
        env = ", ".join(f"{k} = {q(v)}" for k, v in sorted(up.env.items()))
        env = f"{{ {env} }}" if env else "{}"
        out += [f"[tool.kpatch.upstreams.{up.name}]", f"url = {q(up.url)}", f"base = {q(up.base)}",
                f"commit = {q(up.commit)}", f"stack-hash = {q(up.stack_hash)}", f"build-key = {q(up.build_key)}",
                f"command = {q(up.command)}", f"env = {env}", ""]
    return "\n".join(out).encode("utf-8")


def write(folder: Path, lock: Lock) -> Path:
    path = folder / LOCK_NAME
    try:
        write_atomic(path, render(lock))
    except OSError as err:
        raise BuildError(f"cannot write {path}: {err.strerror}") from None
    return path


def check(path: Path) -> list[str]:
    """Problems with a lock and the wheels beside it (missing file, size or sha256 mismatch); [] when good."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    problems = []
    for package in data.get("packages", []):
        for wheel in package.get("wheels", []):
            file = path.parent / wheel["path"]
            if not file.is_file():
                problems.append(f"{wheel['name']}: missing")
            elif file.stat().st_size != wheel["size"]:
                problems.append(f"{wheel['name']}: size {file.stat().st_size} != {wheel['size']}")
            elif hashlib.sha256(file.read_bytes()).hexdigest() != wheel["hashes"]["sha256"]:
                problems.append(f"{wheel['name']}: sha256 differs")
    return problems
