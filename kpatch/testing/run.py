"""`kpatch test`: each upstream's suite in the build image against the locked pair, JUnit into reports/.

Files go into and out of containers as archives (never bind mounts); the test container has no network, runs
as the build user, unprivileged, with only the Intel GPU devices passed through, and always goes away.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import TextIO

from kpatch.config import Stack, TestSuite, Upstream
from kpatch.container.docker import Container, Engine, TimedRun
from kpatch.container.image import Toolchain
from kpatch.errors import BuildError, ConfigError, ExitCode, GitError, WorktreeError
from kpatch.files import new_file_mode, sha256, temp_beside, write_atomic
from kpatch.output.ui import UI, activity
from kpatch.project.workspace import Workspace
from kpatch.testing import env as testenv
from kpatch.testing import junit
from kpatch.testing.devices import DRI_ENV, Devices, find_devices
from kpatch.testing.scripts import script
from kpatch.wheels.record import Wheel

log = logging.getLogger("kpatch.test")
TEST_DIR = "/kpatch/test"  # the suite runs in a writable copy of the test files, here
INSTALL_FAILED = 90  # the run script's exit status when the locked wheels do not install
RUN_TESTS_SH = script("run-tests.sh")


_NOT_A_WORD = re.compile(r"[\s*?\[\]\\]")  # what the shell's field splitting or pathname expansion would change


def tests_variable(tests: Sequence[str]) -> str:
    """$KPATCH_TESTS: the test files, one word each for the command's unquoted `${KPATCH_TESTS}` (`sh -c` splits it
    at spaces, then expands patterns in the test folder). A path with a space, tab or pattern character is given
    as a pattern with `?` there, which the shell expands back to that path (and to any other test file the same
    pattern matches, which runs then too)."""
    return " ".join(_NOT_A_WORD.sub("?", test) for test in tests)


class Outcome(Enum):
    PASSED = "passed"
    FAILED = "failed"  # a test failed or errored, or the command exited non-zero
    TIMED_OUT = "timed-out"  # kpatch stopped the suite at its timeout
    KILLED = "killed"  # the container was killed (docker kill, out of memory) before the suite ended
    NO_REPORT = "no-report"  # the suite ended without a readable JUnit file
    NO_DEVICE = "no-device"  # the suite needs an XPU and there is none: not run


@dataclass(frozen=True)
class SuiteResult:
    upstream: str
    outcome: Outcome
    message: str  # why it did not pass, in one line ("" when it passed)
    counts: junit.Counts | None
    failing: tuple[junit.Case, ...]
    slowest: tuple[junit.Case, ...]
    changes: junit.Changes | None  # None: no previous report to compare with
    running: str | None  # the test that was running when the suite was stopped
    exit_code: int | None  # of the suite's command (None: it was stopped, or did not run)
    seconds: float  # wall time of the container run
    commit: str  # the patched commit the test files come from (the one the locked wheel was built from)
    junit: Path | None
    log: Path | None


@dataclass(frozen=True)
class TestRun:
    lock: Path
    reports: Path
    devices: tuple[str, ...]  # as seen inside the containers
    removed_leftovers: int  # test containers of a killed kpatch run, removed before this one
    suites: tuple[SuiteResult, ...]

    @property
    def exit_code(self) -> ExitCode:
        outcomes = {s.outcome for s in self.suites}
        if outcomes - {Outcome.PASSED, Outcome.NO_DEVICE}:
            return ExitCode.CONFLICT  # a test failed: a person has to look
        return ExitCode.NO_DEVICE if Outcome.NO_DEVICE in outcomes else ExitCode.OK


def run(ws: Workspace, ui: UI, *, names: tuple[str, ...], devices: tuple[str, ...], timeout: float | None,
        lock: Path, reports: Path, tests: Mapping[str, tuple[str, ...]]) -> TestRun:
    """Check everything first (suites, lock, wheel hashes, devices), then run each suite in dependency order."""
    suites, pair, found = checked(ws, names, devices, lock)
    engine = Engine()
    removed = engine.remove_orphans()
    if removed:
        ui.warn(f"removed {removed} test container(s) left by an interrupted run")
    image = _build_image(engine, pair)

    def one(upstream: Upstream, suite: TestSuite) -> SuiteResult:
        runner = _Suite(ws, ui, pair, upstream, suite, reports, tests.get(upstream.name))
        return runner.run(engine, image, found, timeout if timeout is not None else suite.timeout)

    results = each_suite(ui, pair, suites, reports, found, one)
    return TestRun(lock=lock, reports=reports, devices=found.paths, removed_leftovers=removed, suites=results)


def checked(ws: Workspace, names: tuple[str, ...], devices: tuple[str, ...],
            lock: Path) -> tuple[list[tuple[Upstream, TestSuite]], testenv.LockedPair, Devices]:
    """What is checked before anything runs: the suites, the lock and its wheels, the devices."""
    suites = selected(ws.stack, names)
    pair = testenv.read_pair(lock)
    for upstream, _ in suites:
        pair.wheel(upstream.name)
    return suites, pair, find_devices(devices, Path(os.environ.get(DRI_ENV, "/dev/dri")))


def each_suite(ui: UI, pair: testenv.LockedPair, suites: list[tuple[Upstream, TestSuite]], reports: Path,
               found: Devices, one: Callable[[Upstream, TestSuite], SuiteResult]) -> tuple[SuiteResult, ...]:
    """Run each suite with `one`, in order; a suite that needs a device this run has none of is not run."""
    try:
        reports.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BuildError(f"cannot write the reports to {reports}: {err.strerror}") from None
    results = []
    for upstream, suite in suites:
        if suite.devices and not found.paths:
            message = f"no XPU here ({found.none_because}): not run; give --device PATH where there is one"
            ui.warn(f"{upstream.name}: {message}")
            results.append(_not_run(upstream.name, pair.commit(upstream.name), message))
        else:
            results.append(one(upstream, suite))
    return tuple(results)


def selected(stack: Stack, names: tuple[str, ...]) -> list[tuple[Upstream, TestSuite]]:
    """The upstreams to test, in dependency order: those named, else every one with an [upstream.test]."""
    for name in names:
        upstream = stack.get(name)
        if upstream.test is None:
            raise ConfigError(f"{stack.path}:{upstream.line}: upstream {name} has no [upstream.test]")
    chosen = [(u, u.test) for u in stack.upstreams if u.test is not None and (not names or u.name in names)]
    if not chosen:
        raise ConfigError(f"{stack.path}: no upstream has an [upstream.test] table")
    return chosen


def _build_image(engine: Engine, pair: testenv.LockedPair) -> Toolchain:
    if not pair.image_digest or pair.image_digest.startswith("local:"):
        raise BuildError(f"{pair.path}: the pair was not built in an image (--backend local): run "
                         "'kpatch test --backend local', or build with the docker backend")
    if not engine.has_image(pair.image_digest):
        raise BuildError(f"the build image {pair.image} ({pair.image_digest[:19]}) of {pair.path} is not on the "
                         "engine: run 'kpatch build-wheels' again")
    return engine.image(pair.image_digest)


def _not_run(name: str, commit: str, message: str) -> SuiteResult:
    return SuiteResult(upstream=name, outcome=Outcome.NO_DEVICE, message=message, counts=None, failing=(),
                       slowest=(), changes=None, running=None, exit_code=None, seconds=0.0, commit=commit, junit=None,
                       log=None)


def open_fresh(path: Path) -> TextIO:
    """A new file put at `path` at once: a symlink or hard link planted there is replaced, never written through."""
    try:
        fd, tmp = temp_beside(path)
    except OSError as err:
        raise BuildError(f"cannot write {path}: {err.strerror}") from None
    try:
        os.fchmod(fd, new_file_mode())
        Path(tmp).replace(path)
    except OSError as err:
        os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        raise BuildError(f"cannot write {path}: {err.strerror}") from None
    return os.fdopen(fd, "w", encoding="utf-8")


class LiveLog:
    """The suite's output as it comes: into its log file and the run's log, the latest line to the spinner,
    and the pytest -v test id last started (a hung test prints its id, then nothing, with no newline)."""

    TEST_ID = re.compile(r"^(\S+?\.py::\S+)")

    def __init__(self, path: Path, forward: Callable[[str], None]) -> None:
        self.path, self.forward = path, forward
        self.running: str | None = None
        self.lines: list[str] = []
        self.partial = ""
        self.file = open_fresh(path)

    def __call__(self, text: str) -> None:
        self.file.write(text)
        self.file.flush()
        *complete, self.partial = (self.partial + text).split("\n")
        for line in complete:
            self._see(line)
            self.lines = [*self.lines[-14:], line]
            self.forward(line)
        self._see(self.partial)

    def _see(self, line: str) -> None:
        match = self.TEST_ID.match(line.strip("\r"))
        if match:
            self.running = match.group(1)

    def tail(self) -> str:
        return "\n".join([*self.lines, self.partial] if self.partial else self.lines)

    def __enter__(self) -> LiveLog:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.file.close()


class _Suite:
    """One upstream's suite: its test files, test image, container run and verdict."""

    def __init__(self, ws: Workspace, ui: UI, pair: testenv.LockedPair, upstream: Upstream, suite: TestSuite,
                 reports: Path, tests: tuple[str, ...] | None = None) -> None:
        self.ws, self.ui, self.pair = ws, ui, pair
        self.tests = tests  # the test files in the order they run ($KPATCH_TESTS), or None: the command's own
        self.name, self.upstream, self.suite = upstream.name, upstream, suite
        self.commit = pair.commit(upstream.name)
        self.junit_path, self.log_path = reports / f"{self.name}.xml", reports / f"{self.name}.log"

    def run(self, engine: Engine, image: Toolchain, devices: Devices, timeout: float) -> SuiteResult:
        source = self._source()
        wheels = testenv.closure(self.ws.stack, self.pair, self.name)
        tag = testenv.image_tag(image, self.suite, wheels, source)
        if engine.has_image(tag):
            env_image = engine.image(tag)
        else:
            with activity(self.ui, f"{self.name}: building the test image {tag} (the pair's dependencies and "
                                   f"{' '.join(self.suite.requires) or 'no test requirements'})") as on:
                env_image = testenv.build_image(engine, image, tag, self.name, self.suite, wheels, self.pair.files,
                                                source, _project_id(self.ws.stack), on)
        previous = self._previous()
        env = {**dict(self.suite.env), "KPATCH_TEST_COMMAND": self.suite.command, "PYTHONUNBUFFERED": "1",
               "KPATCH_JUNIT": f"{TEST_DIR}/{self.suite.junit}", "KPATCH_DEVICES": " ".join(devices.paths),
               **self.selected()}
        name = f"kpatch-test-{self.name}-{os.getpid()}-{int(time.time() * 1000) % 10**8}"
        with activity(self.ui, f"{self.name}: running its tests at {self.commit[:12]}") as on, \
                LiveLog(self.log_path, on) as live, \
                engine.sandbox(env_image, name=name, command=["sh", "/kpatch/run-tests.sh"], env=env,
                               labels={}, network=False, devices=devices.specs, groups=devices.groups) as box:
            started = time.monotonic()
            run = self._start(box, wheels, source, live, timeout)
            seconds = round(time.monotonic() - started, 3)
            report = box.read(f"{TEST_DIR}/{self.suite.junit}")
        return self._judge(run, report, live, previous, seconds, timeout)

    def selected(self) -> dict[str, str]:
        """$KPATCH_TESTS when the tests run in a chosen order (test selection); nothing otherwise."""
        return {"KPATCH_TESTS": tests_variable(self.tests)} if self.tests else {}

    def _source(self) -> bytes:
        """The test files (`paths`) of the patched commit the locked wheel was built from."""
        try:
            return self.ws.mirror(self.name).archive(self.commit, "", self.suite.paths)
        except GitError as err:
            raise WorktreeError(f"{self.name}: cannot take {', '.join(self.suite.paths)} from the locked commit "
                                f"{self.commit[:12]} in {self.ws.mirror(self.name).path} ({err.stderr.strip()[:200]}): "
                                "check [upstream.test] paths, or run 'kpatch apply' and 'kpatch build-wheels'") \
                from None

    def _previous(self) -> junit.Report | None:
        if not self.junit_path.exists():
            return None
        try:
            return junit.parse(self.junit_path.read_bytes())
        except (OSError, junit.JUnitError) as err:
            self.ui.warn(f"{self.junit_path}: previous report unreadable ({err}); nothing to compare with")
            return None

    def _start(self, box: Container, wheels: tuple[Wheel, ...], source: bytes, live: LiveLog,
               timeout: float) -> TimedRun:
        box.put("/kpatch", [("run-tests.sh", RUN_TESTS_SH, 0o555), ("wheels", None, 0o555), ("src", None, 0o555),
                            *((f"wheels/{w.filename}", self.pair.files[w.filename], 0o444) for w in wheels)])
        box.put_tar("/kpatch/src", source)  # root-owned: the suite runs on a copy
        return box.run_until(live, timeout)

    def _judge(self, run: TimedRun, data: bytes | None, live: LiveLog, previous: junit.Report | None,
               seconds: float, timeout: float) -> SuiteResult:
        where = f" while running {live.running}" if live.running else " (no pytest -v test id in its output)"
        report, message = None, ""
        if run.timed_out:
            outcome, message = Outcome.TIMED_OUT, f"stopped at the timeout ({timeout:g} s){where}"
        elif run.status == INSTALL_FAILED and data is None:
            outcome, message = Outcome.NO_REPORT, "the locked wheels did not install in the test image"
        elif data is None and (run.oom_killed or run.status == 137):
            memory = ", out of memory" if run.oom_killed else ""
            outcome, message = Outcome.KILLED, f"the test container was killed (exit {run.status}{memory}){where}"
        elif data is None:
            outcome = Outcome.NO_REPORT
            message = f"the suite exited (status {run.status}) without writing {self.suite.junit}"
        else:
            try:
                report = junit.parse(data)
            except junit.JUnitError as err:
                outcome, message = Outcome.NO_REPORT, f"{self.suite.junit} is not JUnit XML: {err}"
            else:
                outcome, message = self._verdict(run.status, report)
        if outcome is not Outcome.PASSED:
            log.warning("%s: %s; last lines:\n%s", self.name, message, live.tail())
        if report is not None:
            self._keep(data or b"")
        return SuiteResult(
            upstream=self.name, outcome=outcome, message=message, counts=report.counts() if report else None,
            failing=report.failing() if report else (), slowest=report.slowest() if report else (),
            changes=junit.compare(previous, report) if report and previous else None,
            running=live.running if outcome in (Outcome.TIMED_OUT, Outcome.KILLED) else None,
            exit_code=None if run.timed_out else run.status, seconds=seconds, commit=self.commit,
            junit=self.junit_path if report else None, log=self.log_path)

    @staticmethod
    def _verdict(status: int, report: junit.Report) -> tuple[Outcome, str]:
        counts = report.counts()
        if counts.failed or counts.errors:
            return Outcome.FAILED, f"{counts.failed} failed, {counts.errors} error(s)"
        if status != 0:
            return Outcome.FAILED, f"the suite exited with status {status} ({len(report.cases)} test(s) reported)"
        return Outcome.PASSED, ""

    def _keep(self, data: bytes) -> None:
        """The new report replaces the previous one only when it is complete: a stopped run keeps the baseline."""
        try:
            write_atomic(self.junit_path, data)
        except OSError as err:
            raise BuildError(f"cannot write {self.junit_path}: {err.strerror}") from None


def _project_id(stack: Stack) -> str:
    """Which project a test image belongs to (its kpatch.toml's folder), for removing that project's old ones."""
    return sha256(str(stack.root).encode())[:12]
