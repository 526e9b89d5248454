"""The only module that talks to the Docker engine (docker SDK): images, and containers that always go away.

Files travel by archive (put_archive/get_archive), never by bind mount, so a remote engine (DOCKER_HOST,
e.g. ssh:// to an XPU build host) works the same as a local one.
"""

from __future__ import annotations

import codecs
import io
import logging
import os
import re
import socket
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kpatch.container.image import TAIL, Toolchain
from kpatch.errors import BuildError

log = logging.getLogger("kpatch.docker")
LABEL = "kpatch.build"  # on every container kpatch starts, so leftovers of a killed run can be found
# Test containers carry their own label; every container carries its owner (host:pid): a run only sweeps away
# containers whose kpatch process is gone, never those of another run going on at the same time.
TEST_LABEL = "kpatch.test"
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
class TimedRun:
    status: int  # the container's exit status (137 when it was killed)
    timed_out: bool  # kpatch killed it when the timeout ran out
    oom_killed: bool  # the kernel killed it for memory


@dataclass(frozen=True)
class EngineProbe:
    """Whether a Docker engine answers, where, which version, and which of the asked images it already has."""

    where: str  # DOCKER_HOST, or the default socket
    version: str | None  # the engine's version when it answers
    problem: str | None  # why it does not answer (with how to start one), else None
    present: tuple[str, ...] = ()  # of the images asked about, those on the engine (nothing is pulled)


def probe_engine(images: tuple[str, ...] = ()) -> EngineProbe:
    """Ask the engine (never raises for a missing one): for `kpatch doctor` and the demo's choice of backend."""
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        engine = Engine()
        version = str(engine.client.version().get("Version", "?"))
        return EngineProbe(where=where, version=version, problem=None,
                           present=tuple(i for i in images if engine.has_image(i)))
    except BuildError as err:
        return EngineProbe(where=where, version=None, problem=str(err))
    except Exception as err:  # noqa: BLE001  # the engine answered the ping, then failed: still no usable engine
        return EngineProbe(where=where, version=None, problem=f"the Docker engine at {where} failed: "
                           f"{engine_cause(err)}")


