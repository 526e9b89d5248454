"""The nightly keeps its carry history: a real conflict night on the example project (real git repos, the fake
GitHub) appends a night record and one record per patch, with the class, culprit, size and distance behind."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpatch.dashboard import history
from kpatch.dashboard.markdown import LABEL
from tests.support.fake_github import fake_github
from tests.support.gitrepos import Project, git
from tests.support.nightly_world import BINDINGS, BROKEN, CULPRIT_SUBJECT, K1, REPO, World, make_world


@pytest.fixture
def world(project: Project, tmp_path: Path) -> Iterator[World]:
    with fake_github() as fake:
        yield make_world(project, tmp_path / "cache", fake)


def _break(world: World) -> str:
    world.churn("kernels", 2)
    culprit = world.move("kernels", {BINDINGS: BROKEN}, CULPRIT_SUBJECT)
    world.churn("kernels", 3)
    return culprit


def test_a_conflict_night_records_each_patch_its_class_culprit_size_and_commits_behind(world: World) -> None:
    base = tomllib.loads((world.root / "kpatch.toml").read_text())["upstream"]
    (kernels_base,) = [u["base"] for u in base if u["name"] == "kernels"]
    culprit = _break(world)
    behind = int(git(world.project.kernels, "rev-list", "--count", f"{kernels_base}..main"))
    result, report = world.night("--no-publish")
    assert result.exit_code == 1, result.output
    path = world.root / "reports" / "nightly" / history.NAME
    held = history.read(path)
    (night,) = held.nights
    assert (night.outcome, night.date, night.started) == ("failed", report["started"][:10], report["started"])
    assert [s.status for s in night.stages] == ["failed", "skipped", "skipped", "skipped"]
    assert {b.upstream: b.commits for b in night.behind} == {m["upstream"]: m["commits"] for m in report["moves"]}
    assert {b.upstream: b.commits for b in night.behind}["kernels"] == behind
    assert [(p.upstream, p.patch, p.klass) for p in held.patches] == \
        [(p["upstream"], p["name"], p["class"]) for p in report["patches"]]
    (conflict,) = [p for p in held.patches if p.conflict]
    assert (conflict.patch, conflict.culprit, conflict.culprit_subject) == (K1, culprit, CULPRIT_SUBJECT)
    assert conflict.behind == behind and conflict.tests is None and conflict.subject == "Add the kimi op"
    patch_file = (world.root / "patches" / "kernels" / K1).read_text()
    assert conflict.files == patch_file.count("\ndiff --git ") and conflict.lines and conflict.lines > 0
    assert conflict.age_days is not None and conflict.age_days > 0
    assert "carry history:" in result.output


def test_a_second_night_the_same_day_leaves_one_night_record_for_the_day(world: World) -> None:
    _break(world)
    assert world.night("--no-publish")[0].exit_code == 1
    path = world.root / "reports" / "nightly" / history.NAME
    patches_before = history.read(path).patches
    result, report = world.night("--no-publish")
    assert result.exit_code == 3, result.output  # the rebase waits for a person
    held = history.read(path)
    (night,) = held.nights
    assert night.summary == report["summary"] and "a rebase is in progress" in night.summary
    assert held.patches == patches_before  # that night saw no patch; the first night's records stay
    assert all(json.loads(line)["v"] == history.VERSION for line in path.read_text().splitlines())


def test_a_history_that_cannot_be_written_is_a_warning_and_the_night_keeps_its_exit_code(world: World) -> None:
    _break(world)
    (world.root / "kpatch.toml").write_text((world.root / "kpatch.toml").read_text()
                                            + '\n[dashboard]\nhistory = "carry"\n')
    (world.root / "carry").mkdir()
    result, report = world.night("--no-publish")
    assert result.exit_code == 1 and report["failure"]["stage"] == "rebase", result.output
    assert "warning: carry history not updated:" in result.output and "carry" in result.output
    assert not (world.root / "reports" / "nightly" / history.NAME).exists()


def test_with_dashboard_issue_the_nightly_keeps_one_carry_dashboard_issue_edited_in_place(world: World) -> None:
    _break(world)
    (world.root / "kpatch.toml").write_text((world.root / "kpatch.toml").read_text()
                                            + "\n[dashboard]\nissue = true\n")
    result, report = world.night()
    assert result.exit_code == 1, result.output
    dashboards = [i for i in world.fake.items(REPO, pull=False) if i.labels == [LABEL]]
    assert len(dashboards) == 1 and dashboards[0].title == "kpatch carry dashboard"
    first = dashboards[0].body
    assert "## The stack" in first and K1 in first and CULPRIT_SUBJECT in first and "failed" in first
    # the failure issue, then it, then its pin
    assert [r["action"] for r in report["github"]] == ["open", "open", "pin"]
    result, report = world.night()
    assert result.exit_code == 3, result.output
    (again,) = [i for i in world.fake.items(REPO, pull=False) if i.labels == [LABEL]]
    assert again.number == dashboards[0].number and again.body != first and "a rebase is in progress" in again.body
    assert report["github"][-1]["action"] == "update" and again.comments == []



def _pins(world: World) -> list[str]:
    """The pinIssue mutations the fake GitHub received."""
    return [r.body["query"] for r in world.fake.requests if r.path == "/graphql" and "pinIssue(" in r.body["query"]]


def test_the_dashboard_issue_is_pinned_once_the_night_it_is_opened(world: World) -> None:
    _break(world)
    (world.root / "kpatch.toml").write_text((world.root / "kpatch.toml").read_text()
                                            + "\n[dashboard]\nissue = true\n")
    result, report = world.night()
    assert result.exit_code == 1, result.output
    (dashboard,) = [i for i in world.fake.items(REPO, pull=False) if i.labels == [LABEL]]
    assert dashboard.pinned and len(_pins(world)) == 1
    pin = report["github"][-1]
    assert (pin["action"], pin["outcome"], pin["ref"]["number"]) == ("pin", "done", dashboard.number)
    assert f"GitHub: pinned issue #{dashboard.number}" in result.output
    result, report = world.night()  # edited in place; never pinned again (a person may unpin it)
    assert result.exit_code == 3, result.output
    assert len(_pins(world)) == 1 and [r["action"] for r in report["github"]][-1] == "update"


def test_a_pin_github_refuses_is_a_warning_and_the_night_keeps_its_exit_code(world: World) -> None:
    for n in range(3):  # GitHub pins at most three issues per repository
        world.fake.add_issue(REPO, f"pinned {n}").pinned = True
    _break(world)
    (world.root / "kpatch.toml").write_text((world.root / "kpatch.toml").read_text()
                                            + "\n[dashboard]\nissue = true\n")
    result, report = world.night()
    assert result.exit_code == 1 and report["failure"]["stage"] == "rebase", result.output
    (dashboard,) = [i for i in world.fake.items(REPO, pull=False) if i.labels == [LABEL]]
    assert not dashboard.pinned and "## The stack" in dashboard.body
    pin = report["github"][-1]
    assert (pin["action"], pin["outcome"]) == ("pin", "rejected")
    assert "already has 3 pinned issues" in pin["message"]
    warnings = [line for line in result.output.splitlines() if line.startswith("warning: GitHub") and "pin" in line]
    assert len(warnings) == 1 and "already has 3 pinned issues" in warnings[0], result.output
def test_the_report_lists_pull_requests_that_changed_since_the_last_night_and_flags_one_closed_unmerged(
        world: World) -> None:
    """Two conflict nights (the rebase aborted between them): the first knows each PR's state for the first time,
    the second reports what changed, from the history, and flags the PR closed without a merge."""
    kernels_pr, app_pr = "vllm-project/vllm-xpu-kernels#592", "vllm-project/vllm#56462"
    world.fake.add_pull("vllm-project/vllm-xpu-kernels", 592)
    world.fake.add_pull("vllm-project/vllm", 56462)
    _break(world)
    asked = len(world.fake.requests)
    first, report = world.night("--no-publish")
    assert first.exit_code == 1, first.output
    graphql = [r for r in world.fake.requests[asked:] if r.path == "/graphql"]
    assert len(graphql) == 2  # the rebase's question, then the night's one query for every PR's state
    assert {(p["pr"], p["state"], p["before"], p["changed"]) for p in report["prs"]} == {
        (kernels_pr, "open", None, True), (app_pr, "open", None, True)}
    path = world.root / "reports" / "nightly" / history.NAME
    assert {(r.pr, r.state) for r in history.read_records(path) if isinstance(r, history.PullRecord)} == {
        (kernels_pr, "open"), (app_pr, "open")}

    assert world.kpatch("rebase", "--abort").exit_code == 0
    world.fake.review("vllm-project/vllm-xpu-kernels", 592, "APPROVED")
    world.fake.repos["vllm-project/vllm"].items[56462].state = "closed"
    second, report = world.night("--no-publish")
    assert second.exit_code == 1, second.output
    lines = {p["pr"]: p for p in report["prs"]}
    assert (lines[kernels_pr]["before"], lines[kernels_pr]["state"]) == ("open", "open, approved")
    assert (lines[app_pr]["before"], lines[app_pr]["state"], lines[app_pr]["note"]) == (
        "open", "closed unmerged", "closed without merge: decide to carry or drop")
    markdown = (world.root / "reports" / "nightly" / "report.md").read_text()
    assert "Changed since the last night:" in markdown
    assert "| open | open, approved |" in markdown
    assert "**closed without merge: decide to carry or drop**" in markdown

    assert world.kpatch("rebase", "--abort").exit_code == 0
    third, report = world.night("--no-publish")
    assert third.exit_code == 1, third.output
    assert [p["changed"] for p in report["prs"]] == [False, False]
    markdown = (world.root / "reports" / "nightly" / "report.md").read_text()
    assert "No pull request changed state since the last night." in markdown
    assert "closed without merge: decide to carry or drop" in markdown  # until a person decides
