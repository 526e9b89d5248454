"""The matched-set lock: PEP 751 `pylock.toml` (wheel names, sizes, sha256) plus a [tool.kpatch] table.

Written with a TOML writer (tomli-w: every key quoted as TOML needs, so `a.b` stays one key) and validated
with `packaging.pylock`, and read back into the same dataclasses, BEFORE it is renamed into place.
Deterministic for the same inputs (no clock). `read` gives `verify` the lock as typed data, per-wheel torch
included.
"""

from __future__ import annotations

import os
import stat
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w
from packaging.pylock import Package, Pylock, PylockUnsupportedVersionError, PylockValidationError
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kpatch.errors import BuildError, LockError
from kpatch.files import NotAFile, new_file_mode, open_regular, sha256
from kpatch.wheels.record import Wheel

LOCK_NAME = "pylock.toml"
FORMAT = 1  # [tool.kpatch] format: bump when its meaning changes
NO_TORCH = "none"  # how a build without torch is written in the lock


@dataclass(frozen=True)
class LockedUpstream:
    name: str
    url: str
    base: str  # the upstream commit the stack is applied onto
    commit: str  # the patched commit that was built
    stack_hash: str  # sha256 of the patch stack in series order
    build_key: str  # everything the wheel depends on, hashed: equal keys = same wheel
    command: str
    env: Mapping[str, str]
    torch: str | None  # the torch (version with local label) its wheel was built against; None: no torch


@dataclass(frozen=True)
class Lock:
    wheels: tuple[Wheel, ...]  # read back: package names normalized, each with its upstream's torch and commit
    upstreams: tuple[LockedUpstream, ...]
    image: str
    image_digest: str
    base_image: str
    base_image_digest: str
    kpatch_version: str
    set_torch: str | None = None  # kpatch.toml's [set] torch, when it names one

    def torch(self, upstream: str) -> str | None:
        """The torch `upstream`'s wheel was built against (None: none)."""
        return next(u.torch for u in self.upstreams if u.name == upstream)

    def torches(self) -> dict[str, str | None]:
        """Per upstream, the torch its wheel was built against: what `verify` compares across the set."""
        return {u.name: u.torch for u in self.upstreams}


def to_dict(lock: Lock) -> dict[str, Any]:
    """The lock as the TOML document's data."""
    upstreams = {u.name: {"url": u.url, "base": u.base, "commit": u.commit, "stack-hash": u.stack_hash,
                          "build-key": u.build_key, "command": u.command, "env": dict(sorted(u.env.items())),
                          "torch": u.torch or NO_TORCH} for u in lock.upstreams}
    tool: dict[str, Any] = {"format": FORMAT, "version": lock.kpatch_version, "image": lock.image,
                            "image-digest": lock.image_digest, "base-image": lock.base_image,
                            "base-image-digest": lock.base_image_digest}
    if lock.set_torch:
        tool["set-torch"] = lock.set_torch
    tool["upstreams"] = upstreams
    packages = [{"name": canonicalize_name(w.package), "version": w.version,
                 "wheels": [{"name": w.filename, "path": w.filename, "size": w.size, "hashes": {"sha256": w.sha256}}],
                 "tool": {"kpatch": {"upstream": w.upstream}}} for w in lock.wheels]
    return {"lock-version": "1.0", "created-by": "kpatch", "packages": packages, "tool": {"kpatch": tool}}


def render(lock: Lock) -> bytes:
    return tomli_w.dumps(to_dict(lock)).encode("utf-8")


REBUILD = "; rebuild the pair and its lock with 'kpatch build-wheels'"


def parse(text: str, where: str) -> Lock:
    """A lock's text -> Lock, validated with packaging.pylock; a bad lock is one LockError line naming `where`."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise LockError(f"{where}: not valid TOML ({err}){REBUILD}") from None
    try:
        model = Pylock.from_dict(data)
    except PylockUnsupportedVersionError as err:
        raise LockError(f"{where}: {err} (kpatch writes lock-version 1.0)") from None
    except PylockValidationError as err:
        raise LockError(f"{where}: not a valid PEP 751 lock: {err}{REBUILD}") from None
    try:
        lock = _from_model(model)
    except (KeyError, TypeError, ValueError, InvalidVersion) as err:
        raise LockError(f"{where}: bad [tool.kpatch] table ({type(err).__name__}: {err}){REBUILD}") from None
    for wheel in lock.wheels:
        name = wheel.filename
        if name in ("", ".", "..") or any(c in name for c in "/\\\0") or name.startswith("."):
            raise LockError(f"{where}: wheel path {name!r} is not a file name beside the lock (kpatch reads "
                            f"only wheels in the lock's folder){REBUILD}")
    return lock


def _from_model(model: Pylock) -> Lock:
    """packaging's validated model of the lock -> kpatch's Lock; only [tool.kpatch] is kpatch's to check."""
    tool = (model.tool or {})["kpatch"]
    if tool.get("format") != FORMAT:
        raise ValueError(f"format {tool.get('format')!r}, this kpatch reads format {FORMAT}")
    upstreams = []
    for name, up in tool["upstreams"].items():
        env = up["env"]
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise TypeError(f"upstream {name}: env must be a table of strings")
        torch = _str(up["torch"])
        upstreams.append(LockedUpstream(name=name, url=_str(up["url"]), base=_str(up["base"]),
                                        commit=_str(up["commit"]), stack_hash=_str(up["stack-hash"]),
                                        build_key=_str(up["build-key"]), command=_str(up["command"]), env=env,
                                        torch=None if torch == NO_TORCH else str(Version(torch))))
    by_name = {u.name: u for u in upstreams}
    wheels = tuple(_wheel(package, by_name) for package in model.packages)
    set_torch = tool.get("set-torch")
    return Lock(wheels=wheels, upstreams=tuple(upstreams), image=_str(tool["image"]),
                image_digest=_str(tool["image-digest"]), base_image=_str(tool["base-image"]),
                base_image_digest=_str(tool["base-image-digest"]), kpatch_version=_str(tool["version"]),
                set_torch=None if set_torch is None else _str(set_torch))


