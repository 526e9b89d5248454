"""kpatch test without an engine: JUnit from a real pytest run, the live log's running test, devices, and
[upstream.test] / option errors (one line naming file:line, exit 2, nothing written)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from kpatch.errors import ExitCode, UsageError
from kpatch.examples.upstreams import make_example_project
from kpatch.testing import junit
from kpatch.testing.devices import find_devices
from kpatch.testing.run import LiveLog
from tests.support.cli import run_kpatch
from tests.support.gitrepos import Project
from tests.support.upstream_env import SECRETS, SEEN
from tests.support.upstream_env import seen as read_seen

SUITE = '''import time

import pytest


def test_adds():
    assert 1 + 1 == 2


@pytest.mark.parametrize("n", [1, 2])
def test_even(n):
    assert n % 2 == 0


@pytest.fixture
def broken():
    raise RuntimeError("no fixture today")


def test_needs_a_fixture(broken):
    pass


@pytest.mark.skip(reason="not here")
def test_skipped():
    pass


@pytest.mark.xfail(reason="known")
def test_known_bad():
    assert False


def test_slow():
    time.sleep(float(__import__("os").environ.get("SLOW", "0.2")))
'''


def _pytest_junit(folder: Path, suite: str, name: str) -> bytes:
    (folder / "test_suite.py").write_text(suite)
    report = folder / name
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder / "test_suite.py"),
                    f"--junitxml={report}"], cwd=folder, capture_output=True, check=False)
    return report.read_bytes()


def test_junit_from_a_real_pytest_run(tmp_path: Path) -> None:
    report = junit.parse(_pytest_junit(tmp_path, SUITE, "first.xml"))
    counts = report.counts()
    assert (counts.passed, counts.failed, counts.errors, counts.skipped) == (3, 1, 1, 2)
    verdicts = {c.id: c.verdict for c in report.cases}
    assert verdicts["test_suite::test_even[1]"] is junit.Verdict.FAILED
    assert verdicts["test_suite::test_needs_a_fixture"] is junit.Verdict.ERROR
    assert verdicts["test_suite::test_known_bad"] is junit.Verdict.SKIPPED
    assert report.slowest(1)[0].id == "test_suite::test_slow" and report.slowest(1)[0].seconds >= 0.2
    assert "no fixture today" in next(c.message for c in report.failing() if c.verdict is junit.Verdict.ERROR)

    fixed = junit.parse(_pytest_junit(tmp_path, SUITE.replace("n % 2 == 0", "n > 0").replace(
        "assert 1 + 1 == 2", "assert 1 + 1 == 3"), "second.xml"))
    changes = junit.compare(report, fixed)
    assert changes.newly_failing == ("test_suite::test_adds",)
    assert changes.newly_passing == ("test_suite::test_even[1]",)  # [2] passed both times


@pytest.mark.parametrize("data", [b"", b"<html/>", b"<testsuites><testcase/></testsuites>",
                                  b'<testsuite><testcase name="a" time="soon"/></testsuite>'])
def test_junit_that_is_not_junit_is_refused(data: bytes) -> None:
    with pytest.raises(junit.JUnitError):
        junit.parse(data)


def test_the_live_log_names_the_test_that_hangs(tmp_path: Path) -> None:
    """pytest -v prints a test's id, then runs it: a hung test leaves its id on an unfinished line."""
    (tmp_path / "test_hang.py").write_text("import time\n\n\ndef test_quick():\n    pass\n\n\n"
                                           "def test_hangs():\n    time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "test_hang.py"],
                            cwd=tmp_path, stdout=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    seen: list[str] = []
    assert proc.stdout is not None
    try:
        with LiveLog(tmp_path / "live.log", seen.append) as live:
            deadline = time.monotonic() + 30
            while live.running != "test_hang.py::test_hangs":
                assert time.monotonic() < deadline, f"never saw the hung test; last: {live.running}"
                live(os.read(proc.stdout.fileno(), 7).decode())  # small reads: ids arrive split
    finally:
        proc.kill()
        proc.wait()
    assert any(line.startswith("test_hang.py::test_quick PASSED") for line in seen)
    assert "test_hang.py::test_hangs" in (tmp_path / "live.log").read_text()


def test_devices_from_the_dri_folder_or_the_command_line(tmp_path: Path) -> None:
    none = find_devices((), tmp_path / "no-dri")
    assert none.specs == () and none.none_because == f"no GPU render node in {tmp_path / 'no-dri'}"
    given = find_devices(("/dev/null", "/dev/zero:/dev/dri/renderD128"), tmp_path)
    assert given.specs == ("/dev/null:/dev/null:rwm", "/dev/zero:/dev/dri/renderD128:rwm")
    assert given.paths == ("/dev/null", "/dev/dri/renderD128")
    with pytest.raises(UsageError, match="--device /dev/kpatch-none: no such device"):
        find_devices(("/dev/kpatch-none",), tmp_path)
    with pytest.raises(UsageError, match="absolute PATH"):
        find_devices(("dri",), tmp_path)


@pytest.mark.parametrize("path", ["/etc/passwd", "/etc/passwd:/dev/dri/renderD128"])
def test_a_device_that_is_a_plain_file_is_a_usage_error_not_an_engine_crash(path: str) -> None:
    """`kpatch test --device /etc/passwd` reached the engine, whose API error was exit 70."""
    with pytest.raises(UsageError, match=r"^--device /etc/passwd: not a device file"):
        find_devices((path,), Path("/nonexistent"))


def _add_test_table(project: Project, body: str) -> None:
    path = project.root / "kpatch.toml"
    path.write_text(path.read_text().replace('requires = ["pytest==9.0.3"]\ntimeout = 300\n', body, 1))


@pytest.mark.parametrize(("body", "message"), [
    ('requires = ["pytest"]\ncomand = "x"\n', r"kpatch\.toml:(\d+): \[upstream\.test\] has unknown key 'comand'"),
    ('devices = ["gpu"]\n', r"kpatch\.toml:(\d+): \[upstream\.test\] unknown device kind 'gpu' \(known: xpu\)"),
    ('junit = "../out.xml"\n', r"kpatch\.toml:(\d+): \[upstream\.test\] 'junit' must be a relative path"),
    ("timeout = -1\n", r"kpatch\.toml:(\d+): \[upstream\.test\] 'timeout' must be a positive number"),
    ('paths = ["/etc"]\n', r"kpatch\.toml:(\d+): \[upstream\.test\] 'paths' must list relative paths"),
    ('requires = "pytest"\n', r"kpatch\.toml:(\d+): \[upstream\.test\] 'requires' must be a list"),
])
def test_bad_test_tables_name_the_line(project: Project, body: str, message: str) -> None:
    _add_test_table(project, body)
    before = project.snapshot()
    result = project.run("test")
    assert result.exit_code == ExitCode.BAD_INPUT
    match = re.search(message, result.stderr)
    assert match, result.stderr
    lines = (project.root / "kpatch.toml").read_text().splitlines()
    assert body.splitlines()[-1] == lines[int(match.group(1)) - 1]  # the line of the bad key
    assert project.snapshot() == before


def test_a_test_table_without_a_command(project: Project) -> None:
    path = project.root / "kpatch.toml"
    text = path.read_text()
    path.write_text(text.replace('command = "python3 -m pytest -v tests --junitxml=$KPATCH_JUNIT"\n', "", 1))
    result = project.run("test")
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "[upstream.test] needs a non-empty 'command'" in result.stderr


def test_options_that_cannot_work(project: Project) -> None:
    path = project.root / "kpatch.toml"
    text = path.read_text()
    header = text.index("[upstream.test]")
    path.write_text(text[:header] + text[header:].replace("[upstream.test]\n", "[upstream.tst]\n", 1))
    result = project.run("test", "--upstream", "app")
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "unknown key 'tst'" in result.stderr
    path.write_text(text[:header] + text[header:].split("\n\n", 1)[1])  # the app's test table removed
    missing = project.run("test", "--upstream", "app")
    assert missing.exit_code == ExitCode.BAD_INPUT
    assert "kpatch.toml:3: upstream app has no [upstream.test]" in missing.stderr
    unknown = project.run("test", "--upstream", "nope")
    assert unknown.exit_code == ExitCode.BAD_INPUT and "unknown upstream 'nope'" in unknown.stderr
    zero = project.run("test", "--timeout", "0")
    assert zero.exit_code == ExitCode.BAD_INPUT and "--timeout" in zero.stderr
    assert not (project.root / "reports").exists()


def test_a_local_test_run_gives_the_suite_a_venv_of_its_own_and_no_credential(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kpatch test --backend local: the suite's python3 is a fresh venv (not kpatch's interpreter, kpatch's
    site-packages not on its path), no secret-named variable of kpatch's environment reaches it, and no secret's
    value is in kpatch's output, the reports folder or the log."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    toml = root / "kpatch.toml"
    text = toml.read_text()
    suite = 'command = "python3 -m pytest -v tests --junitxml=$KPATCH_JUNIT"'
    at = text.index(suite, text.index('name = "kernels"'))
    toml.write_text(text[:at] + f"command = {json.dumps(SEEN + ' && env')}" + text[at + len(suite):])
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    built = run_kpatch(root, "build-wheels", "--backend", "local", *cache)
    assert built.exit_code == 0, built.output
    result = run_kpatch(root, "test", "--backend", "local", "--upstream", "kernels", *cache)
    assert result.exit_code == ExitCode.CONFLICT, result.output  # the suite wrote no JUnit report
    seen = read_seen(root / "reports" / "kernels.log")
    prefix = Path(str(seen["prefix"]))
    assert prefix != Path(str(seen["base"])), "the suite did not run in a venv"
    assert prefix.resolve() != Path(sys.prefix).resolve() and not prefix.is_relative_to(Path(sys.prefix))
    ours = Path(sysconfig.get_path("purelib")).resolve()
    assert not any(Path(p).resolve() == ours for p in seen["path"] if p), "kpatch's site-packages reached the suite"
    env = seen["env"]
    assert isinstance(env, dict) and not set(SECRETS) & set(env), sorted(env)
    assert Path(env["PATH"].split(os.pathsep)[0]) == prefix / "bin"
    logs = sorted((tmp_path / "cache" / "logs").glob("kpatch-*.log"))  # the build's and the test run's
    assert any(p.name.endswith("-test.log") for p in logs), logs
    shown = result.output + "".join(p.read_text(errors="replace") for p in
                                    [*logs, *(root / "reports").rglob("*")] if p.is_file())
    assert not [name for name, value in SECRETS.items() if value in shown]
