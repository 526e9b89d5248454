"""The nightly's GitHub seam against the stateful fake server, through real PyGithub: one PR, one issue, retries."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from kpatch.forge import github
from kpatch.forge.github import Action, Outcome, Reporter, RetryPolicy
from tests.support.fake_github import FakeGitHub, fake_github

REPO = "acme/stack"
TOKEN = "ghs_FAKE0123456789abcdefTOKENvalue"  # not a real token: the fake server's write credential
NOW = 1_800_000_000.0


@dataclass
class World:
    """The fake server, a reporter pointed at it, and the waits it asked for (nothing really sleeps)."""

    fake: FakeGitHub
    sleeps: list[float] = field(default_factory=list)

    def reporter(self, *, token: str | None = TOKEN, dry_run: bool = False, attempts: int = 5) -> Reporter:
        env = {"GITHUB_REPOSITORY": REPO, "KPATCH_GITHUB_API": self.fake.url}
        if token:
            env["GITHUB_TOKEN"] = token
        return Reporter(github.target(None, env, dry_run=dry_run), sleep=self.sleeps.append,
                        retry=RetryPolicy(attempts=attempts), clock=lambda: NOW)


@pytest.fixture
def world() -> Iterator[World]:
    with fake_github() as fake:
        fake.grant(TOKEN, "write")
        fake.repo(REPO).branches["kpatch/nightly"] = "1" * 40
        yield World(fake)


def test_a_clean_night_opens_one_pull_request(world: World) -> None:
    with world.reporter() as gh:
        result = gh.ensure_pull_request("kpatch/nightly", "main", "kpatch nightly: rebase", "body 1")
    assert (result.action, result.outcome, result.attempts) == (Action.OPEN, Outcome.DONE, 1)
    pulls = world.fake.items(REPO, pull=True)
    assert [(p.number, p.head, p.base, p.body, p.state) for p in pulls] == [(1, "kpatch/nightly", "main", "body 1",
                                                                              "open")]
    assert result.to_json() == {"kind": "pull request", "action": "open", "outcome": "done", "number": 1,
                                "url": f"https://github.example/{REPO}/pull/1", "attempts": 1,
                                "message": f"opened pull request #1 https://github.example/{REPO}/pull/1"}


def test_the_next_clean_night_updates_the_open_pull_request(world: World) -> None:
    with world.reporter() as gh:
        gh.ensure_pull_request("kpatch/nightly", "main", "night 1", "body 1")
        again = gh.ensure_pull_request("kpatch/nightly", "main", "night 2", "body 2")
    assert (again.action, again.outcome) == (Action.UPDATE, Outcome.DONE)
    pulls = world.fake.items(REPO, pull=True)
    assert [(p.number, p.title, p.body) for p in pulls] == [(1, "night 2", "body 2")]
    assert [(r.method, r.path) for r in world.fake.writes()] == [("POST", f"/repos/{REPO}/pulls"),
                                                                 ("PATCH", f"/repos/{REPO}/pulls/1")]


def test_an_open_pull_request_to_another_base_is_left_alone(world: World) -> None:
    world.fake.repo(REPO).branches["release"] = "2" * 40
    world.fake.add_pull(REPO, 1, head="kpatch/nightly", base="release", title="someone else's")
    with world.reporter() as gh:
        result = gh.ensure_pull_request("kpatch/nightly", "main", "night", "body")
    assert (result.action, result.ref and result.ref.number) == (Action.OPEN, 2)
    assert world.fake.repo(REPO).items[1].title == "someone else's"


def test_a_failure_opens_one_labelled_issue(world: World) -> None:
    with world.reporter() as gh:
        result = gh.report_failure("kpatch nightly failed", "conflict in 0003")
    assert (result.action, result.outcome) == (Action.OPEN, Outcome.DONE)
    issues = world.fake.items(REPO, pull=False)
    assert [(i.title, i.body, i.labels, i.state) for i in issues] == [
        ("kpatch nightly failed", "conflict in 0003", ["nightly-failure"], "open")]
    assert world.fake.repo(REPO).labels["nightly-failure"]["color"] == "b60205"  # created once, with kpatch's colour


def test_the_next_failure_comments_on_the_open_issue(world: World) -> None:
    with world.reporter() as gh:
        gh.report_failure("kpatch nightly failed", "night 1")
        again = gh.report_failure("kpatch nightly failed", "night 2")
    assert (again.action, again.outcome, again.ref and again.ref.number) == (Action.COMMENT, Outcome.DONE, 1)
    issues = world.fake.items(REPO, pull=False)
    assert len(issues) == 1 and [c["body"] for c in issues[0].comments] == ["night 2"]


def test_a_labelled_pull_request_is_not_taken_for_the_failure_issue(world: World) -> None:
    pull = world.fake.add_pull(REPO, 1, head="kpatch/nightly")
    pull.labels.append("nightly-failure")
    world.fake.repo(REPO).labels["nightly-failure"] = {"name": "nightly-failure", "color": "ededed"}
    with world.reporter() as gh:
        result = gh.report_failure("kpatch nightly failed", "night 1")
    assert (result.action, result.ref and result.ref.number) == (Action.OPEN, 2)
    assert pull.comments == []


def test_a_pass_closes_the_open_issue_with_a_comment(world: World) -> None:
    with world.reporter() as gh:
        gh.report_failure("kpatch nightly failed", "night 1")
        closed = gh.close_failure("passed again tonight")
        nothing = gh.close_failure("passed again tonight")
    assert (closed.action, closed.outcome, closed.ref and closed.ref.number) == (Action.CLOSE, Outcome.DONE, 1)
    issue = world.fake.items(REPO, pull=False)[0]
    assert (issue.state, issue.state_reason, [c["body"] for c in issue.comments]) == (
        "closed", "completed", ["passed again tonight"])
    assert (nothing.action, nothing.outcome) == (Action.NOTHING, Outcome.DONE)
    assert len(world.fake.writes()) == 4  # issue + its label on the first night; comment + close; nothing after


def test_the_failure_issue_is_found_past_the_first_page(world: World) -> None:
    """120 newer labelled issues than the one kpatch keeps: PyGithub follows the fake's Link header."""
    oldest = world.fake.add_issue(REPO, "kpatch nightly failed", labels=("nightly-failure",))
    for n in range(120):
        world.fake.add_issue(REPO, f"noise {n}", labels=("nightly-failure",))
    with world.reporter() as gh:
        result = gh.report_failure("kpatch nightly failed", "night 2")
    assert result.ref is not None and result.ref.number == oldest.number == 1
    assert [r.query.get("page") for r in world.fake.requests if r.path.endswith("/issues")] == [None, "2"]


