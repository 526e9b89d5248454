"""Scrolling: a night whose upstream heads are red searches the day's range for the last green commit, proposes
it, and names the commit that broke the tests. Local-backend nights on the example upstreams (no Docker), real git,
a real push to a local bare origin, the fake GitHub. The wheel cache (conftest's nightly_wheel_cache) is shared by
this module's tests, test_nightly_matrix.py's and every chunk of both on a worker: the example's upstream histories
have the same SHAs in every test, so only the app's moved commits are built."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpatch.examples.upstreams import AUTHOR
from tests.support.fake_github import fake_github
from tests.support.gitrepos import Project, git
from tests.support.json_envelope import checked
from tests.support.nightly_world import REPO, World, make_world

BREAK = "def test_the_sampler_keeps_the_top_token():\n    assert sorted([3, 1, 2])[0] == 3, 'planted break'\n"
BREAK_SUBJECT = "Tighten the sampler"


@pytest.fixture
def cache(nightly_wheel_cache: Path) -> Path:
    return nightly_wheel_cache


@pytest.fixture
def world(project: Project, cache: Path) -> Iterator[World]:
    with fake_github() as fake:
        yield make_world(project, cache, fake)


def _pinned_at_the_heads(world: World) -> None:
    """The stacks rebased onto today's upstream heads and committed: the night's range is only what moves next."""
    assert world.kpatch("rebase").exit_code == 0
    git(world.root, "add", "--all")
    git(world.root, "commit", "--quiet", "-m", "The stacks on the heads")


def _day_with_a_break(world: World) -> tuple[list[str], str]:
    """Five app commits: two harmless, the planted test break, two harmless. Returns (the commits, the break)."""
    _pinned_at_the_heads(world)
    commits = [world.move("app", {"NEWS.txt": f"entry {n}\n"}, f"News {n}") for n in range(2)]
    culprit = world.move("app", {"tests/test_sampler.py": BREAK}, BREAK_SUBJECT)
    commits += [culprit] + [world.move("app", {"NEWS.txt": f"entry {n}\n"}, f"News {n}") for n in range(2, 4)]
    return commits, culprit


def _app_base(text: str) -> str:
    (app,) = [u for u in tomllib.loads(text)["upstream"] if u["name"] == "app"]
    return str(app.get("base-commit") or app["base"])


def test_a_planted_test_break_is_scrolled_past_the_last_green_commit_proposed_and_the_culprit_named(
        world: World) -> None:
    commits, culprit = _day_with_a_break(world)
    result, report = world.night("--backend", "local")
    assert result.exit_code == 1, result.output  # the heads are red: the night's code is the test stage's
    assert report["outcome"] == "failed" and report["failure"]["stage"] == "test"
    scroll = report["scroll"]
    (span,) = scroll["spans"]
    assert (span["upstream"], span["commits"], span["last_green"], span["first_red"]) == \
        ("app", 5, commits[1], culprit)
    # bisection from the red head: commit 2 (green), then commit 3 (red): two steps, not five
    assert [(s["commit"], s["result"]) for s in scroll["steps"]] == [(commits[1], "green"), (culprit, "red")]
    assert [(s["round"], s["where"]) for s in scroll["steps"]] == [(1, "this process"), (2, "this process")]
    assert (scroll["runners"], scroll["rounds"]) == (1, 2)
    assert scroll["complete"] and scroll["advanced"] and scroll["flaky"] == []
    assert {p["upstream"]: p["commit"] for p in scroll["last_green"]}["app"] == commits[1]
    named = scroll["culprit"]
    assert (named["commit"], named["subject"], named["stage"]) == (culprit, BREAK_SUBJECT, "test")
    assert named["author"] == f"{AUTHOR[0]} <{AUTHOR[1]}>"
    assert any("test_the_sampler_keeps_the_top_token" in t for t in named["failing"]), named
    assert any("planted break" in line for line in named["log_tail"]), named["log_tail"]
    checked(result.stdout, "nightly")
    # the failure issue names the culprit; the pull request proposes the last green commit, rebased and locked
    (issue,) = world.fake.items(REPO, pull=False)
    assert issue.title == "kpatch nightly failed at test" and "### Culprit" in issue.body
    assert culprit in issue.body and BREAK_SUBJECT in issue.body
    assert "test_the_sampler_keeps_the_top_token" in issue.body
    (pull,) = world.fake.items(REPO, pull=True)
    assert commits[1][:12] in pull.title and "the heads are red" in pull.title
    pushed = git(world.origin, "show", "kpatch/nightly:kpatch.toml")
    assert _app_base(pushed) == commits[1]
    assert "pylock.toml" in world.branch_files()
    # the checkout ends as a night leaves it: rebased onto the proposed commit, the search's scratch gone
    assert _app_base((world.root / "kpatch.toml").read_text()) == commits[1]
    held = git(world.root / "work" / "app", "rev-list", "HEAD").split()
    assert commits[1] in held and culprit not in held
    assert not (world.root / ".kpatch" / "scroll").exists()
    markdown = (world.root / "reports" / "nightly" / "report.md").read_text()
    assert "## Scrolling: the last green upstream commits" in markdown and commits[1][:12] in markdown


def test_three_runners_try_three_commits_at_once_on_local_workers_and_find_the_same_culprit_in_one_round(
        world: World) -> None:
    commits, culprit = _day_with_a_break(world)
    result, report = world.night("--backend", "local", "--dry-run", "--runners", "3")
    assert result.exit_code == 1, result.output
    scroll = report["scroll"]
    (span,) = scroll["spans"]
    assert (span["last_green"], span["first_red"]) == (commits[1], culprit)  # as the bisection finds them
    # the 4 commits below the red head cut into 4 parts: the first three at once, on three workers
    assert [(s["round"], s["where"], s["commit"], s["result"]) for s in scroll["steps"]] == [
        (1, "worker 1", commits[0], "green"), (1, "worker 2", commits[1], "green"), (1, "worker 3", culprit, "red")]
    assert (scroll["runners"], scroll["rounds"], scroll["complete"]) == (3, 1, True)
    assert all(s["seconds"] > 0 for s in scroll["steps"])
    named = scroll["culprit"]
    assert (named["commit"], named["stage"]) == (culprit, "test")
    assert any("planted break" in line for line in named["log_tail"]), named["log_tail"]
    assert any("test_the_sampler_keeps_the_top_token" in t for t in named["failing"]), named
    # the proposal is the green worker's: the checkout rebased onto it, its lock kept; the workers' folders gone
    assert _app_base((world.root / "kpatch.toml").read_text()) == commits[1]
    assert "app" in (world.root / "pylock.toml").read_text()
    assert not (world.root / ".kpatch" / "scroll").exists()
    markdown = (world.root / "reports" / "nightly" / "report.md").read_text()
    assert "3 steps in 1 round of up to 3 at once" in markdown and "| worker 3 |" in markdown
    checked(result.stdout, "nightly")


def test_a_test_that_fails_once_and_passes_on_its_retry_is_flaky_not_a_red_night(world: World,
                                                                                  tmp_path: Path) -> None:
    marker = tmp_path / "failed-once"
    flaky = (f"from pathlib import Path\n\n\ndef test_the_scheduler_is_flaky():\n    marker = Path({str(marker)!r})\n"
             "    if not marker.exists():\n        marker.write_text('failed once')\n"
             "        raise AssertionError('fails the first time only')\n")
    _pinned_at_the_heads(world)
    world.move("app", {"tests/test_scheduler.py": flaky}, "Add a scheduler test")
    result, report = world.night("--backend", "local", "--dry-run")
    assert result.exit_code == 0, result.output
    assert report["outcome"] == "passed" and report["scroll"] is None and report["failure"] is None
    assert any("test_the_scheduler_is_flaky" in t for t in report["flaky"]), report["flaky"]
    test = next(s for s in report["stages"] if s["stage"] == "test")
    assert test["status"] == "passed" and "flaky" in test["summary"]
    assert marker.read_text() == "failed once"  # it really failed once
    assert "## Flaky tests" in (world.root / "reports" / "nightly" / "report.md").read_text()


def test_max_steps_running_out_is_reported_with_how_far_the_search_got(world: World) -> None:
    commits, _ = _day_with_a_break(world)
    result, report = world.night("--backend", "local", "--dry-run", "--max-steps", "1")
    assert result.exit_code == 1, result.output
    scroll = report["scroll"]
    assert not scroll["complete"] and scroll["max_steps"] == 1 and len(scroll["steps"]) == 1
    assert scroll["stopped"].startswith("max-steps (1) reached: the search got as far as app: green at "
                                        f"{commits[1][:12]}, red at {commits[4][:12]}, 2 commit(s) between untried")
    assert scroll["culprit"] is None and scroll["spans"][0]["first_red"] is None
    assert "stopped early" in report["summary"]
    # a dry run: nothing is written to GitHub, nothing pushed
    assert world.fake.writes() == [] and world.branch() is None
    assert "stopped early" in (world.root / "reports" / "nightly" / "report.md").read_text()


def test_a_spent_budget_stops_the_search_says_how_far_it_got_and_leaves_the_stacks_on_the_heads(
        world: World) -> None:
    commits, _ = _day_with_a_break(world)
    result, report = world.night("--backend", "local", "--dry-run", "--budget", "0.001")
    assert result.exit_code == 1, result.output
    scroll = report["scroll"]
    (move,) = [m for m in report["moves"] if m["upstream"] == "app"]
    assert scroll["steps"] == [] and scroll["budget"] == 0.001 and not scroll["advanced"]
    assert scroll["stopped"].startswith("the budget (0.001 s) ran out after ")
    assert scroll["stopped"].endswith(f": the search got as far as app: green at {move['old_base'][:12]}, red at "
                                      f"{commits[4][:12]}, 4 commit(s) between untried")
    # nothing past the pins is green: the stacks stay rebased onto the heads, as a red night leaves them
    assert _app_base((world.root / "kpatch.toml").read_text()) == commits[4]
    assert world.fake.writes() == [] and world.branch() is None


@pytest.mark.parametrize(("option", "value"), [("--max-steps", "-1"), ("--budget", "0"), ("--budget", "soon"),
                                               ("--runners", "0")])
def test_a_bad_search_bound_is_refused_and_nothing_changes(world: World, option: str, value: str) -> None:
    world.churn("app", 1)
    before = world.project.snapshot()
    result, _ = world.night("--backend", "local", option, value)
    assert result.exit_code == 2, result.output
    assert option in result.output
    assert world.project.snapshot() == before and world.fake.requests == [] and world.branch() is None


# --- test selection ([[upstream]] test-selection = true) -----------------------------------------------------

SAMPLER = "def top_token(scores):\n    return max(scores)\n"
SAMPLER_TEST = ("from app.sampler import top_token\n\n\n"
                "def test_the_sampler_keeps_the_top_token():\n    assert top_token([3, 1, 2]) == 3\n")
SAMPLER_BREAK = "def top_token(scores):\n    return min(scores)  # planted break\n"


def _select_app_tests(world: World) -> None:
    """The app's suite takes its files from $KPATCH_TESTS, and the app has test selection on."""
    toml = world.root / "kpatch.toml"
    text = toml.read_text()
    text = text.replace('requires = ["kernels"]\n', 'requires = ["kernels"]\ntest-selection = true\n', 1)
    text = text.replace("python3 -m pytest -v tests --junitxml", "python3 -m pytest -v ${KPATCH_TESTS:-tests} "
                        "--junitxml", 1)  # the app's [upstream.test] comes first in the file
    toml.write_text(text)


