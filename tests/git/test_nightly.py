"""kpatch nightly nights that need no Docker engine (they end before any build, or build and test with
--backend local): a conflict and what GitHub hears of it, GitHub failing in its ways, bad input, GitHub Actions
output. Real git repos, the fake GitHub server."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpatch.examples.upstreams import AUTHOR
from tests.support.fake_github import fake_github
from tests.support.gitrepos import Project
from tests.support.json_envelope import checked
from tests.support.nightly_world import BINDINGS, BROKEN, CULPRIT_SUBJECT, K1, REPO, World, make_world


@pytest.fixture
def world(project: Project, tmp_path: Path) -> Iterator[World]:
    with fake_github() as fake:
        yield make_world(project, tmp_path / "cache", fake)


def _break(world: World) -> str:
    """Upstream kernels rework the lines the first kernels patch extends, between harmless commits."""
    world.churn("kernels", 2)
    culprit = world.move("kernels", {BINDINGS: BROKEN}, CULPRIT_SUBJECT)
    world.churn("kernels", 3)
    return culprit


def test_a_conflict_opens_one_issue_naming_the_patch_the_culprit_and_its_author(world: World) -> None:
    culprit = _break(world)
    before = (world.root / "kpatch.toml").read_bytes()
    result, report = world.night()
    assert result.exit_code == 1, result.output
    assert report["outcome"] == "failed" and report["failure"]["stage"] == "rebase"
    assert [s["status"] for s in report["stages"]] == ["failed", "skipped", "skipped", "skipped"]
    (conflict,) = [p for p in report["patches"] if p["class"] == "conflict"]
    assert (conflict["upstream"], conflict["name"], conflict["culprit"]["sha"]) == ("kernels", K1, culprit)
    (issue,) = world.fake.items(REPO, pull=False)
    author = f"{AUTHOR[0]} &lt;{AUTHOR[1]}&gt;"  # HTML-escaped in the body
    assert issue.labels == ["nightly-failure"] and issue.title == "kpatch nightly failed at rebase"
    assert K1 in issue.body and culprit in issue.body and author in issue.body and CULPRIT_SUBJECT in issue.body
    assert "kpatch rebase --continue" in issue.body and "## Failure" in issue.body and "Log tail:" in issue.body
    # the rebase waits for a person; kpatch.toml and patches/ are untouched, nothing is pushed, no pull request
    assert (world.root / "kpatch.toml").read_bytes() == before
    assert "a rebase is in progress" in world.kpatch("status").output
    assert world.branch() is None and world.fake.items(REPO, pull=True) == []
    saved = json.loads((world.root / "reports" / "nightly" / "report.json").read_text())
    assert saved["github"][0]["action"] == "open" and saved["github"][0]["outcome"] == "done"
    markdown = (world.root / "reports" / "nightly" / "report.md").read_text()
    assert markdown.startswith("# kpatch nightly: FAILED at rebase") and culprit[:12] in markdown


def test_the_next_night_while_the_conflict_waits_comments_on_the_same_issue(world: World) -> None:
    _break(world)
    assert world.night()[0].exit_code == 1
    result, report = world.night()
    assert result.exit_code == 3, result.output  # a rebase is in progress: the worktree code
    assert "a rebase is in progress" in report["failure"]["message"]
    (issue,) = world.fake.items(REPO, pull=False)
    assert len(issue.comments) == 1 and "a rebase is in progress" in issue.comments[0]["body"]
    assert report["github"][0]["action"] == "comment"


def test_502_twice_then_200_creates_one_issue_not_three(world: World) -> None:
    _break(world)
    world.fake.fail(502, times=2, method="POST", path=r"/issues$")
    result, report = world.night()
    assert result.exit_code == 1
    assert len(world.fake.items(REPO, pull=False)) == 1
    (opened,) = report["github"]
    assert (opened["action"], opened["outcome"], opened["attempts"]) == ("open", "done", 3)
    posts = [r for r in world.fake.requests if r.method == "POST" and r.path.endswith("/issues")]
    assert len(posts) == 3


def test_a_502_after_the_write_still_makes_one_issue(world: World) -> None:
    _break(world)
    world.fake.fail(502, times=1, method="POST", path=r"/issues$", after_write=True)  # the reply is lost
    result, report = world.night()
    assert result.exit_code == 1 and len(world.fake.items(REPO, pull=False)) == 1
    assert report["github"][0]["outcome"] == "done"


def test_a_403_still_writes_the_report_and_keeps_the_runs_exit_code(world: World) -> None:
    _break(world)
    world.fake.grant(world.env["GITHUB_TOKEN"] or "", "read")  # the token may read, not write
    result, report = world.night()
    assert result.exit_code == 1  # the run's (a conflict), not the reporting's
    assert report["github"][0]["outcome"] == "denied" and world.fake.items(REPO, pull=False) == []
    saved = json.loads((world.root / "reports" / "nightly" / "report.json").read_text())
    assert saved["github"][0]["outcome"] == "denied" and saved["failure"]["stage"] == "rebase"
    assert "denied" in (world.root / "reports" / "nightly" / "report.md").read_text()


def test_github_down_still_writes_the_report(world: World) -> None:
    _break(world)
    world.fake.fail(502, times=100)
    result, report = world.night()
    assert result.exit_code == 1
    assert report["github"][0]["outcome"] == "unavailable" and report["github"][0]["attempts"] == 5
    assert json.loads((world.root / "reports" / "nightly" / "report.json").read_text())["github"][0]["outcome"] == \
        "unavailable"


def test_a_dry_run_conflict_says_what_it_would_open_and_writes_nothing_to_github(world: World) -> None:
    _break(world)
    result, report = world.night("--dry-run")
    assert result.exit_code == 1
    assert report["dry_run"] == "--dry-run" and report["github"][0]["outcome"] == "dry-run"
    assert report["github"][0]["message"].startswith("would open issue")
    assert world.fake.writes() == [] and world.fake.items(REPO, pull=False) == []


def test_an_upstream_that_cannot_be_fetched_fails_the_night_at_rebase_with_exit_4(world: World) -> None:
    world.project.kernels.rename(world.project.kernels.with_name("gone"))
    result, report = world.night()
    assert result.exit_code == 4, result.output
    assert report["failure"]["stage"] == "rebase" and "cannot fetch" in report["failure"]["message"]
    assert "error: nightly failed at rebase: upstream kernels: cannot fetch" in result.stderr
    (issue,) = world.fake.items(REPO, pull=False)
    assert "cannot fetch" in issue.body


def test_a_report_folder_that_is_a_file_is_refused_and_nothing_changes(world: World) -> None:
    _break(world)
    (world.root / "reports").write_text("not a folder\n")
    before = world.project.snapshot()
    result, _ = world.night("--report", "reports/nightly")
    assert result.exit_code == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        f"error: --report {world.root}/reports/nightly: cannot write there ({world.root}/reports is not a writable "
        "folder)"]
    assert world.project.snapshot() == before and world.fake.requests == [] and world.branch() is None


def test_a_malformed_github_repository_is_refused_and_nothing_changes(world: World) -> None:
    before = world.project.snapshot()
    result, payload = world.night(env={"GITHUB_REPOSITORY": "not a repository"})
    assert result.exit_code == 2
    assert payload["exit_code"] == 2
    assert payload["message"] == "GITHUB_REPOSITORY must be owner/name, not 'not a repository'"
    assert world.project.snapshot() == before and world.fake.requests == []


def test_under_github_actions_the_log_is_folded_and_the_summary_appended(world: World, tmp_path: Path) -> None:
    _break(world)
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    result, _ = world.night(env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert result.exit_code == 1
    groups = [line for line in result.stderr.splitlines() if line.startswith("::")]
    assert groups == ["::group::kpatch nightly: rebase", "::endgroup::", "::group::kpatch nightly: GitHub",
                      "::endgroup::"]
    text = summary.read_text()
    assert text.startswith("earlier step\n") and "# kpatch nightly: FAILED at rebase" in text
    assert text.split("earlier step\n", 1)[1].strip() == \
        (world.root / "reports" / "nightly" / "report.md").read_text().strip()


def test_a_local_backend_night_builds_verifies_and_tests_on_this_host(world: World) -> None:
    """`nightly --backend local` ran the test stage on the docker backend, which refuses a locally built pair:
    every such night ended at test with exit 6."""
    world.churn("kernels", 2)
    result, report = world.night("--backend", "local", "--dry-run")
    stages = {s["stage"]: s["status"] for s in report.get("stages", [])}
    assert result.exit_code == 0, result.output
    assert stages == {"rebase": "passed", "build": "passed", "verify": "passed", "test": "passed"}, report
    assert {s["upstream"]: s["outcome"] for s in report["suites"]} == {"kernels": "passed", "app": "passed"}
    checked(result.stdout, "nightly")  # a whole night's report, as its JSON Schema says
    # The night's clock: every part once, each stage's own time, and a whole night they add up to.
    clock = report["clock"]
    times = {s["stage"]: s["seconds"] for s in report["stages"]}
    assert set(clock) == {"fetch", "rebase", "build", "verify", "test", "scroll", "report", "publish", "total"}
    assert clock["fetch"] > 0 and abs(clock["fetch"] + clock["rebase"] - times["rebase"]) < 0.01
    assert [clock[k] for k in ("build", "verify", "test")] == [times[k] for k in ("build", "verify", "test")]
    parts = sum(v for k, v in clock.items() if k != "total")
    assert clock["report"] > 0 and parts <= clock["total"] < parts + 5.0, clock
    md = (world.root / "reports" / "nightly" / "report.md").read_text()
    assert "## Clock" in md and f"| **night** | **{clock['total']:.1f} s** | 100 % |" in md


def test_a_night_split_in_two_runs_without_the_token_and_publishes_with_it(world: World) -> None:
    """ci/nightly.yml: the job that builds and tests upstream heads holds no token (--no-publish); the small job
    that holds it reports the saved night (--publish-saved), once."""
    culprit = _break(world)
    token = world.env["GITHUB_TOKEN"]
    ran, report = world.night("--no-publish", env={"GITHUB_TOKEN": None})
    assert ran.exit_code == 1 and report["failure"]["stage"] == "rebase", ran.output
    assert report["github"] == [] and world.fake.writes() == [] and world.fake.items(REPO, pull=False) == []
    night_total = report["clock"]["total"]
    published, report = world.night("--publish-saved", env={"GITHUB_TOKEN": token})
    assert published.exit_code == 1, published.output  # the night's exit code
    (issue,) = world.fake.items(REPO, pull=False)
    assert issue.title == "kpatch nightly failed at rebase" and culprit in issue.body
    saved = json.loads((world.root / "reports" / "nightly" / "report.json").read_text())
    assert saved["github"][0]["action"] == "open" and saved["dry_run"] is None
    assert saved["clock"]["publish"] > 0 and saved["clock"]["total"] > night_total  # GitHub's time
    again, _ = world.night("--publish-saved", env={"GITHUB_TOKEN": token})
    assert again.exit_code == 2 and "was published already" in again.output


def test_released_pairs_an_index_that_cannot_be_reached_is_a_note_of_the_report_not_a_failure(
        world: World) -> None:
    _break(world)
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    result, report = world.night("--released-pairs", env={"PIP_INDEX_URL": closed})
    assert result.exit_code == 1 and report["failure"]["stage"] == "rebase"  # the night's own outcome, unchanged
    (note,) = [n for n in report["notes"] if n.startswith("released pairs:")]
    assert note.startswith(f"released pairs: not checked (the package index {closed} could not be used: ")
    assert f"released pairs: not checked (the package index {closed} could not be used: package index {closed}/app/:" \
        in (world.root / "reports" / "nightly" / "report.md").read_text()
    result, report = world.night()
    assert not [n for n in report["notes"] if n.startswith("released pairs:")]  # only when asked


def test_a_release_lines_failed_night_opens_its_own_issue_beside_mains(world: World) -> None:
    """`nightly --line`: the line's failure issue is its own (its label, the line in its title), so main's nights
    neither comment on nor close it; its report goes to reports-<line>/nightly/."""
    import shutil
    import subprocess
    import tomllib

    toml = world.root / "kpatch.toml"
    bases = {u["name"]: u["base"] for u in tomllib.loads(toml.read_text())["upstream"]}
    with toml.open("a") as out:
        for name, base in bases.items():  # a line on the same branch and base, with a copy of main's stacks
            out.write(f'\n[line."0.9".{name}]\nbranch = "main"\nbase = "{base}"\n')
            shutil.copytree(world.root / "patches" / name, world.root / "patches" / "0.9" / name)
    (world.root / ".gitignore").write_text("work/\ndist/\nreports/\nwork-0.9/\ndist-0.9/\nreports-0.9/\n")
    subprocess.run(["git", "-C", str(world.root), "add", "--all"], check=True)
    subprocess.run(["git", "-C", str(world.root), "commit", "--quiet", "-m", "A release line"], check=True)
    _break(world)
    assert world.night()[0].exit_code == 1
    line, report = world.night("--line", "0.9")
    assert line.exit_code == 1, line.output
    assert report["failure"]["stage"] == "rebase"
    issues = sorted(world.fake.items(REPO, pull=False), key=lambda i: i.title)
    assert [(i.title, i.labels) for i in issues] == [
        ("kpatch nightly failed (line 0.9) at rebase", ["nightly-failure-0.9"]),
        ("kpatch nightly failed at rebase", ["nightly-failure"])]
    assert (world.root / "reports-0.9" / "nightly" / "report.json").is_file()