def test_502_twice_then_200_creates_one_issue_not_three(world: World) -> None:
    world.fake.fail(502, times=2, method="POST", path=r"/issues$")
    with world.reporter() as gh:
        result = gh.report_failure("kpatch nightly failed", "night 1")
    assert (result.action, result.outcome, result.attempts) == (Action.OPEN, Outcome.DONE, 3)
    assert len(world.fake.items(REPO, pull=False)) == 1
    assert world.sleeps == [2.0, 4.0]  # backoff doubles; the test never really sleeps
    assert [r.method for r in world.fake.requests if r.path == f"/repos/{REPO}/issues"].count("POST") == 3


def test_a_write_whose_reply_was_lost_is_not_made_twice(world: World) -> None:
    """A proxy answers 502 after GitHub made the change: the next round finds it instead of writing again."""
    world.fake.fail(502, method="POST", path=r"/issues$", after_write=True)
    world.fake.fail(502, method="POST", path=r"/pulls$", after_write=True)
    with world.reporter() as gh:
        issue = gh.report_failure("kpatch nightly failed", "night 1")
        pull = gh.ensure_pull_request("kpatch/nightly", "main", "night", "body")
        world.fake.fail(502, method="POST", path=r"/comments$", after_write=True)
        comment = gh.report_failure("kpatch nightly failed", "night 2")
    assert (issue.action, issue.attempts, pull.action, pull.attempts) == (Action.OPEN, 2, Action.OPEN, 2)
    assert (comment.action, comment.attempts) == (Action.COMMENT, 2)
    assert len(world.fake.items(REPO, pull=False)) == 1 and len(world.fake.items(REPO, pull=True)) == 1
    assert [c["body"] for c in world.fake.repo(REPO).items[1].comments] == ["night 2"]