def test_selection_runs_first_the_tests_importing_what_the_upstream_diff_changed_and_the_report_says_why(
        world: World) -> None:
    world.move("app", {"app/sampler.py": SAMPLER, "tests/test_sampler.py": SAMPLER_TEST}, "Add the sampler")
    _select_app_tests(world)
    _pinned_at_the_heads(world)
    commits = [world.move("app", {"NEWS.txt": f"entry {n}\n"}, f"News {n}") for n in range(2)]
    culprit = world.move("app", {"app/sampler.py": SAMPLER_BREAK}, "Rework the sampler")
    commits += [culprit] + [world.move("app", {"NEWS.txt": f"entry {n}\n"}, f"News {n}") for n in range(2, 4)]
    result, report = world.night("--backend", "local", "--dry-run")
    assert result.exit_code == 1, result.output
    scroll = report["scroll"]
    assert [(s["commit"], s["result"]) for s in scroll["steps"]] == [(commits[1], "green"), (culprit, "red")]
    green, red = (s["selection"] for s in scroll["steps"])
    # News only: the diff touches no test and nothing a test imports, so the tests run in path order
    assert [(s["upstream"], s["first"], s["rest"]) for s in green] == [("app", [], 2)]
    # the break is in app/sampler.py: the test that imports it runs first, the other after it
    (selected,) = red
    assert (selected["upstream"], selected["commit"], selected["first"], selected["rest"]) == \
        ("app", culprit, ["tests/test_sampler.py"], 1)
    assert selected["why"] == ["imports app.sampler (app/sampler.py changed)"]
    log = (world.root / "reports" / "app.log").read_text()  # the red step's retry, the last run of the suite
    ran = [line.split("::")[0] for line in log.splitlines() if "::" in line and line.startswith("tests/")]
    assert ran[0] == "tests/test_sampler.py" and "tests/test_k3_xpu.py" in ran, ran  # path order would be k3 first
    assert scroll["culprit"]["commit"] == culprit
    markdown = (world.root / "reports" / "nightly" / "report.md").read_text()
    assert "Test selection (the tests the upstream diff touches ran first):" in markdown
    assert "first `tests/test_sampler.py` (imports app.sampler (app/sampler.py changed)); then 1 other test file" \
        in markdown
    checked(result.stdout, "nightly")


def test_test_selection_is_off_by_default_and_the_steps_say_nothing_ran_first(world: World) -> None:
    _day_with_a_break(world)
    result, report = world.night("--backend", "local", "--dry-run")
    assert result.exit_code == 1, result.output
    assert [s["selection"] for s in report["scroll"]["steps"]] == [[], []]
    assert "Test selection" not in (world.root / "reports" / "nightly" / "report.md").read_text()


def test_test_selection_without_a_command_reading_kpatch_tests_is_refused_at_load_in_one_line(world: World) -> None:
    toml = world.root / "kpatch.toml"
    toml.write_text(toml.read_text().replace('requires = ["kernels"]\n', 'requires = ["kernels"]\n'
                                             'test-selection = true\n', 1))
    before = world.project.snapshot()
    result, _ = world.night("--backend", "local", "--dry-run")
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "upstream app: test-selection needs a test command that takes its test files from " \
        "$KPATCH_TESTS" in errors[0] and "its test command does not read $KPATCH_TESTS" in errors[0], result.stderr
    assert world.project.snapshot() == before and world.fake.requests == []
