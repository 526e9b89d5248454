"""procs.run: the one starter of processes other than git."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kpatch import procs

pytestmark = pytest.mark.unit
ENV = {"PATH": os.defpath}


def test_a_run_that_outlives_its_timeout_is_killed_with_its_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild"
    script = f"sleep 60 & echo $! > {pid_file}; echo started; sleep 60"
    started = time.monotonic()
    done = procs.run(["sh", "-c", script], env=ENV, timeout=1)
    assert done.timed_out and done.status == 128 + 9 and done.output == "started\n"
    assert time.monotonic() - started < 30
    grandchild = int(pid_file.read_text())
    for _ in range(100):  # the kernel reaps it a moment after the kill
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the background sleep {grandchild} outlived the timeout")


def test_output_streams_raw_chunks_so_a_line_without_its_newline_is_seen() -> None:
    seen: list[str] = []
    done = procs.run(["sh", "-c", "printf 'no newline'; exit 3"], env=ENV, timeout=30, on_output=seen.append)
    assert "".join(seen) == "no newline" and done.output == "" and done.status == 3 and not done.timed_out


def test_stdin_is_fed_and_stderr_kept_apart_when_asked() -> None:
    done = procs.run(["sh", "-c", "cat; echo oops >&2"], env=ENV, stdin="request", merge=False, timeout=30)
    assert (done.output, done.errors, done.status) == ("request", "oops\n", 0)


def test_the_environment_is_exactly_the_one_given() -> None:
    done = procs.run(["sh", "-c", "env"], env={"PATH": os.defpath, "ONLY": "this"}, timeout=30)
    names = {line.split("=", 1)[0] for line in done.output.splitlines()}
    assert "ONLY" in names and "HOME" not in names


def test_a_command_that_does_not_exist_is_status_127_with_a_one_line_reason(tmp_path: Path) -> None:
    done = procs.run([str(tmp_path / "nothing-here")], env=ENV)
    assert done.status == 127 and done.output == f"{tmp_path / 'nothing-here'}: No such file or directory"
