"""The search's rounds as jobs of the CI's matrix (kpatch/nightly/matrix.py): the night plans round 1, each step
runs as a `kpatch nightly --run-step` process of its own (as a job of ci/nightly.yml would, with no token), and
`kpatch nightly --collect` takes the round's results and plans the next, until the search ends. Local-backend
nights on the example upstreams, the planted test break of test_nightly_scroll.py."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.git.test_nightly_scroll import _app_base, _day_with_a_break
from tests.support.cli import Ran, kpatch, start
from tests.support.fake_github import fake_github
from tests.support.gitrepos import Project
from tests.support.json_envelope import checked
from tests.support.nightly_world import World, make_world

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache(nightly_wheel_cache: Path) -> Path:
    return nightly_wheel_cache


@pytest.fixture
def world(project: Project, cache: Path) -> Iterator[World]:
    with fake_github() as fake:
        yield make_world(project, cache, fake)


def _no_token(world: World) -> dict[str, str]:
    """A step job's environment: no GitHub token (the step jobs get no secret)."""
    return {k: v for k, v in world.env.items() if v is not None and k != "GITHUB_TOKEN"}


def _job(world: World, *args: str) -> Ran:
    """One job: `python -m kpatch nightly ARGS` as a process of its own."""
    return kpatch(world.root, "nightly", *args, "--cache-dir", str(world.cache), env=_no_token(world))


def _planned(world: World, runners: int, plan: Path) -> dict[str, Any]:
    result, report = world.night("--backend", "local", "--dry-run", "--no-publish", "--runners", str(runners),
                                 "--plan-round", str(plan))
    assert result.exit_code == 1, result.output  # the night's code: the red heads' test stage
    assert report["scroll"] is None  # the search has not run: the matrix runs it
    planned: dict[str, Any] = json.loads((plan / "plan.json").read_text())
    return planned


def _schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((ROOT / "kpatch" / "nightly" / "schemas" / name).read_text())
    return schema


def test_the_matrix_path_run_as_separate_step_processes_finds_the_culprit_and_last_green_of_the_local_search(
        world: World, tmp_path: Path) -> None:
    commits, culprit = _day_with_a_break(world)
    folder = tmp_path / "scroll"
    plan = _planned(world, 2, folder)
    seen: list[tuple[int, list[str]]] = []
    while (folder / "plan.json").is_file():
        plan = json.loads((folder / "plan.json").read_text())
        jsonschema.validate(plan, _schema("scroll-plan.json"))
        matrix = json.loads((folder / "matrix.json").read_text())
        assert matrix == {"step": [e["number"] for e in plan["entries"]]}
        seen.append((plan["round"], [e["commit"] for e in plan["entries"]]))
        for number in matrix["step"]:
            ran = _job(world, "--json", "--run-step", str(folder / "plan.json"), str(number))
            assert ran.exit_code == 0, ran.output
            out = folder / "steps" / f"round-{plan['round']}-step-{number}"
            written = json.loads((out / "result.json").read_text())
            jsonschema.validate(written, _schema("scroll-step.json"))
            assert checked(ran.stdout, "nightly")["result"] == written
            assert (out / "step.log").is_file()
        collected = _job(world, "--json", "--collect", str(folder), "--report",
                         str(world.root / "reports" / "nightly"))
        assert collected.exit_code == 0, collected.output
        checked(collected.stdout, "nightly")
    # 2 runners on the 4 commits below the red head: commits 1 and 3 (green, the break), then commit 2: the
    # rounds kway.plan gives, as the local workers run them
    assert seen == [(1, [commits[0], culprit]), (2, [commits[1]])]
    report = json.loads((world.root / "reports" / "nightly" / "report.json").read_text())
    scroll = report["scroll"]
    (span,) = scroll["spans"]
    assert (span["last_green"], span["first_red"]) == (commits[1], culprit)  # as --runners 1 and 3 find them
    assert scroll["culprit"]["commit"] == culprit and scroll["complete"] and scroll["advanced"]
    assert [(s["round"], s["where"], s["commit"], s["result"]) for s in scroll["steps"]] == [
        (1, "job 1", commits[0], "green"), (1, "job 2", culprit, "red"), (2, "job 1", commits[1], "green")]
    assert (scroll["runners"], scroll["rounds"]) == (2, 2)
    assert any("planted break" in line for line in scroll["culprit"]["log_tail"])
    # the night ends as the local search leaves it: rebased onto the last green commit, its lock kept
    assert _app_base((world.root / "kpatch.toml").read_text()) == commits[1], collected.output[-3000:]
    assert "app" in (world.root / "pylock.toml").read_text()
    assert "culprit" in (world.root / "reports" / "nightly" / "report.md").read_text()
    assert not (world.root / ".kpatch" / "scroll-step-1").exists()


