"""What `kpatch test` runs against: the locked pair read from pylock.toml (every byte hash-checked), and the
test image: the build image plus, installed once per pair of requirements, the wheels' dependencies and the
suite's own requirements (pytest...). The locked wheels themselves go into each test container afresh."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shlex
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from kpatch.config import Stack, TestSuite
from kpatch.container.docker import BUILD_UID, Engine, host_ca_bundle
from kpatch.container.image import Toolchain
from kpatch.errors import BuildError, ConfigError
from kpatch.files import NotAFile, open_regular, sha256
from kpatch.testing.scripts import script
from kpatch.wheels.lock import read as read_lock
from kpatch.wheels.metadata import read_wheel
from kpatch.wheels.record import Wheel

ENV_REPOSITORY = "kpatch-test-env"
ENV_LABEL = "kpatch.test-env"  # on every test image: "<project hash>/<upstream>", so old ones can be removed
INSTALL_TIMEOUT = 3600.0  # seconds for installing the dependencies (real ones: torch for XPU, ~GBs)

# Runs in the test-image container, as the build user, with network: the locked wheels and the suite's
# requirements in ONE pip resolution (so nothing can pull another version of the pair), then the pair
# itself is removed again: the image keeps only what does not change with each build of the pair.
INSTALL_PY = script("install-env.py")


@dataclass(frozen=True)
class LockedPair:
    path: Path
    image: str
    image_digest: str
    wheels: tuple[Wheel, ...]  # in the lock's order, each with its Requires-Dist
    files: Mapping[str, bytes]  # file name -> the bytes whose sha256 matched the lock: what goes into the container
    commits: tuple[tuple[str, str], ...]  # (upstream, patched commit that was built)

    def wheel(self, upstream: str) -> Wheel:
        for wheel in self.wheels:
            if wheel.upstream == upstream:
                return wheel
        raise ConfigError(f"{self.path}: no wheel for upstream {upstream!r}: run 'kpatch build-wheels' again")

    def commit(self, upstream: str) -> str:
        return dict(self.commits)[upstream]


def read_pair(path: Path) -> LockedPair:
    """The lock and its wheels, each checked against the lock's size and sha256."""
    if not path.is_file():
        raise ConfigError(f"{path}: no lock here: run 'kpatch build-wheels' first (or give --lock)")
    lock = read_lock(path)
    commits = {u.name: u.commit for u in lock.upstreams}
    wheels, files = [], {}
    for wheel in lock.wheels:
        file = path.parent / wheel.filename
        data = _locked_bytes(file, wheel.size, path)
        actual = sha256(data)
        if actual != wheel.sha256:
            raise ConfigError(f"{file}: sha256 {actual} differs from {wheel.sha256} in {path}")
        requires = tuple(str(r) for r in read_wheel(file).requires)
        wheels.append(replace(wheel, requires=requires))
        files[wheel.filename] = data
    return LockedPair(path=path, image=lock.image, image_digest=lock.image_digest, wheels=tuple(wheels),
                      files=files, commits=tuple(commits.items()))


def _locked_bytes(file: Path, size: int, lock: Path) -> bytes:
    """A locked wheel's bytes: only a regular file, and only read when its size is the locked one."""
    try:
        with open_regular(file) as handle:
            actual = os.fstat(handle.fileno()).st_size
            if actual != size:
                raise ConfigError(f"{file}: {actual} bytes, the lock says {size} ({lock})")
            return handle.read()
    except FileNotFoundError:
        raise ConfigError(f"{lock}: wheel {file.name} is missing from {file.parent}") from None
    except NotAFile as err:
        raise ConfigError(f"{lock}: wheel {err}") from None
    except OSError as err:
        raise ConfigError(f"{lock}: cannot read wheel {file}: {err.strerror}") from None


def closure(stack: Stack, pair: LockedPair, upstream: str) -> tuple[Wheel, ...]:
    """The wheels `upstream`'s tests run against: its own and those of everything it requires, in lock order."""
    names = {upstream} | stack.closure(upstream)
    return tuple(pair.wheel(w.upstream) for w in pair.wheels if w.upstream in names)


def _name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else requirement


