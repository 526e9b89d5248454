"""The local workers' step result (kpatch/nightly/workers.py): what a worker writes is what the night reads back,
and a worker that ends without one is a worker's failure named with its log, never a red step."""

from __future__ import annotations

import json
from pathlib import Path

from kpatch.dashboard.night import Failure, Selection, Stage, StepResult, Suite
from kpatch.nightly import workers
from kpatch.nightly.scroll import Attempt

SUITE = Suite(upstream="app", outcome="failed", message="1 failed", passed=2, failed=1, errors=0, skipped=0,
              failing=("tests.test_sampler::test_top: AssertionError: planted break",), newly_failing=(),
              newly_passing=(), compared=False, running=None, seconds=0.5)


def test_a_workers_step_result_reads_back_as_the_attempt_it_ran_its_lock_included(tmp_path: Path) -> None:
    attempt = Attempt(StepResult.GREEN, None, "the whole chain passed", None, (SUITE,), ("tests/t.py",),
                      b"lock-version = \"1.0\"\n", (Selection("app", "a" * 40, "b" * 40, ("tests/t.py",),
                                                               ("changed",), 1),))
    workers.write_result(tmp_path / workers.RESULT, attempt, 12.3456, tmp_path / workers.LOCK)
    data = json.loads((tmp_path / workers.RESULT).read_text())
    assert data["version"] == workers.RESULT_VERSION and data["seconds"] == 12.346
    ran = workers._collected(2, tmp_path, 0)
    assert (ran.attempt, ran.seconds, ran.where, ran.problem) == (attempt, 12.346, "worker 2", None)


def test_a_red_step_without_a_lock_reads_back_red(tmp_path: Path) -> None:
    failure = Failure(Stage.TEST, 1, "test: app: 1 failed", ("see the logs",), ("E planted break",))
    attempt = Attempt(StepResult.RED, Stage.TEST, "test: app: 1 failed", failure, (SUITE,), (), None)
    workers.write_result(tmp_path / workers.RESULT, attempt, 1.0, tmp_path / workers.LOCK)
    assert workers._collected(1, tmp_path, 0).attempt == attempt
    assert not (tmp_path / workers.LOCK).exists()


def test_a_worker_that_wrote_no_result_is_a_problem_naming_its_exit_and_its_log(tmp_path: Path) -> None:
    (tmp_path / workers.LOG).write_text("building app\nTraceback (most recent call last):\nMemoryError\n")
    ran = workers._collected(3, tmp_path, -9)
    assert ran.attempt is None and ran.where == "worker 3"
    assert ran.problem is not None and ran.problem.startswith("the worker exited -9 without a step result")
    assert str(tmp_path / workers.LOG) in ran.problem and "MemoryError" in ran.problem


def test_a_result_of_another_version_is_not_read_as_a_step(tmp_path: Path) -> None:
    (tmp_path / workers.RESULT).write_text(json.dumps({"version": 99, "seconds": 1, "attempt": {}}))
    ran = workers._collected(1, tmp_path, 0)
    assert ran.attempt is None and ran.problem is not None and "result version 99, not 1" in ran.problem
