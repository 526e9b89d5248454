"""--backend local: the same build script on this host (one with oneAPI installed), in a private folder.

Nothing of the host's Python is touched: the script gets its own HOME and PYTHONUSERBASE, and the source
it copies is extracted read-only.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from kpatch.errors import BuildError
from kpatch.wheels.backend import TAIL, BuildJob, BuildOutput, Toolchain, collect


class LocalBackend:
    """Runs build-wheel.sh with this host's python3 and compiler; starts no container."""

    def __init__(self) -> None:
        try:
            probe = subprocess.run(["python3", "-c", "import sys, platform; print(sys.version, platform.platform())"],
                                   capture_output=True, text=True)
        except OSError:  # no python3 at all: the same answer as a broken one, not a crash
            probe = subprocess.CompletedProcess([], 127, "", "")
        if probe.returncode != 0:
            raise BuildError("--backend local needs python3 on PATH")
        compiler = os.environ.get("CMPLR_ROOT", "")
        # What identifies this host's toolchain in the cache keys (the docker backend uses the image digest).
        digest = "local:" + hashlib.sha256(f"{probe.stdout}\0{compiler}".encode()).hexdigest()
        self._toolchain = Toolchain(reference="local", digest=digest)

    @property
    def toolchain(self) -> Toolchain:
        return self._toolchain

    def started_since(self, since: float) -> int:
        return 0  # builds run as plain processes on this host

    def build(self, job: BuildJob, on_line: Callable[[str], None]) -> BuildOutput:
        with tempfile.TemporaryDirectory(prefix=f"kpatch-build-{job.name}-") as folder:
            root = Path(folder)
            for sub in ("home", "userbase", "deps", "out"):
                (root / sub).mkdir()
            with tarfile.open(fileobj=io.BytesIO(job.source_tar)) as tar:
                tar.extractall(root, filter="data")
            for path in (root / "src").rglob("*"):  # read-only, like the container's root-owned copy
                if path.is_file() and not path.is_symlink():
                    path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
            for wheel in job.deps:
                (root / "deps" / wheel.name).write_bytes(wheel.read_bytes())
            (root / "build-wheel.sh").write_bytes(job.script)
            env = {**os.environ, **job.env, "HOME": str(root / "home"), "PYTHONUSERBASE": str(root / "userbase"),
                   "KPATCH_SRC": str(root / "src"), "KPATCH_DEPS": str(root / "deps"),
                   "KPATCH_OUT": str(root / "out"), "PIP_BREAK_SYSTEM_PACKAGES": "1"}
            env.pop("KPATCH_SCCACHE", None)  # the host's sccache server (if any) is the user's: never stopped here
            proc = subprocess.Popen(["sh", str(root / "build-wheel.sh")], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace")
            assert proc.stdout is not None
            tail: list[str] = []
            for line in proc.stdout:
                tail = [*tail[-(TAIL - 1):], line.rstrip("\n")]
                on_line(tail[-1])
            status = proc.wait()
            if status != 0:
                raise BuildError(f"{job.name}: build step failed (exit {status}); last lines:\n" + "\n".join(tail))
            return collect(job.name, {p.name: p.read_bytes() for p in (root / "out").iterdir() if p.is_file()})
