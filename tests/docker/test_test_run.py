"""kpatch test on a real Docker engine: the example pair's pytest suites in the build image, the pair installed
from its lock. One pair is built per module; each test puts kpatch.toml and the patches back as they were."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from kpatch.errors import ExitCode
from kpatch.examples.upstreams import make_example_project
from tests.support.cli import run_kpatch, start

K1 = "0001-Add-the-kimi-op.patch"
OP_LINE = "return [list(head) + list(k_pe) for head in k_nope]"
ROPE_TESTS = [f"tests.test_kimi::test_key_concat_puts_the_rope_part_after_each_head[{n}]" for n in (1, 2, 4)]
FIRST_ROPE_TEST = "tests/test_kimi.py::test_key_concat_puts_the_rope_part_after_each_head[1]"


class Pair:
    """The example project, applied and built once; `edit` changes it, `restore` puts it back."""

    def __init__(self, tmp: Path, base_image: str) -> None:
        self.tmp = tmp
        self.root = make_example_project(tmp).root
        self.cache = tmp / "cache"
        self.base_image = base_image
        self.pristine = tmp / "pristine"
        assert self.run("apply").exit_code == 0
        self.build()
        shutil.copytree(self.root / "patches", self.pristine / "patches")
        shutil.copy(self.root / "kpatch.toml", self.pristine / "kpatch.toml")

    def run(self, *args: str) -> Result:
        return run_kpatch(self.root, *args, "--cache-dir", str(self.cache))

    def build(self) -> None:
        built = self.run("build-wheels", "--base-image", self.base_image)
        assert built.exit_code == 0, built.output

    def test(self, *args: str) -> tuple[Result, dict[str, Any]]:
        result = self.run("test", "--json", *args)
        suites = json.loads(result.stdout)["result"]["suites"] if result.stdout else []
        return result, {s["upstream"]: s for s in suites}

    def toml(self, old: str, new: str, count: int = 1) -> None:
        path = self.root / "kpatch.toml"
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new, count))

    def edit_op(self, new_line: str) -> None:
        """Change the kernels' op (a line of its first patch), apply and rebuild the pair."""
        patch = self.root / "patches" / "kernels" / K1
        text = patch.read_bytes().decode()  # bytes: the patch also holds CRLF lines (csrc/kernels.ini)
        assert OP_LINE in text
        patch.write_bytes(text.replace(OP_LINE, new_line).encode())
        assert self.run("apply").exit_code == 0
        self.build()

    def restore(self) -> None:
        changed = (self.root / "patches" / "kernels" / K1).read_bytes() != (
            self.pristine / "patches" / "kernels" / K1).read_bytes()
        shutil.rmtree(self.root / "patches")
        shutil.copytree(self.pristine / "patches", self.root / "patches")
        shutil.copy(self.pristine / "kpatch.toml", self.root / "kpatch.toml")
        shutil.rmtree(self.root / "reports", ignore_errors=True)
        if changed:  # back to the first build: its wheels come from the cache, no container
            assert self.run("apply").exit_code == 0
            self.build()


def kpatch_test_containers() -> list[str]:
    return subprocess.run(["docker", "ps", "-aq", "--filter", "label=kpatch.test"], capture_output=True, text=True,
                          check=True).stdout.split()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, base_image: str) -> Iterator[Pair]:
    tmp = tmp_path_factory.mktemp("testrun")
    with pytest.MonkeyPatch.context() as patch:  # the autouse isolation is per test; this runs before it
        patch.setenv("HOME", str(tmp))
        patch.setenv("GIT_CONFIG_GLOBAL", str(tmp / ".gitconfig"))
        (tmp / ".gitconfig").write_text("[user]\n\tname = Test User\n\temail = test@example.invalid\n"
                                        "[init]\n\tdefaultBranch = main\n")
        pair = Pair(tmp, base_image)
    yield pair
    project = hashlib.sha256(str(pair.root.resolve()).encode()).hexdigest()[:12]
    for upstream in ("kernels", "app"):  # the test images this module made
        images = subprocess.run(["docker", "images", "-q", "--filter", f"label=kpatch.test-env={project}/{upstream}"],
                                capture_output=True, text=True, check=True).stdout.split()
        if images:
            subprocess.run(["docker", "rmi", *images], capture_output=True, check=True)


@pytest.fixture
def pair(built: Pair) -> Iterator[Pair]:
    yield built
    built.restore()
    assert kpatch_test_containers() == []