def env_key(image: Toolchain, suite: TestSuite, wheels: tuple[Wheel, ...], source_sha: str) -> str:
    """What the test image depends on. Not the pair's bytes, only what they require of others, so a new build
    of the pair reuses the image; requirements between the pair's own packages are left out for the same reason."""
    ours = {_name(w.package) for w in wheels}
    requires = sorted({r for w in wheels for r in w.requires if _name(r) not in ours})
    parts = {"image": image.digest, "requires": requires, "suite-requires": suite.requires, "env": suite.env,
             "source": source_sha, "install": sha256(INSTALL_PY)}
    return sha256(json.dumps(parts, sort_keys=True).encode())


def tree_sha(tar: bytes) -> str:
    """sha256 over the names, modes and contents in a tar, not its bytes (git archive stamps the commit in)."""
    digest = hashlib.sha256()
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        for member in sorted(archive.getmembers(), key=lambda m: m.name):
            data = archive.extractfile(member) if member.isfile() else None
            digest.update(f"{member.name}\0{member.type!r}\0{member.mode:o}\0{member.linkname}\0".encode())
            digest.update(hashlib.sha256(data.read() if data else b"").digest())
    return digest.hexdigest()


def owned_tar(data: bytes, prefix: str, uid: int = BUILD_UID) -> bytes:
    """A tar's entries moved under `prefix` and owned by `uid`, so the build user can remove them again."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data)) as source, tarfile.open(fileobj=out, mode="w") as target:
        for member in source.getmembers():
            member.name = f"{prefix}/{member.name}".rstrip("/")
            member.uid = member.gid = uid
            member.mode |= 0o200
            target.addfile(member, source.extractfile(member) if member.isfile() else None)
    return out.getvalue()


def image_tag(base: Toolchain, suite: TestSuite, wheels: tuple[Wheel, ...], source_tar: bytes) -> str:
    """The test image's tag: kept on the engine and reused while `env_key` stays the same."""
    return f"{ENV_REPOSITORY}:{env_key(base, suite, wheels, tree_sha(source_tar))[:16]}"


def build_image(engine: Engine, base: Toolchain, tag: str, upstream: str, suite: TestSuite,
                wheels: tuple[Wheel, ...], data: Mapping[str, bytes], source_tar: bytes, project: str,
                on_text: Callable[[str], None]) -> Toolchain:
    """The build image plus the dependencies, committed as `tag`; the project's older test images are removed."""
    key = tag.rpartition(":")[2]
    request = {"wheels": [f"/tmp/kpatch-env/wheels/{w.filename}" for w in wheels],
               "requires": [arg for item in suite.requires for arg in shlex.split(item)],
               "packages": [w.package for w in wheels]}
    files: list[tuple[str, bytes | None, int]] = [
        ("kpatch-env", None, 0o755), ("kpatch-env/wheels", None, 0o755), ("kpatch-env/src", None, 0o755),
        ("kpatch-env/install.py", INSTALL_PY, 0o644),
        ("kpatch-env/request.json", json.dumps(request).encode(), 0o644),
        *((f"kpatch-env/wheels/{w.filename}", data[w.filename], 0o644) for w in wheels)]
    ca = host_ca_bundle()
    if ca is not None:  # pip in the container trusts what pip on the host trusts
        files.append(("kpatch-env/ca.pem", ca.read_bytes(), 0o644))
    label = f"{project}/{upstream}"
    with engine.sandbox(base, name=f"kpatch-test-env-{upstream}-{key[:12]}-{os.getpid()}", command=["python3",
                        "/tmp/kpatch-env/install.py"], env=dict(suite.env), labels={}, network=True) as box:
        box.put("/tmp", files)
        box.put_tar("/tmp", owned_tar(source_tar, "kpatch-env/src"))
        tail: list[str] = []

        def keep(text: str) -> None:
            lines = text.splitlines()
            tail[:] = (tail + lines)[-15:]
            for line in lines:
                on_text(line)

        run = box.run_until(keep, INSTALL_TIMEOUT)
        if run.status != 0:
            what = "timed out" if run.timed_out else f"failed (exit {run.status})"
            raise BuildError(f"{upstream}: installing the locked wheels with the test requirements {what}; "
                             "last lines:\n" + "\n".join(tail))
        image_id = box.commit(ENV_REPOSITORY, key, {ENV_LABEL: label})
    engine.remove_images({ENV_LABEL: label}, keep=image_id)
    return engine.image(tag)