def test_github_staying_down_is_a_typed_unavailable_result(world: World) -> None:
    world.fake.fail(503, times=1000)
    with world.reporter(attempts=4) as gh:
        result = gh.report_failure("kpatch nightly failed", "night 1")
    assert (result.outcome, result.attempts, result.ok) == (Outcome.UNAVAILABLE, 4, False)
    assert world.sleeps == [2.0, 4.0, 8.0]
    assert result.message.startswith("GitHub unavailable (") and "answered 503" in result.message
    assert world.fake.items(REPO, pull=False) == []


def test_no_connection_at_all_is_unavailable_not_an_exception() -> None:
    sleeps: list[float] = []
    env = {"GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": TOKEN, "KPATCH_GITHUB_API": "http://127.0.0.1:9"}
    with Reporter(github.target(None, env), sleep=sleeps.append, retry=RetryPolicy(attempts=3)) as gh:
        result = gh.close_failure("passed")
    assert (result.outcome, result.attempts, sleeps) == (Outcome.UNAVAILABLE, 3, [2.0, 4.0])
    assert "unreachable (ConnectionError)" in result.message


def test_a_secondary_rate_limit_waits_for_retry_after(world: World) -> None:
    world.fake.secondary_limit(times=2, retry_after=7)
    with world.reporter() as gh:
        result = gh.ensure_pull_request("kpatch/nightly", "main", "night", "body")
    assert (result.outcome, result.attempts, world.sleeps) == (Outcome.DONE, 3, [7.0, 7.0])
    assert len(world.fake.items(REPO, pull=True)) == 1


def test_a_primary_rate_limit_waits_until_its_reset(world: World) -> None:
    world.fake.remaining, world.fake.reset = 0, int(NOW) + 30

    def sleep(seconds: float) -> None:  # time passes: the limit resets
        world.sleeps.append(seconds)
        world.fake.remaining = world.fake.limit

    env = {"GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": TOKEN, "KPATCH_GITHUB_API": world.fake.url}
    with Reporter(github.target(None, env), sleep=sleep, clock=lambda: NOW) as gh:
        result = gh.report_failure("kpatch nightly failed", "night 1")
    assert (result.outcome, world.sleeps) == (Outcome.DONE, [31.0])


def test_a_rate_limit_longer_than_kpatch_waits_gives_up_at_once(world: World) -> None:
    world.fake.secondary_limit(times=1, retry_after=3600)
    with world.reporter() as gh:
        result = gh.report_failure("kpatch nightly failed", "night 1")
    assert (result.outcome, result.attempts, world.sleeps) == (Outcome.UNAVAILABLE, 1, [])
    assert "rate limited" in result.message


def test_403_without_permission_is_a_typed_denied_result(world: World) -> None:
    world.fake.grant(TOKEN, "read")
    with world.reporter() as gh:
        result = gh.report_failure("kpatch nightly failed", "night 1")
    assert (result.outcome, result.attempts, world.sleeps) == (Outcome.DENIED, 1, [])
    assert "answered 403: Resource not accessible by integration" in result.message
    assert world.fake.items(REPO, pull=False) == []


def test_a_wrong_token_is_denied_and_a_missing_head_branch_rejected(world: World) -> None:
    with world.reporter(token="ghs_wrong") as gh:
        denied = gh.close_failure("passed")
    with world.reporter() as gh:
        rejected = gh.ensure_pull_request("no-such-branch", "main", "night", "body")
    assert (denied.outcome, rejected.outcome) == (Outcome.DENIED, Outcome.REJECTED)
    assert "answered 401: Bad credentials" in denied.message and "answered 422" in rejected.message


