"""The only module that talks to the Docker engine (docker SDK): images, and containers that always go away.

Files travel by archive (put_archive/get_archive), never by bind mount, so a remote engine (DOCKER_HOST,
e.g. ssh:// to an XPU build host) works the same as a local one.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import socket
import tarfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kpatch.errors import BuildError
from kpatch.wheels.backend import TAIL, BuildJob, BuildOutput, Toolchain, collect

log = logging.getLogger("kpatch.docker")
LABEL = "kpatch.build"  # on every container kpatch starts, so leftovers of a killed run can be found
BUILD_UID = 10001
OWNER_LABEL = "kpatch.owner"  # host:pid of the kpatch process that started the container
CA_PATH = "/kpatch/ca.pem"


def owner() -> str:
    """This process, as the owner label of the containers it starts."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_alive(label: str) -> bool:
    """Whether the kpatch process named by an owner label may still be running (unknown: assumed dead)."""
    host, _, pid = label.rpartition(":")
    if not host or not pid.isdigit():
        return False  # unlabelled: started by a kpatch from before owner labels
    if host != socket.gethostname():
        return True  # another machine's run on a shared engine: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by another user
    return True


@dataclass(frozen=True)
class RunResult:
    status: int
    log_tail: str


class Engine:
    def __init__(self) -> None:
        import docker
        from docker.errors import DockerException

        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        try:
            self.client = docker.from_env(timeout=600)
            self.client.ping()
        except DockerException as err:
            reason = str(err).splitlines()[0][:160]
            raise BuildError(f"no Docker engine at {where} ({reason}): start one (as root: 'dockerd &'), "
                             "or point DOCKER_HOST at one (e.g. ssh://user@xpu-build-host)") from None

    def image(self, reference: str) -> Toolchain:
        from docker.errors import ImageNotFound

        try:
            found = self.client.images.get(reference)
        except ImageNotFound:
            raise BuildError(f"image {reference} not found on the engine: build it or pull it first") from None
        labels = found.labels or {}
        return Toolchain(reference=reference, digest=str(found.id), base=labels.get("kpatch.base-image", ""),
                         base_digest=labels.get("kpatch.base-image-digest", ""))

    def has_image(self, reference: str) -> bool:
        from docker.errors import ImageNotFound

        try:
            self.client.images.get(reference)
            return True
        except ImageNotFound:
            return False

    def build_image(self, context: Path, tag: str, buildargs: dict[str, str], labels: dict[str, str],
                    on_line: Callable[[str], None]) -> Toolchain:
        """docker build, streaming its log; a failure shows the log's tail."""
        lines: list[str] = []
        stream = self.client.api.build(path=str(context), tag=tag, buildargs=buildargs, labels=labels, rm=True,
                                       forcerm=True, decode=True, pull=False)
        for chunk in stream:
            text = str(chunk.get("stream") or chunk.get("status") or "").rstrip()
            if text:
                lines.append(text)
                on_line(text)
            if "error" in chunk or "errorDetail" in chunk:
                message = str(chunk.get("error") or chunk.get("errorDetail"))
                tail = "\n".join([*lines[-TAIL:], message])
                raise BuildError(f"image build failed: {message.strip().splitlines()[-1]}\n{tail}")
        return self.image(tag)

    def remove_leftovers(self) -> int:
        """Remove containers a killed kpatch run left behind; return how many. Another kpatch run building on
        the same engine right now keeps its containers: only those whose owner process is gone are removed."""
        stale = [c for c in self.client.containers.list(all=True, filters={"label": LABEL})
                 if not owner_alive((c.labels or {}).get(OWNER_LABEL, ""))]
        for container in stale:
            log.warning("removing leftover build container %s", container.name)
            container.remove(force=True)
        return len(stale)

    def created_since(self, since: float) -> int:
        """How many kpatch build containers the engine created since `since` (from its event log)."""
        events = self.client.events(since=int(since), until=int(time.time()) + 1, decode=True,
                                    filters={"type": "container", "event": "create", "label": LABEL})
        return sum(1 for _ in events)

    @contextmanager
    def container(self, image: Toolchain, env: dict[str, str], name: str) -> Iterator[Container]:
        """A stopped container ready to receive files; removed on every way out, kill of kpatch aside."""
        created = self.client.containers.create(
            image.digest, command=["sh", "/kpatch/build-wheel.sh"], environment=env,
            labels={LABEL: "1", OWNER_LABEL: owner()}, name=name, user=str(BUILD_UID), network_disabled=False,
            privileged=False)
        try:
            yield Container(created)
        finally:
            try:
                created.remove(force=True)
            except Exception as err:  # the engine went away: nothing else to do
                log.warning("could not remove container %s: %r", name, err)