def test_the_locked_pair_passes_its_suites_in_the_build_image(pair: Pair) -> None:
    result, suites = pair.test()
    assert result.exit_code == 0, result.output
    assert [suites[n]["outcome"] for n in ("kernels", "app")] == ["passed", "passed"]
    assert suites["kernels"]["counts"]["passed"] == 6 and suites["app"]["counts"]["passed"] == 2
    assert suites["kernels"]["changes"] is None  # the first report: nothing to compare with
    lock = (pair.root / "dist" / "pylock.toml").read_text()
    assert f'commit = "{suites["kernels"]["commit"]}"' in lock  # the test files are those of the built commit
    junit = (pair.root / "reports" / "kernels.xml").read_text()
    assert 'name="test_key_concat_of_no_heads_is_empty"' in junit
    assert "6 passed" in (pair.root / "reports" / "kernels.log").read_text()
    again, suites = pair.test("--upstream", "app")
    assert again.exit_code == 0 and list(suites) == ["app"]
    assert suites["app"]["changes"] == {"newly_failing": [], "newly_passing": []}
    human = pair.run("test", "--upstream", "kernels")
    assert human.exit_code == 0
    assert "kernels   passed   6" in human.stdout and "slowest:" in human.stdout


def test_a_broken_op_fails_the_run_and_shows_as_newly_failing_then_newly_passing(pair: Pair) -> None:
    assert pair.test()[0].exit_code == 0  # the baseline report
    pair.edit_op("return [list(k_pe) + list(head) for head in k_nope]")
    result, suites = pair.test()
    assert result.exit_code == ExitCode.CONFLICT
    kernels = suites["kernels"]
    assert kernels["outcome"] == "failed" and kernels["message"] == "3 failed, 0 error(s)"
    assert kernels["changes"]["newly_failing"] == ROPE_TESTS
    assert [c["id"] for c in kernels["failing"]] == ROPE_TESTS
    app_op_test = "tests.test_k3_xpu::test_the_kernels_have_the_op_the_xpu_path_calls"
    assert suites["app"]["changes"]["newly_failing"] == [app_op_test]
    assert "error: kernels: 3 failed, 0 error(s)" in result.stderr
    assert "test_key_concat_puts_the_rope_part_after_each_head[2] FAILED" in (
        pair.root / "reports" / "kernels.log").read_text()
    shutil.copy(pair.pristine / "patches" / "kernels" / K1, pair.root / "patches" / "kernels" / K1)
    assert pair.run("apply").exit_code == 0
    pair.build()
    fixed, suites = pair.test()
    assert fixed.exit_code == 0
    assert suites["kernels"]["changes"] == {"newly_failing": [], "newly_passing": ROPE_TESTS}


def test_a_hung_test_is_stopped_at_the_timeout_and_named(pair: Pair) -> None:
    pair.edit_op("return __import__('time').sleep(600)")
    started = time.monotonic()
    result, suites = pair.test("--upstream", "kernels", "--timeout", "6")
    assert time.monotonic() - started < 40
    assert result.exit_code == ExitCode.CONFLICT
    kernels = suites["kernels"]
    assert kernels["outcome"] == "timed-out" and kernels["running"] == FIRST_ROPE_TEST
    assert f"error: kernels: stopped at the timeout (6 s) while running {FIRST_ROPE_TEST}" in result.stderr
    assert not (pair.root / "reports" / "kernels.xml").exists()  # no JUnit from a stopped run
    assert kpatch_test_containers() == []


def test_a_suite_that_writes_no_junit_fails_and_keeps_the_previous_report(pair: Pair) -> None:
    assert pair.test("--upstream", "kernels")[0].exit_code == 0
    baseline = (pair.root / "reports" / "kernels.xml").read_bytes()
    pair.toml("tests --junitxml=$KPATCH_JUNIT", "tests", count=2)
    result, suites = pair.test("--upstream", "kernels")
    assert result.exit_code == ExitCode.CONFLICT
    assert suites["kernels"]["outcome"] == "no-report" and suites["kernels"]["exit_code"] == 0
    assert "error: kernels: the suite exited (status 0) without writing junit.xml" in result.stderr
    assert (pair.root / "reports" / "kernels.xml").read_bytes() == baseline
    assert "6 passed" in (pair.root / "reports" / "kernels.log").read_text()  # the log is this run's


def _start_hung_run(pair: Pair) -> tuple[subprocess.Popen[str], str]:
    """kpatch test in its own process, returned once the hung test has printed its id in the live log."""
    proc = start(pair.root, "test", "--json", "--upstream", "kernels", "--cache-dir", str(pair.cache))
    log = pair.root / "reports" / "kernels.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and FIRST_ROPE_TEST in log.read_text()) or not kpatch_test_containers():
        assert proc.poll() is None and time.monotonic() < deadline, "the hung test never started"
        time.sleep(0.1)
    return proc, kpatch_test_containers()[0]


