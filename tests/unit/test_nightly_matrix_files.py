"""The files between the CI's jobs (kpatch/nightly/matrix.py): a round's plan carries the search's whole state and
reads back as it was written; a plan that is not one is a one-line error naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kpatch.dashboard.night import Breaker, Failure, Move, Pin, Span, Stage, Step, StepResult, Suite
from kpatch.errors import UsageError
from kpatch.nightly import matrix
from kpatch.nightly.rounds import Entry, Search, Tried
from kpatch.nightly.stages import Settings
from kpatch.output.ui import to_jsonable

SUITE = Suite(upstream="app", outcome="failed", message="1 failed", passed=2, failed=1, errors=0, skipped=0,
              failing=("tests.test_sampler::test_top: AssertionError: planted break",), newly_failing=(),
              newly_passing=(), compared=False, running=None, seconds=0.5)
RED = Tried(StepResult.RED, Stage.TEST, "test: app: 1 failed",
            Failure(Stage.TEST, 1, "test: app: 1 failed", ("see the logs",), ("E planted break",)), (SUITE,), (),
            None, ())
A, B, C, K = "a" * 40, "b" * 40, "c" * 40, "k" * 40


def _plan() -> matrix.RoundPlan:
    step = Step(upstream="app", commit=A, subject="News 1", result=StepResult.GREEN, seconds=3.5, stage=None,
                summary="the whole chain passed", pins=(Pin("kernels", K), Pin("app", A)), round=1, where="job 1")
    search = Search(moves=(Move("kernels", "main", K, K, 0), Move("app", "main", "0" * 40, C, 3)),
                    bases=(Pin("kernels", K), Pin("app", "0" * 40)), pins=(Pin("kernels", K), Pin("app", "0" * 40)),
                    max_steps=8, budget=7200.0, runners=2, started=1.7e9, heads=RED, move=1, commits=(A, B, C), lo=0,
                    hi=2, red=RED, lock='lock-version = "1.0"\n', steps=(step,),
                    spans=(Span("kernels", K, K, 0, K, None),), flaky=("tests/t.py",),
                    culprit=Breaker("app", B, "x", "Up <u@x>", "2023", Stage.TEST, "m", (), ()), stopped=None,
                    rounds=2)
    return matrix.RoundPlan(matrix.PLAN_KIND, matrix.PLAN_VERSION, "f" * 32, 2, Settings(backend="local"), search,
                            (Entry(1, "app", B, 1, "Tighten the sampler", (Pin("kernels", K), Pin("app", B))),))


def test_a_rounds_plan_reads_back_as_the_search_state_it_was_written_from(tmp_path: Path) -> None:
    plan = _plan()
    (tmp_path / "plan.json").write_text(json.dumps(to_jsonable(plan)))
    assert matrix.read_plan(tmp_path / "plan.json") == plan


@pytest.mark.parametrize(("change", "says"), [
    (lambda d: {**d, "kind": "kpatch-scroll-step"}, "not a round's plan (its kind"),
    (lambda d: {**d, "version": 2}, "a round's plan of version 2; this kpatch reads version 1"),
    (lambda d: {**d, "round": 3}, "its entries or round do not add up"),
    (lambda d: {**d, "search": {**d["search"], "lo": "0"}}, "not a round's plan (expected"),
    (lambda d: [d], "not a round's plan (its kind"),
])
def test_a_plan_that_is_not_one_is_a_one_line_error_naming_the_file(tmp_path: Path, change: object,
                                                                     says: str) -> None:
    assert callable(change)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(change(to_jsonable(_plan()))))
    with pytest.raises(UsageError) as err:
        matrix.read_plan(path)
    assert str(path) in str(err.value) and says in str(err.value) and "\n" not in str(err.value)