class Container:
    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def put(self, folder: str, entries: list[tuple[str, bytes | None, int]]) -> None:
        """Copy files (name, data, mode) into `folder`; data None makes a directory. Owned by the build user
        unless the mode denies writes (then by root: read-only for the build)."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for name, data, mode in entries:
                info = tarfile.TarInfo(name)
                info.mode = mode
                info.uid = info.gid = BUILD_UID if mode & 0o200 else 0
                info.mtime = 0
                if data is None:
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                else:
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        self.put_tar(folder, buffer.getvalue())

    def put_tar(self, folder: str, tar: bytes) -> None:
        if not self.handle.put_archive(folder, tar):
            raise BuildError(f"could not copy files into the build container at {folder}")

    def run(self, on_line: Callable[[str], None]) -> RunResult:
        self.handle.start()
        tail: list[str] = []
        for raw in self.handle.logs(stream=True, follow=True):
            for line in raw.decode("utf-8", "replace").splitlines():
                tail = [*tail[-(TAIL - 1):], line]
                on_line(line)
        status = int(self.handle.wait().get("StatusCode", -1))
        return RunResult(status=status, log_tail="\n".join(tail))

    def get(self, path: str) -> dict[str, bytes]:
        """Regular files under `path` in the container, by base name."""
        stream, _ = self.handle.get_archive(path)
        buffer = io.BytesIO(b"".join(stream))
        files: dict[str, bytes] = {}
        with tarfile.open(fileobj=buffer) as tar:
            for member in tar.getmembers():
                extracted = tar.extractfile(member) if member.isfile() else None
                if extracted is not None:
                    files[Path(member.name).name] = extracted.read()
        return files


def host_ca_bundle() -> Path | None:
    """The CA bundle the host's pip uses (PIP_CERT, else REQUESTS_CA_BUNDLE or SSL_CERT_FILE), if any."""
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        value = os.environ.get(name)
        if value and Path(value).is_file():
            return Path(value)
    return None


def ca_files(env: dict[str, str]) -> tuple[list[tuple[str, bytes | None, int]], dict[str, str]]:
    """The host's CA bundle as a file for /kpatch, and the env that points pip (PIP_CERT) and ssl at it."""
    ca = host_ca_bundle()
    if ca is None:
        return [], env
    return [("ca.pem", ca.read_bytes(), 0o444)], {**env, "PIP_CERT": CA_PATH, "SSL_CERT_FILE": CA_PATH}


class DockerBackend:
    """Builds in a fresh container of `image` per wheel: source in read-only, the wheel out, all by archive."""

    def __init__(self, engine: Engine, image: Toolchain) -> None:
        self.engine = engine
        self.image = image

    @property
    def toolchain(self) -> Toolchain:
        return self.image

    def started_since(self, since: float) -> int:
        return self.engine.created_since(since)

    def build(self, job: BuildJob, on_line: Callable[[str], None]) -> BuildOutput:
        digest = hashlib.sha256(job.source_tar).hexdigest()[:12]
        container_name = f"kpatch-build-{job.name}-{digest}-{os.getpid()}"
        # pip in the container trusts what pip on the host trusts (PIP_CERT)
        ca, env = ca_files(dict(job.env))
        files: list[tuple[str, bytes | None, int]] = [
            ("build-wheel.sh", job.script, 0o555), ("deps", None, 0o555), ("out", None, 0o755), *ca]
        with self.engine.container(self.image, env, container_name) as box:
            box.put("/kpatch", files)
            box.put_tar("/kpatch", job.source_tar)  # root-owned: read-only for the build user
            if job.deps:
                box.put("/kpatch/deps", [(d.name, d.read_bytes(), 0o444) for d in job.deps])
            run = box.run(on_line)
            if run.status != 0:
                raise BuildError(f"{job.name}: build step failed (exit {run.status}); last lines:\n{run.log_tail}")
            return collect(job.name, box.get("/kpatch/out"))