def engine_cause(err: BaseException) -> str:
    """Why the engine could not be reached, in the operating system's words (`Connection refused`, `No such file
    or directory`) when the error carries them, else the error's first clause: never a library's repr."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.strerror:
            return str(seen.strerror)
        seen = seen.__cause__ or seen.__context__
    text = str(err)
    words = re.findall(r"\[Errno -?\d+\] ([^'\"()\[\]]+)", text) or re.findall(r"Error\(\d+, '([^']+)'\)", text)
    if words:
        return str(words[-1]).strip()
    first = (text.strip().splitlines() or [type(err).__name__])[0]
    first = first.split(": HTTPConnectionPool", 1)[0].split(": (", 1)[0].strip()
    return first if len(first) <= 120 else first[:first.rfind(" ", 0, 117)] + " ..."


def _build_failure(message: str, base_image: str) -> str:
    """The one line for a failed image build: a registry that cannot be reached names the base image and the way
    round it (a local base image), as `kpatch doctor` does."""
    last = message.strip().splitlines()[-1] if message.strip() else "no message"
    registry = re.search(r'(?:Get|Head) "https?://([^/"]+)', last)
    if registry or "pull access denied" in last or "manifest unknown" in last:
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        why = f"{registry.group(1)}: {last.rsplit(': ', 1)[-1]}" if registry else last
        image = base_image or "BASE_IMAGE"
        return (f"the Docker engine at {where} cannot pull base image {image} ({why}): 'docker pull {image}' "
                "where a registry answers, or 'kpatch build-wheels --base-image REF' with an image the engine has")
    return f"image build failed: {last}"


class Engine:
    def __init__(self) -> None:
        # imported where used: the Docker SDK (~140 ms) only when an engine is used
        import docker
        from docker.errors import DockerException

        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        try:
            self.client = docker.from_env(timeout=600)
            self.client.ping()
        except DockerException as err:
            raise BuildError(f"no Docker engine at {where} ({engine_cause(err)}): start one (as root: 'dockerd &'), "
                             "or point DOCKER_HOST at one (e.g. ssh://xpu-build-host)") from None

    def image(self, reference: str) -> Toolchain:
        from docker.errors import ImageNotFound

        try:
            found = self.client.images.get(reference)
        except ImageNotFound:
            raise BuildError(f"image {reference} not found on the engine: 'docker pull {reference}' (or build it) "
                             "first; 'kpatch doctor' lists what the engine has") from None
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
                raise BuildError(f"{_build_failure(message, buildargs.get('BASE_IMAGE', ''))}\n{tail}")
        return self.image(tag)

    def remove_leftovers(self) -> int:
        """Remove build containers a killed kpatch run left behind; return how many."""
        return self._sweep(LABEL)

    def created_since(self, since: float) -> int:
        """How many build containers this process had the engine create since `since` (from its event log);
        another kpatch run on the same engine does not count."""
        events = self.client.events(since=int(since), until=int(time.time()) + 1, decode=True,
                                    filters={"type": "container", "event": "create",
                                             "label": [LABEL, f"{OWNER_LABEL}={owner()}"]})
        return sum(1 for _ in events)

    def remove_orphans(self) -> int:
        """Remove test containers a killed kpatch run left behind; return how many."""
        return self._sweep(TEST_LABEL)

    def _sweep(self, label: str) -> int:
        """Remove the containers with `label` whose kpatch process is gone: never those of a run going on at the
        same time (on this host, or on another one sharing the engine)."""
        from docker.errors import APIError

        removed = 0
        for container in self.client.containers.list(all=True, filters={"label": label}):
            if owner_alive((container.labels or {}).get(OWNER_LABEL, "")):
                continue
            log.warning("removing container %s left by an interrupted kpatch run", container.name)
            try:
                container.remove(force=True)
                removed += 1
            except APIError as err:  # already gone, or being removed by another kpatch run
                log.info("could not remove %s: %s", container.name, err)
        return removed

    @contextmanager
    def sandbox(self, image: Toolchain, *, name: str, command: list[str], env: dict[str, str], labels: dict[str, str],
                network: bool, devices: tuple[str, ...] = (), groups: tuple[int, ...] = ()) -> Iterator[Container]:
        """A stopped test container (unprivileged user, no network unless asked, only the given devices);
        removed on every way out, kill of kpatch aside (then `remove_orphans` finds it)."""
        from docker.errors import APIError

        try:
            created = self.client.containers.create(
                image.digest, command=command, environment=env, name=name, user=str(BUILD_UID), privileged=False,
                labels={TEST_LABEL: "1", OWNER_LABEL: owner(), **labels}, network_mode=None if network else "none",
                devices=list(devices) or None, group_add=list(groups) or None)
        except APIError as err:  # e.g. a --device the engine's host does not have
            raise BuildError(f"cannot create container {name}: {err.explanation or err}") from None
        with _removed_after(created, name) as container:
            yield container

    def remove_images(self, labels: dict[str, str], keep: str) -> int:
        """Remove images carrying all `labels` except `keep` (an image ID); images in use stay. Return how many."""
        from docker.errors import APIError

        removed = 0
        for found in self.client.images.list(filters={"label": [f"{k}={v}" for k, v in labels.items()]}):
            if found.id != keep:
                try:
                    self.client.images.remove(found.id)
                    removed += 1
                except APIError as err:
                    log.info("kept image %s: %s", found.id, err)
        return removed

    def ensure_volume(self, name: str) -> None:
        """The named volume `name` on the engine (a compiler cache that outlives the containers), made if missing."""
        from docker.errors import APIError, NotFound

        try:
            self.client.volumes.get(name)
        except NotFound:
            try:
                self.client.volumes.create(name=name, labels={"kpatch.cache": "compiler"})
            except APIError as err:
                raise BuildError(f"cannot create the compiler-cache volume {name}: {err.explanation or err}") from None

    @contextmanager
    def container(self, image: Toolchain, env: dict[str, str], name: str,
                  volumes: dict[str, str] | None = None) -> Iterator[Container]:
        """A stopped container ready to receive files; removed on every way out, kill of kpatch aside.

        `volumes` maps named volumes to where they are mounted (the compiler cache): a volume lives on the
        engine, so this works on a remote engine too, unlike a bind mount of a host folder.
        """
        created = self.client.containers.create(
            image.digest, command=["sh", "/kpatch/build-wheel.sh"], environment=env,
            labels={LABEL: "1", OWNER_LABEL: owner()}, name=name, user=str(BUILD_UID), network_disabled=False,
            privileged=False, volumes={v: {"bind": at, "mode": "rw"} for v, at in (volumes or {}).items()} or None)
        with _removed_after(created, name) as container:
            yield container


@contextmanager
def _removed_after(created: Any, name: str) -> Iterator[Container]:
    """A created container, removed on every way out (a kill of kpatch aside: `remove_orphans` finds those)."""
    try:
        yield Container(created)
    finally:
        try:
            created.remove(force=True)
        except Exception as err:  # noqa: BLE001  # the engine went away: nothing else to do
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

    def run_until(self, on_text: Callable[[str], None], timeout: float) -> TimedRun:
        """Start, stream the output as it comes and kill the container at `timeout` seconds.

        Attached, not through `logs`: the log driver holds a line back until its newline, and a hung test's id
        (pytest -v prints it, then runs the test) or a hung build step's last words are exactly such a line."""
        stream = self.handle.attach(stdout=True, stderr=True, stream=True, logs=True)
        self.handle.start()
        finished = threading.Event()

        def pump() -> None:
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            try:
                for raw in stream:
                    on_text(decoder.decode(raw))
            except Exception as err:  # noqa: BLE001  # the engine or the container went away: the run's status says the rest
                log.warning("output of the container stopped: %r", err)
            finally:
                finished.set()

        reader = threading.Thread(target=pump, name="kpatch-container-output", daemon=True)
        reader.start()
        timed_out = not finished.wait(timeout)
        if timed_out:
            self.handle.kill()
        reader.join(60)
        status = int(self.handle.wait(timeout=60).get("StatusCode", -1))
        self.handle.reload()
        return TimedRun(status=status, timed_out=timed_out,
                        oom_killed=bool(self.handle.attrs.get("State", {}).get("OOMKilled")))

    def commit(self, repository: str, tag: str, labels: dict[str, str]) -> str:
        """Save the stopped container's file system as an image; return its ID."""
        return str(self.handle.commit(repository=repository, tag=tag, conf={"Labels": labels}).id)

    def read(self, path: str) -> bytes | None:
        """One regular file's bytes, or None when the container has no file there."""
        from docker.errors import NotFound

        try:
            files = self.get(path)
        except NotFound:
            return None
        return files.get(Path(path).name)

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
