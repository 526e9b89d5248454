"""The docker build backend: each wheel in a fresh container of the build image (through kpatch/container)."""

from __future__ import annotations

import os
from collections.abc import Callable

from kpatch.container.docker import Engine, ca_files
from kpatch.container.image import Toolchain
from kpatch.files import sha256
from kpatch.wheels.backend import BuildJob, BuildOutput, Output, collect
from kpatch.wheels.compiler_cache import MOUNT, OFF, CacheConfig


class DockerBackend:
    """Builds in a fresh container of `image` per wheel: source in read-only, the wheel out, all by archive."""

    def __init__(self, engine: Engine, image: Toolchain, cache: CacheConfig = OFF) -> None:
        self.engine = engine
        self.image = image
        self.cache = cache
        if cache.volume:
            engine.ensure_volume(cache.volume)

    @property
    def toolchain(self) -> Toolchain:
        return self.image

    def started_since(self, since: float) -> int:
        return self.engine.created_since(since)

    def build(self, job: BuildJob, on_line: Callable[[str], None]) -> BuildOutput:
        digest = sha256(job.source_tar)[:12]
        container_name = f"kpatch-build-{job.name}-{digest}-{os.getpid()}"
        # pip in the container trusts what pip on the host trusts (PIP_CERT)
        ca, env = ca_files({**job.env, **self.cache.env})
        files: list[tuple[str, bytes | None, int]] = [
            ("build-wheel.sh", job.script, 0o555), ("deps", None, 0o555), ("out", None, 0o755), *ca]
        volumes = {self.cache.volume: MOUNT} if self.cache.volume else None
        with self.engine.container(self.image, env, container_name, volumes) as box:
            box.put("/kpatch", files)
            box.put_tar("/kpatch", job.source_tar)  # root-owned: read-only for the build user
            if job.deps:
                box.put("/kpatch/deps", [(d.name, d.read_bytes(), 0o444) for d in job.deps])
            output = Output(on_line)
            run = box.run_until(output, job.timeout)
            if run.timed_out:  # killed: the container goes away with nothing taken out of it
                raise output.timed_out(job.name, job.timeout)
            if run.status != 0:
                raise output.failed(job.name, run.status)
            return collect(job.name, box.get("/kpatch/out"))