def test_a_container_killed_mid_test_is_reported_and_the_next_run_starts_clean(pair: Pair) -> None:
    pair.edit_op("return __import__('time').sleep(600)")
    proc, container = _start_hung_run(pair)
    host = json.loads(subprocess.run(["docker", "inspect", container], capture_output=True, text=True,
                                     check=True).stdout)[0]["HostConfig"]
    assert host["Privileged"] is False and host["NetworkMode"] == "none" and not host.get("Binds")
    subprocess.run(["docker", "kill", container], check=True, capture_output=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.CONFLICT
    kernels = json.loads(out)["result"]["suites"][0]
    assert kernels["outcome"] == "killed" and kernels["running"] == FIRST_ROPE_TEST
    assert f"the test container was killed (exit 137) while running {FIRST_ROPE_TEST}" in err

    proc, container = _start_hung_run(pair)  # now kpatch itself dies: its container stays behind
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert kpatch_test_containers() == [container]
    shutil.copy(pair.pristine / "patches" / "kernels" / K1, pair.root / "patches" / "kernels" / K1)
    assert pair.run("apply").exit_code == 0
    pair.build()
    result, suites = pair.test("--upstream", "kernels")
    assert result.exit_code == 0, result.output
    assert "removed 1 test container(s) left by an interrupted run" in result.stderr
    assert suites["kernels"]["outcome"] == "passed"


def test_no_xpu_exits_with_its_own_code_and_a_device_is_passed_through(pair: Pair, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pair.toml("timeout = 300", 'timeout = 300\ndevices = ["xpu"]')
    empty = tmp_path / "dri"
    empty.mkdir()
    monkeypatch.setenv("KPATCH_DRI_DIR", str(empty))
    result, suites = pair.test()
    assert result.exit_code == ExitCode.NO_DEVICE
    assert suites["kernels"]["outcome"] == "no-device" and suites["app"]["outcome"] == "passed"
    assert f"error: kernels: no XPU here (no GPU render node in {empty}): not run" in result.stderr
    passed, suites = pair.test("--device", "/dev/zero:/dev/dri/renderD128")
    assert passed.exit_code == 0, passed.output
    assert json.loads(passed.stdout)["result"]["devices"] == ["/dev/dri/renderD128"]
    assert suites["kernels"]["counts"]["passed"] == 6  # one checks the device is in the container


def test_a_wheel_that_differs_from_the_lock_is_refused_before_any_container(pair: Pair) -> None:
    lock = pair.root / "dist" / "pylock.toml"
    packages = tomllib.loads(lock.read_text())["packages"]
    wheel = pair.root / "dist" / next(p["wheels"][0]["path"] for p in packages
                                      if p["tool"]["kpatch"]["upstream"] == "kernels")
    original = wheel.read_bytes()
    try:
        wheel.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        dist = {p.name: p.read_bytes() for p in (pair.root / "dist").iterdir()}
        result = pair.run("test")
        assert result.exit_code == ExitCode.BAD_INPUT
        assert {p.name: p.read_bytes() for p in (pair.root / "dist").iterdir()} == dist  # left as it was
        assert f"error: {wheel}: sha256 " in result.stderr and " differs from " in result.stderr
        assert f"in {lock}" in result.stderr
        wheel.unlink()
        missing = pair.run("test")
        assert missing.exit_code == ExitCode.BAD_INPUT and f"wheel {wheel.name} is missing" in missing.stderr
    finally:
        wheel.write_bytes(original)
    text = lock.read_text()
    try:
        lock.write_text(text.replace('lock-version = "1.0"', 'lock-version = "2.0"'))
        unknown = pair.run("test")
        assert unknown.exit_code == ExitCode.BAD_INPUT
        assert "pylock version 2.0 is not supported (kpatch writes lock-version 1.0)" in unknown.stderr
    finally:
        lock.write_text(text)
    assert not (pair.root / "reports").exists()
    no_lock = pair.run("test", "--lock", str(pair.tmp / "nowhere" / "pylock.toml"))
    assert no_lock.exit_code == ExitCode.BAD_INPUT and "run 'kpatch build-wheels' first" in no_lock.stderr


def test_no_docker_engine(pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as env:
        env.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        result = pair.run("test")
    assert result.exit_code == ExitCode.BUILD and "no Docker engine at unix:///nonexistent/docker.sock" in result.stderr
    assert not (pair.root / "reports").exists()