def test_no_token_runs_as_a_dry_run_and_asks_nothing(world: World) -> None:
    with world.reporter(token=None) as gh:
        results = [gh.ensure_pull_request("kpatch/nightly", "main", "t", "b"), gh.report_failure("t", "b"),
                   gh.close_failure("passed")]
    assert gh.target.dry_run == "no GITHUB_TOKEN"
    assert [(r.action, r.outcome, r.attempts) for r in results] == [
        (Action.OPEN, Outcome.DRY_RUN, 0), (Action.OPEN, Outcome.DRY_RUN, 0), (Action.CLOSE, Outcome.DRY_RUN, 0)]
    assert results[0].message == ("would open pull request kpatch/nightly -> main, or update/comment on the open one "
                                  "(no GITHUB_TOKEN: GitHub not asked)")
    assert world.fake.requests == []


def test_a_dry_run_with_a_token_reads_but_never_writes(world: World) -> None:
    world.fake.add_pull(REPO, 4, head="kpatch/nightly")
    world.fake.add_issue(REPO, "kpatch nightly failed", labels=("nightly-failure",))
    with world.reporter(dry_run=True) as gh:
        pull = gh.ensure_pull_request("kpatch/nightly", "main", "t", "b")
        comment = gh.report_failure("t", "b")
        close = gh.close_failure("passed")
    assert [(r.action, r.outcome) for r in (pull, comment, close)] == [
        (Action.UPDATE, Outcome.DRY_RUN), (Action.COMMENT, Outcome.DRY_RUN), (Action.CLOSE, Outcome.DRY_RUN)]
    assert pull.message == "would update pull request #4 (--dry-run)"
    assert world.fake.writes() == []


def test_a_repository_that_does_not_exist_is_rejected_not_retried(world: World) -> None:
    env = {"GITHUB_REPOSITORY": "acme/gone", "GITHUB_TOKEN": TOKEN, "KPATCH_GITHUB_API": world.fake.url}
    with Reporter(github.target(None, env), sleep=world.sleeps.append) as gh:
        result = gh.report_failure("kpatch nightly failed", "night 1")
    assert (result.outcome, result.attempts, world.sleeps) == (Outcome.REJECTED, 1, [])
    assert "answered 404: Not Found" in result.message


def _pin_requests(world: World) -> list[str]:
    return [r.body["query"] for r in world.fake.requests if r.path == "/graphql" and "pinIssue(" in r.body["query"]]


def test_pin_issue_pins_through_graphql_and_an_issue_pinned_already_is_left_alone(world: World) -> None:
    issue = world.fake.add_issue(REPO, "kpatch carry dashboard")
    with world.reporter() as gh:
        first = gh.pin_issue(issue.number)
        again = gh.pin_issue(issue.number)
    assert (first.action, first.outcome) == (Action.PIN, Outcome.DONE) and issue.pinned
    assert first.message == f"pinned issue #{issue.number} https://github.example/{REPO}/issues/{issue.number}"
    assert (again.action, again.outcome) == (Action.NOTHING, Outcome.DONE)
    assert len(_pin_requests(world)) == 1  # once: the second call asked isPinned and sent no mutation


def test_a_dry_run_pin_asks_whether_it_is_pinned_and_pins_nothing(world: World) -> None:
    issue = world.fake.add_issue(REPO, "kpatch carry dashboard")
    with world.reporter(dry_run=True) as gh:
        result = gh.pin_issue(issue.number)
    assert (result.action, result.outcome) == (Action.PIN, Outcome.DRY_RUN) and not issue.pinned
    assert _pin_requests(world) == [] and "would pin issue" in result.message


def test_a_pin_graphql_refuses_is_a_typed_result_naming_githubs_reason(world: World) -> None:
    read = "ghs_READ0123456789abcdefTOKENvalue"  # not a real token: the fake server's read credential
    world.fake.grant(read, "read")
    issue = world.fake.add_issue(REPO, "kpatch carry dashboard")
    with world.reporter(token=read) as gh:
        result = gh.pin_issue(issue.number)
    assert (result.action, result.outcome, result.attempts) == (Action.PIN, Outcome.REJECTED, 1)
    assert "Resource not accessible by integration" in result.message and not issue.pinned
    assert read not in result.message