def test_a_malformed_or_foreign_step_result_is_a_one_line_error_naming_it_and_never_taken_as_green(
        world: World, tmp_path: Path) -> None:
    commits, culprit = _day_with_a_break(world)
    folder = tmp_path / "scroll"
    plan = _planned(world, 2, folder)
    before = (folder / "plan.json").read_bytes()
    (entry, _second) = plan["entries"]
    green = {"kind": "kpatch-scroll-step", "version": 1, "night": plan["night"], "round": 1, "entry": 1,
             "upstream": "app", "commit": entry["commit"], "seconds": 1.0, "where": "job 1",
             "tried": {"result": "green", "stage": None, "summary": "the whole chain passed", "failure": None,
                       "suites": [], "flaky": [], "lock": None, "selection": []}}
    cases = {
        "not JSON": ("{half a result", "not a step result (not JSON"),
        "another kind": (json.dumps({**green, "kind": "kpatch-scroll-plan"}), "not a step result (its kind"),
        "a newer version": (json.dumps({**green, "version": 99}), "a step result of version 99"),
        "another night": (json.dumps({**green, "night": "f" * 32}), "a step result of another night"),
        "another round": (json.dumps({**green, "round": 2}), "a step result of round 2"),
        "another commit": (json.dumps({**green, "commit": culprit if entry["commit"] != culprit else commits[3]}),
                           "is no step of round 1"),
        "a field missing": (json.dumps({k: v for k, v in green.items() if k != "tried"}), "not a step result"),
        "a wrong type": (json.dumps({**green, "tried": {**green["tried"], "result": "greenish"}}),
                         "not a step result"),
    }
    for name, (text, says) in cases.items():
        result = folder / "steps" / "kpatch-scroll-r1-e1" / "result.json"
        result.parent.mkdir(parents=True, exist_ok=True)
        result.write_text(text)
        ran = _job(world, "--collect", str(folder))
        assert ran.exit_code == 2, (name, ran.output)
        (line,) = ran.errors()
        assert str(result) in line and says in line, (name, line)
        assert (folder / "plan.json").read_bytes() == before, name  # nothing taken, nothing planned
    report = json.loads((world.root / "reports" / "nightly" / "report.json").read_text())
    assert report["scroll"] is None


def test_a_step_killed_mid_way_leaves_no_result_and_the_search_stops_naming_the_step(world: World,
                                                                                     tmp_path: Path) -> None:
    commits, culprit = _day_with_a_break(world)
    folder = tmp_path / "scroll"
    _planned(world, 2, folder)
    out = folder / "steps" / "round-1-step-1"
    proc = start(world.root, "nightly", "--run-step", str(folder / "plan.json"), "1", "--cache-dir",
                 str(world.cache), env=_no_token(world), start_new_session=True)
    scratch = world.root / ".kpatch" / "scroll-step-1" / "project" / "work"
    deadline = time.monotonic() + 300
    while not scratch.is_dir() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)  # killed once its chain has begun (its worktrees are there)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGKILL)  # the step and what it started, as a cancelled job's runner does
    proc.communicate()
    assert out.is_dir() and not (out / "result.json").exists()  # no half result, none at all
    ran = _job(world, "--collect", str(folder), "--report", str(world.root / "reports" / "nightly"))
    assert ran.exit_code == 0, ran.output
    scroll = json.loads((world.root / "reports" / "nightly" / "report.json").read_text())["scroll"]
    assert not scroll["complete"] and scroll["steps"] == []  # step 2 never ran either: nothing is taken as green
    assert "job 1 could not run" in scroll["stopped"] and "no step result" in scroll["stopped"]
    assert scroll["culprit"] is None and not scroll["advanced"]
    # the stacks end on the heads, as a red night leaves them
    assert _app_base((world.root / "kpatch.toml").read_text()) == commits[-1] != culprit
    assert not (world.root / ".kpatch" / "scroll-step-1").exists()  # the killed step's scratch swept


def test_plan_round_without_no_publish_is_refused_before_anything_runs(world: World, tmp_path: Path) -> None:
    result, _report = world.night("--backend", "local", "--plan-round", str(tmp_path / "scroll"))
    assert result.exit_code == 2
    assert "--plan-round goes with --no-publish" in result.output
    assert not (tmp_path / "scroll").exists() and world.fake.writes() == []


def _round_run(world: World, folder: Path) -> list[tuple[str, str]]:
    """Run every step job of the round planned in `folder` all at once, as a matrix's jobs start together on
    runners sharing one cache. Each step's commit and result."""
    plan = json.loads((folder / "plan.json").read_text())
    numbers = [e["number"] for e in plan["entries"]]
    procs = [start(world.root, "nightly", "--run-step", str(folder / "plan.json"), str(n), "--cache-dir",
                   str(world.cache), env=_no_token(world)) for n in numbers]
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, out + err
    steps = [json.loads((folder / "steps" / f"round-{plan['round']}-step-{n}" / "result.json").read_text())
             for n in numbers]
    return [(step["commit"], step["tried"]["result"]) for step in steps]


def test_step_jobs_at_once_on_one_cache_then_collect_final_stop_the_search_saying_how_far_it_got(
        world: World, tmp_path: Path) -> None:
    """A round's jobs start together (on self-hosted runners, sharing the cache: its mirrors, its wheel cache)
    and give the results one at a time gives. `--final`: the workflow runs no round after this one. The search
    ends at round 1 with what it knows (the break lies after commit 1, by commit 3), not complete, and the night
    moves to the last commit known green."""
    commits, culprit = _day_with_a_break(world)
    folder = tmp_path / "scroll"
    _planned(world, 2, folder)
    assert _round_run(world, folder) == [(commits[0], "green"), (culprit, "red")]
    ran = _job(world, "--collect", str(folder), "--final", "--report", str(world.root / "reports" / "nightly"))
    assert ran.exit_code == 0, ran.output
    assert not (folder / "plan.json").exists()  # no round 2 planned
    scroll = json.loads((world.root / "reports" / "nightly" / "report.json").read_text())["scroll"]
    assert not scroll["complete"] and scroll["stopped"] == (
        f"the workflow's last round (1) ran: the search got as far as app: green at {commits[0][:12]}, red at "
        f"{culprit[:12]}, 1 commit(s) between untried")
    (span,) = scroll["spans"]
    assert (span["last_green"], span["first_red"]) == (commits[0], None)  # the first red is not known yet
    assert scroll["rounds"] == 1 and scroll["culprit"] is None
    assert _app_base((world.root / "kpatch.toml").read_text()) == commits[0]
