"""`kpatch test --backend local`: each suite on this host (as `build-wheels --backend local` builds), not in an image.

Each suite runs in a fresh venv of kpatch's own (`hostenv`), never in the user's interpreter: the pair goes in from
its lock (the hash-checked bytes) with the suite's requirements, in one pip resolution, from the package index.
Upstream code sees an allowlisted environment (`procs`: no credential). The test files of the locked commit run in
a scratch folder that goes away with everything else. Verdicts, reports and newly failing tests are those of the
container runner.
"""

from __future__ import annotations

import os
import tarfile
import time
from collections.abc import Mapping
from io import BytesIO
from pathlib import Path

from kpatch import procs, scratch
from kpatch.config import TestSuite, Upstream
from kpatch.container.docker import TimedRun
from kpatch.files import extract_tar
from kpatch.output.ui import UI, activity
from kpatch.project.workspace import Workspace
from kpatch.testing import env as testenv
from kpatch.testing.run import LiveLog, SuiteResult, TestRun, _Suite, checked, each_suite
from kpatch.testing.scripts import script
from kpatch.wheels import hostenv

RUN_HERE_SH = script("run-here.sh")


def run_local(ws: Workspace, ui: UI, *, names: tuple[str, ...], devices: tuple[str, ...], timeout: float | None,
              lock: Path, reports: Path, tests: Mapping[str, tuple[str, ...]]) -> TestRun:
    """Check the suites, the lock and its wheels first; then each suite on this host, in dependency order."""
    suites, pair, found = checked(ws, names, devices, lock)

    def one(upstream: Upstream, suite: TestSuite) -> SuiteResult:
        runner = _HostSuite(ws, ui, pair, upstream, suite, reports, tests.get(upstream.name))
        return runner.run_here(found.paths, timeout if timeout is not None else suite.timeout)

    results = each_suite(ui, pair, suites, reports, found, one)
    return TestRun(lock=lock, reports=reports, devices=found.paths, removed_leftovers=0, suites=results)


class _HostSuite(_Suite):
    """One suite run in a fresh venv of kpatch's own in a scratch folder, judged like a container run."""

    def run_here(self, devices: tuple[str, ...], timeout: float) -> SuiteResult:
        source = self._source()
        wheels = testenv.closure(self.ws.stack, self.pair, self.name)
        previous = self._previous()
        with scratch.folder("test") as folder:
            root = Path(folder)
            for sub in ("home", "wheels", "test"):
                (root / sub).mkdir()
            with tarfile.open(fileobj=BytesIO(source)) as tar:
                extract_tar(tar, root / "test")
            for wheel in wheels:
                (root / "wheels" / wheel.filename).write_bytes(self.pair.files[wheel.filename])
            (root / "run-tests.sh").write_bytes(RUN_HERE_SH)
            junit_file = root / "test" / self.suite.junit
            bin_dir = hostenv.fresh(hostenv.seed(self.ws.cache_dir, os.environ), root / "venv")
            given = {**dict(self.suite.env), "HOME": str(root / "home"), "PYTHONUNBUFFERED": "1",
                     "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or str(self.ws.cache_dir / "pip"),
                     "KPATCH_TEST_COMMAND": self.suite.command, "KPATCH_TEST_DIR": str(root / "test"),
                     "KPATCH_JUNIT": str(junit_file), "KPATCH_DEVICES": " ".join(devices), **self.selected()}
            env = hostenv.run_env(bin_dir, os.environ, given)
            args = [str(root / "wheels" / w.filename) for w in wheels] + list(self.suite.requires)
            with activity(self.ui, f"{self.name}: running its tests at {self.commit[:12]} on this host") as on, \
                    LiveLog(self.log_path, on) as live:
                started = time.monotonic()
                done = procs.run(["sh", str(root / "run-tests.sh"), *args], cwd=root / "test", env=env,
                                 on_output=live, timeout=timeout)
                run = TimedRun(status=done.status, timed_out=done.timed_out, oom_killed=False)
                seconds = round(time.monotonic() - started, 3)
            report = junit_file.read_bytes() if junit_file.is_file() else None
        return self._judge(run, report, live, previous, seconds, timeout)