def _wheel(package: Package, upstreams: Mapping[str, LockedUpstream]) -> Wheel:
    """One locked package (one wheel, a path beside the lock, its size and sha256) as the set's Wheel record."""
    (wheel,) = package.wheels or ()
    if package.version is None or wheel.path is None or wheel.size is None or "sha256" not in wheel.hashes:
        raise ValueError(f"package {package.name}: kpatch locks a version and one wheel with a path, size and sha256")
    upstream = upstreams[_str((package.tool or {})["kpatch"]["upstream"])]
    return Wheel(upstream=upstream.name, package=package.name, version=str(package.version), filename=wheel.path,
                 sha256=wheel.hashes["sha256"], size=wheel.size, torch=upstream.torch, commit=upstream.commit)


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


LOCK_LIMIT = 16 << 20  # bytes: a lock of two wheels is a few kB


def read(path: Path) -> Lock:
    """The lock at `path` as typed data (for `verify`): only a regular file, of a lock's size, is read."""
    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > LOCK_LIMIT:
                raise LockError(f"cannot read lock {path}: {size} bytes (kpatch reads at most {LOCK_LIMIT})")
            text = handle.read(LOCK_LIMIT + 1).decode("utf-8")
    except NotAFile as err:
        raise LockError(f"cannot read lock {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise LockError(f"cannot read lock {path}: {getattr(err, 'strerror', None) or err}") from None
    return parse(text, str(path))


def write(folder: Path, lock: Lock) -> Path:
    """Write `lock` as folder/pylock.toml: staged beside it, validated, then renamed into place."""
    path = folder / LOCK_NAME
    data = render(lock)
    try:
        fd, staged = tempfile.mkstemp(prefix=f".{LOCK_NAME}.", dir=folder)
    except OSError as err:
        raise BuildError(f"cannot write {path}: {err.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), _mode(path))  # mkstemp's 0600 is not what a user's umask gives
            os.fsync(handle.fileno())
        back = parse(Path(staged).read_text(encoding="utf-8"), str(path))
        if back != _normalized(lock):  # the writer must not change what the lock says
            raise BuildError(f"{path}: the lock does not read back as written (a kpatch bug)")
        Path(staged).replace(path)
    except OSError as err:
        Path(staged).unlink(missing_ok=True)
        raise BuildError(f"cannot write {path}: {err.strerror}") from None
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise
    return path


def _mode(path: Path) -> int:
    """The lock keeps the mode it has; a new one gets what the umask gives any new file."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return new_file_mode()
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else new_file_mode()  # a symlink is 0777


def _normalized(lock: Lock) -> Lock:
    """`lock` as it reads back: package names and versions normalized, env as a plain dict, each wheel with its
    upstream's torch and commit (and no Requires-Dist: the lock does not hold them)."""
    by_name = {u.name: u for u in lock.upstreams}
    wheels = tuple(Wheel(upstream=w.upstream, package=canonicalize_name(w.package), version=str(Version(w.version)),
                         filename=w.filename, sha256=w.sha256, size=w.size, torch=by_name[w.upstream].torch,
                         commit=by_name[w.upstream].commit) for w in lock.wheels)
    upstreams = tuple(LockedUpstream(name=u.name, url=u.url, base=u.base, commit=u.commit, stack_hash=u.stack_hash,
                                     build_key=u.build_key, command=u.command, env=dict(sorted(u.env.items())),
                                     torch=u.torch) for u in lock.upstreams)
    return Lock(wheels=wheels, upstreams=upstreams, image=lock.image, image_digest=lock.image_digest,
                base_image=lock.base_image, base_image_digest=lock.base_image_digest,
                kpatch_version=lock.kpatch_version, set_torch=lock.set_torch)


def check(path: Path) -> list[str]:
    """Problems with a lock and the wheels beside it (missing file, size or sha256 mismatch); [] when good."""
    lock = read(path)
    problems = []
    for wheel in lock.wheels:
        file = path.parent / wheel.filename
        if not file.is_file():
            problems.append(f"{wheel.filename}: missing")
        elif file.stat().st_size != wheel.size:
            problems.append(f"{wheel.filename}: size {file.stat().st_size} != {wheel.size}")
        elif sha256(file) != wheel.sha256:
            problems.append(f"{wheel.filename}: sha256 differs")
    return problems
