"""--backend local: the same build script on this host, in a Python environment of kpatch's own.

Each build runs in a fresh venv (`hostenv`: pip, setuptools and wheel from a seed kpatch made from the package
index), never in the user's interpreter or its site-packages, with a private HOME and an allowlisted environment
(`procs`: no credential reaches the upstream's build). The source it copies is extracted read-only. The build runs
in a process group of its own (`procs.run`): at its timeout the whole group is killed.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Callable, Mapping
from pathlib import Path

from kpatch import procs, scratch
from kpatch.container.image import Toolchain
from kpatch.files import extract_tar, sha256
from kpatch.wheels import hostenv
from kpatch.wheels.backend import BuildJob, BuildOutput, Output, collect


class LocalBackend:
    """Runs build-wheel.sh in a fresh venv of this host's Python, with this host's compiler; starts no container."""

    def __init__(self, cache_dir: Path, environ: Mapping[str, str] | None = None) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self._cache_dir = cache_dir
        self._seed = hostenv.seed(cache_dir, self._environ)
        compiler = self._environ.get("CMPLR_ROOT", "")
        # What identifies this host's toolchain in the cache keys (the docker backend uses the image digest).
        digest = "local:" + sha256(f"{self._seed.digest}\0{compiler}".encode())
        self._toolchain = Toolchain(reference="local", digest=digest)

    @property
    def toolchain(self) -> Toolchain:
        return self._toolchain

    @property
    def environment(self) -> str:
        return self._seed.describe()

    def started_since(self, since: float) -> int:  # noqa: ARG002  # the Backend Protocol's signature
        return 0  # builds run as plain processes on this host

    def build(self, job: BuildJob, on_line: Callable[[str], None]) -> BuildOutput:
        with scratch.folder("build") as folder:
            root = Path(folder)
            for sub in ("home", "deps", "out"):
                (root / sub).mkdir()
            with tarfile.open(fileobj=io.BytesIO(job.source_tar)) as tar:
                extract_tar(tar, root)
            for path in (root / "src").rglob("*"):  # read-only, like the container's root-owned copy
                if path.is_file() and not path.is_symlink():
                    path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
            for wheel in job.deps:
                (root / "deps" / wheel.name).write_bytes(wheel.read_bytes())
            (root / "build-wheel.sh").write_bytes(job.script)
            bin_dir = hostenv.fresh(self._seed, root / "venv")
            given = {**job.env, "HOME": str(root / "home"), "KPATCH_SRC": str(root / "src"),
                     "KPATCH_DEPS": str(root / "deps"), "KPATCH_OUT": str(root / "out"),
                     "PIP_CACHE_DIR": self._environ.get("PIP_CACHE_DIR") or str(self._cache_dir / "pip")}
            env = hostenv.run_env(bin_dir, self._environ, given)
            env.pop("KPATCH_SCCACHE", None)  # the host's sccache server (if any) is the user's: never stopped here
            output = Output(on_line)
            done = procs.run(["sh", str(root / "build-wheel.sh")], cwd=root, env=env, on_output=output,
                             timeout=job.timeout)
            if done.timed_out:
                raise output.timed_out(job.name, job.timeout)
            if done.status != 0:
                raise output.failed(job.name, done.status)
            return collect(job.name, {p.name: p.read_bytes() for p in (root / "out").iterdir() if p.is_file()})

