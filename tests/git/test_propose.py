"""`kpatch propose` on the example upstreams (real git repositories): real `git push`es to local bare repositories
standing in for the forks, and the stateful fake GitHub for the pull requests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import Result

from kpatch.errors import ExitCode
from kpatch.stack import UpstreamStatus, load_series
from tests.support.cli import run_kpatch
from tests.support.fake_github import FakeGitHub, fake_github
from tests.support.gitrepos import Project, git
from tests.support.json_envelope import checked

TOKEN = "ghp_proposeTestToken0123456789abcdef"
KERNELS_REPO = "vllm-project/vllm-xpu-kernels"
APP_REPO = "vllm-project/vllm"
KERNELS_PATCH = "0001-Add-the-kimi-op.patch"
APP_PATCH = "0001-Route-k3-to-the-XPU-path.patch"
APP_PENDING = "0002-XPU-Make-the-block-table-assert-device-generic.patch"


@dataclass
class World:
    project: Project
    fake: FakeGitHub
    forks: dict[str, Path]  # upstream name -> the bare repository standing in for alice's fork

    def run(self, *args: str, token: str | None = TOKEN) -> Result:
        return run_kpatch(self.project.root, *args,
                          env={"KPATCH_GITHUB_API": self.fake.url, "GITHUB_TOKEN": token, "GITHUB_REPOSITORY": None})

    def branches(self, name: str) -> dict[str, str]:
        out = git(self.forks[name], "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads/")
        return dict(line.split(" ") for line in out.splitlines() if line)

    def patch(self, name: str, file: str) -> Path:
        return self.project.root / "patches" / name / file

    def pulls(self, repo: str) -> list[object]:
        return list(self.fake.items(repo, pull=True)) if repo in self.fake.repos else []


@pytest.fixture
def world(project: Project, tmp_path: Path) -> Iterator[World]:
    forks = {}
    for name in ("kernels", "app"):
        forks[name] = tmp_path / "forks" / f"{name}.git"
        subprocess.run(["git", "init", "--quiet", "--bare", str(forks[name])], check=True)
    toml = project.root / "kpatch.toml"
    text = toml.read_text()
    text = text.replace('requires = ["kernels"]\n',
                        f'requires = ["kernels"]\n\n[upstream.propose]\nrepository = "{APP_REPO}"\n'
                        f'fork = "{forks["app"]}"\n', 1)
    text = text.replace("requires = []\n",
                        f'requires = []\n\n[upstream.propose]\nrepository = "{KERNELS_REPO}"\n'
                        f'fork = "file://{forks["kernels"]}"\n', 1)
    toml.write_text(text)
    # The kernels patch the app patch requires has not been sent upstream yet.
    kernels = project.root / "patches" / "kernels" / KERNELS_PATCH
    kernels.write_bytes(kernels.read_bytes().replace(  # bytes: the diff has CRLF lines
        b"Upstream-Status: submitted\nUpstream-PR: vllm-project/vllm-xpu-kernels#592\n", b"Upstream-Status: pending\n"))
    with fake_github() as fake:
        fake.grant(TOKEN, "write")
        fake.repo(KERNELS_REPO)
        fake.repo(APP_REPO)
        fake.forks = {f"alice/{KERNELS_REPO.split('/')[1]}": forks["kernels"],
                      f"alice/{APP_REPO.split('/')[1]}": forks["app"]}
        yield World(project, fake, forks)


def _one_error(result: Result, code: ExitCode, text: str) -> str:
    assert result.exit_code == code, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and text in errors[0], result.stderr
    return errors[0]


def test_an_app_patch_proposes_the_kernels_patch_it_requires_first_and_its_pr_names_that_one(world: World) -> None:
    ran = world.run("propose", f"app/{APP_PATCH}", "--fork", "alice", "--json")
    assert ran.exit_code == 0, ran.output
    result = checked(ran.stdout, "propose")["result"]
    assert [p["upstream"] for p in result["proposals"]] == ["kernels", "app"]
    kernels_pr, app_pr = (world.fake.items(KERNELS_REPO, pull=True), world.fake.items(APP_REPO, pull=True))
    assert len(kernels_pr) == 1 and len(app_pr) == 1
    assert kernels_pr[0].head_owner == "alice" and kernels_pr[0].head == "kpatch/kernels/0001-Add-the-kimi-op"
    assert kernels_pr[0].title == "Add the kimi op"
    assert f"needs {KERNELS_REPO}#{kernels_pr[0].number}" in app_pr[0].body
    assert "Tests: not run" in app_pr[0].body and "Op contract: not run" in app_pr[0].body
    # each fork branch is exactly the group's patches on the upstream's base
    for name, branch, count in (("kernels", "kpatch/kernels/0001-Add-the-kimi-op", 1),
                                ("app", f"kpatch/app/{APP_PATCH.removesuffix('.patch')}", 1)):
        tip = world.branches(name)[branch]
        upstream = world.project.kernels if name == "kernels" else world.project.app
        git(world.forks[name], "fetch", "--quiet", str(upstream), "+refs/tags/*:refs/tags/*", "+main:refs/up/main")
        base = world.project.kernels_base if name == "kernels" else git(upstream, "rev-parse", "v1.0^{commit}")
        assert git(world.forks[name], "rev-list", "--count", f"{base}..{tip}") == str(count)
    # the patch files say where they went
    kernels = {p.name: p for p in load_series("kernels", world.project.root / "patches" / "kernels").patches}
    app = {p.name: p for p in load_series("app", world.project.root / "patches" / "app").patches}
    assert kernels[KERNELS_PATCH].prs == (f"{KERNELS_REPO}#{kernels_pr[0].number}",)
    assert app[APP_PATCH].prs == (f"{APP_REPO}#{app_pr[0].number}",)
    assert kernels[KERNELS_PATCH].status is UpstreamStatus.SUBMITTED
    assert app[APP_PATCH].status is UpstreamStatus.SUBMITTED
    assert app[APP_PENDING].prs == ()  # not named: untouched
    assert not (world.project.root / ".kpatch" / "journal").exists()


def test_proposing_again_force_updates_the_branch_and_edits_the_one_pull_request(world: World) -> None:
    first = world.run("propose", f"kernels/{KERNELS_PATCH}", "--fork", "alice")
    assert first.exit_code == 0, first.output
    before = world.branches("kernels")
    path = world.patch("kernels", KERNELS_PATCH)
    path.write_bytes(path.read_bytes().replace(b"The XPU kernel for the fused epilogue.",
                                               b"The XPU kernel for the fused epilogue, reworded after review."))
    again = world.run("propose", f"kernels/{KERNELS_PATCH}", "--fork", "alice")
    assert again.exit_code == 0, again.output
    after = world.branches("kernels")
    pulls = world.fake.items(KERNELS_REPO, pull=True)
    assert len(pulls) == 1  # found by its head branch: never a second one
    assert [w.method for w in world.fake.writes()] == ["POST", "PATCH"]
    assert "reworded after review" in pulls[0].body
    # the patch changed: a new commit, pushed over the old one (force-with-lease)
    assert after.keys() == before.keys() and after != before
    third = world.run("propose", f"kernels/{KERNELS_PATCH}", "--fork", "alice")
    assert third.exit_code == 0 and "up to date" in third.output, third.output
    assert world.branches("kernels") == after and len(world.fake.items(KERNELS_REPO, pull=True)) == 1


def test_no_deps_refuses_in_one_line_naming_the_required_patch_and_changes_nothing(world: World) -> None:
    before = world.project.snapshot()
    ran = world.run("propose", f"app/{APP_PATCH}", "--fork", "alice", "--no-deps")
    _one_error(ran, ExitCode.BAD_INPUT, f"kernels/{KERNELS_PATCH}")
    assert world.project.snapshot() == before
    assert world.fake.writes() == [] and world.branches("kernels") == {} and world.branches("app") == {}


def test_dry_run_prints_the_branches_and_pr_texts_and_pushes_opens_and_writes_nothing(world: World) -> None:
    before = world.project.snapshot()
    ran = world.run("propose", f"app/{APP_PATCH}", "--fork", "alice", "--dry-run")
    assert ran.exit_code == 0, ran.output
    assert "kpatch/kernels/0001-Add-the-kimi-op" in ran.stdout and "# Add the kimi op" in ran.stdout
    assert "# Route k3 to the XPU path" in ran.stdout and f"needs {KERNELS_REPO}#?" in ran.stdout
    assert "would push" in ran.output
    assert world.project.snapshot() == before
    assert world.fake.writes() == [] and world.branches("kernels") == {} and world.branches("app") == {}


def test_a_fork_that_is_the_upstream_itself_is_refused_and_nothing_is_pushed(world: World) -> None:
    toml = world.project.root / "kpatch.toml"
    toml.write_text(toml.read_text().replace(f'fork = "file://{world.forks["kernels"]}"',
                                             f'fork = "{world.project.kernels}"'))
    heads = git(world.project.kernels, "for-each-ref")
    ran = world.run("propose", f"kernels/{KERNELS_PATCH}", "--fork", "alice")
    _one_error(ran, ExitCode.BAD_INPUT, "is the upstream itself")
    assert git(world.project.kernels, "for-each-ref") == heads and world.fake.writes() == []


def test_the_upstream_owner_as_fork_owner_is_refused(world: World) -> None:
    ran = world.run("propose", f"kernels/{KERNELS_PATCH}", "--fork", "vllm-project")
    _one_error(ran, ExitCode.BAD_INPUT, "pushes only to a fork")
    assert world.branches("kernels") == {}


def test_a_token_that_may_not_open_pull_requests_gets_one_line_naming_the_scopes(world: World) -> None:
    world.fake.grant(TOKEN, "read")
    before = world.patch("kernels", KERNELS_PATCH).read_bytes()
    ran = world.run("propose", f"kernels/{KERNELS_PATCH}", "--fork", "alice")
    _one_error(ran, ExitCode.UPSTREAM, "public_repo")
    assert world.patch("kernels", KERNELS_PATCH).read_bytes() == before  # not marked submitted
    assert world.pulls(KERNELS_REPO) == []


def test_the_token_never_appears_in_output_logs_or_pull_requests(world: World, tmp_path: Path) -> None:
    ran = world.run("propose", f"app/{APP_PATCH}", "--fork", "alice", "-v")
    assert ran.exit_code == 0, ran.output
    assert TOKEN not in ran.output
    for item in world.fake.items(KERNELS_REPO, pull=True) + world.fake.items(APP_REPO, pull=True):
        assert TOKEN not in item.body and TOKEN not in item.title
    for log in tmp_path.rglob("*.log"):
        assert TOKEN not in log.read_text(errors="replace"), log


def test_a_pull_request_body_stays_under_githubs_limit(world: World) -> None:
    path = world.patch("app", APP_PENDING)
    long = "\n".join(["A very long explanation line, repeated to pass GitHub's limit." * 2] * 700)
    grown = f"{long}\n\nUpstream-Status: pending".encode()
    path.write_bytes(path.read_bytes().replace(b"Upstream-Status: pending", grown, 1))
    ran = world.run("propose", f"app/{APP_PENDING}", "--fork", "alice")
    assert ran.exit_code == 0, ran.output
    (pull,) = world.fake.items(APP_REPO, pull=True)
    assert len(long) > 65536 and len(pull.body) <= 65536 and pull.body.rstrip().endswith("in the commits)")


def test_an_unknown_patch_name_is_one_line_naming_it(world: World) -> None:
    ran = world.run("propose", "app/0009-nope.patch", "--fork", "alice")
    _one_error(ran, ExitCode.BAD_INPUT, "0009-nope.patch")
    assert world.fake.writes() == []


def test_tests_in_reports_are_the_evidence_the_body_carries(world: World) -> None:
    reports = world.project.root / "reports"
    reports.mkdir()
    (reports / "app.xml").write_text('<testsuites><testsuite name="s" tests="5" failures="1" errors="0" '
                                      'skipped="1"/></testsuites>')
    ran = world.run("propose", f"app/{APP_PENDING}", "--fork", "alice")
    assert ran.exit_code == 0, ran.output
    (pull,) = world.fake.items(APP_REPO, pull=True)
    assert re.search(r"Tests \(kpatch test, `reports/app.xml`\): 3 passed, 1 failed, 1 skipped", pull.body)


@pytest.mark.parametrize("recovery", ["--continue", "--abort"])
def test_a_propose_killed_mid_trailer_write_is_finished_by_continue_or_undone_by_abort(world: World,
                                                                                      recovery: str) -> None:
    files = (world.patch("kernels", KERNELS_PATCH), world.patch("app", APP_PATCH))
    before = [p.read_bytes() for p in files]
    killed = subprocess.run([sys.executable, "-m", "kpatch", "propose", f"app/{APP_PATCH}", "--fork", "alice"],
                            cwd=world.project.root, text=True, capture_output=True, timeout=300,
                            env={**os.environ, "KPATCH_GITHUB_API": world.fake.url, "GITHUB_TOKEN": TOKEN,
                                 "KPATCH_TEST_KILL_AT": "journal:1"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert sum(p.read_bytes() != old for p, old in zip(files, before, strict=True)) == 1  # one of two written
    again = world.run("propose", f"app/{APP_PATCH}", "--fork", "alice")
    _one_error(again, ExitCode.WORKTREE, "run 'kpatch propose --continue' or 'kpatch propose --abort'")
    result = world.run("propose", recovery)
    assert result.exit_code == 0, result.output
    if recovery == "--continue":
        assert all(b"Upstream-Status: submitted" in p.read_bytes() for p in files)
    else:
        assert [p.read_bytes() for p in files] == before
    assert not (world.project.root / ".kpatch" / "journal").exists()


def test_status_prs_shows_each_proposed_patchs_pull_request_state_from_github(world: World) -> None:
    ran = world.run("propose", f"app/{APP_PATCH}", "--fork", "alice", "--draft")
    assert ran.exit_code == 0, ran.output
    (kernels,) = world.fake.items(KERNELS_REPO, pull=True)
    (app,) = world.fake.items(APP_REPO, pull=True)
    assert kernels.draft and app.draft
    world.fake.check_run(APP_REPO, app.number, "pending")
    asked = len(world.fake.requests)
    shown = world.run("status", "--prs")
    assert shown.exit_code == 0, shown.output
    assert f"{KERNELS_REPO}#{kernels.number} (draft)" in shown.stdout
    assert f"{APP_REPO}#{app.number} (draft, checks pending)" in shown.stdout
    assert [(r.method, r.path) for r in world.fake.requests[asked:]] == [("POST", "/graphql")]  # both PRs, 1 query
    world.fake.merge(KERNELS_REPO, kernels.number, "a" * 40)
    app.state = "closed"
    again = world.run("status", "--prs", "--json")
    assert again.exit_code == 0, again.output
    pulls = checked(again.stdout, "status")["result"]["pr_states"]
    assert pulls[f"{KERNELS_REPO}#{kernels.number}"] == "merged"
    assert pulls[f"{APP_REPO}#{app.number}"] == "closed unmerged"
    assert set(pulls) == {f"{KERNELS_REPO}#{kernels.number}", f"{APP_REPO}#{app.number}"}  # #56462 replaced
    plain = world.run("status")  # without --prs GitHub is not asked
    assert plain.exit_code == 0 and "(merged)" not in plain.stdout


def test_status_prs_asks_every_pull_requests_review_and_checks_in_one_graphql_request(world: World) -> None:
    """Seven PRs across two repositories, each in another state: one POST /graphql answers them all."""
    kernels, app = world.patch("kernels", KERNELS_PATCH), world.patch("app", APP_PATCH)
    kernels.write_bytes(kernels.read_bytes().replace(
        b"Upstream-Status: pending\n", b"Upstream-Status: submitted\n" + b"".join(
            f"Upstream-PR: {KERNELS_REPO}#{n}\n".encode() for n in (1, 2, 3, 4)), 1))
    text = app.read_text()
    prs = "".join(f"Upstream-PR: {APP_REPO}#{n}\n" for n in (5, 6, 7))
    app.write_text(re.sub(r"Upstream-PR: [^\n]*\n", lambda _m: prs, text, count=1))
    fake = world.fake
    for n in (1, 2, 3, 4):
        fake.add_pull(KERNELS_REPO, n)
    for n in (5, 6, 7):
        fake.add_pull(APP_REPO, n)
    fake.review(KERNELS_REPO, 1, "APPROVED")
    fake.check_run(KERNELS_REPO, 1, "success")
    fake.review(KERNELS_REPO, 2, "APPROVED")
    fake.review(KERNELS_REPO, 2, "CHANGES_REQUESTED")
    fake.check_run(KERNELS_REPO, 3, "success")
    fake.check_run(KERNELS_REPO, 3, "failure")
    fake.repos[KERNELS_REPO].items[4].draft = True
    fake.merge(APP_REPO, 5, "b" * 40)
    fake.repos[APP_REPO].items[6].state = "closed"
    ran = world.run("status", "--prs", "--json")
    assert ran.exit_code == 0, ran.output
    assert [(r.method, r.path) for r in fake.requests] == [("POST", "/graphql")]
    assert checked(ran.stdout, "status")["result"]["pr_states"] == {
        f"{KERNELS_REPO}#1": "open, approved, checks green", f"{KERNELS_REPO}#2": "open, changes requested",
        f"{KERNELS_REPO}#3": "open, checks red", f"{KERNELS_REPO}#4": "draft", f"{APP_REPO}#5": "merged",
        f"{APP_REPO}#6": "closed unmerged", f"{APP_REPO}#7": "open"}
    assert TOKEN not in ran.output


@pytest.mark.parametrize(("access", "says"), [
    ("bad", "answered 401: Bad credentials"),
    ("blind", "Resource not accessible by personal access token"),
])
def test_status_prs_with_a_token_that_cannot_read_says_which_scopes_in_one_line(world: World, access: str,
                                                                                says: str) -> None:
    ran = world.run("propose", f"kernels/{KERNELS_PATCH}", "--fork", "alice")
    assert ran.exit_code == 0, ran.output
    world.fake.grant(TOKEN, access)
    shown = world.run("status", "--prs")
    assert shown.exit_code == 0, shown.output
    (line,) = [x for x in shown.stderr.splitlines() if "GITHUB_TOKEN" in x]
    assert says in line and "the repo scope" in line and '"Pull requests: read"' in line
    assert TOKEN not in shown.output


def test_a_closed_pull_request_is_neither_reopened_nor_followed_by_a_second_one(world: World) -> None:
    first = world.run("propose", f"kernels/{KERNELS_PATCH}", "--fork", "alice")
    assert first.exit_code == 0, first.output
    (pull,) = world.fake.items(KERNELS_REPO, pull=True)
    pull.state = "closed"
    again = world.run("propose", f"kernels/{KERNELS_PATCH}", "--fork", "alice")
    _one_error(again, ExitCode.UPSTREAM, f"{KERNELS_REPO}#{pull.number} from alice:kpatch/kernels/")
    assert len(world.fake.items(KERNELS_REPO, pull=True)) == 1 and pull.state == "closed"


def test_a_release_lines_proposal_has_its_own_branch_and_targets_the_lines_branch(world: World) -> None:
    """`propose --line`: the line's patch, on the line's base, from a branch that names the line (main's proposal of
    the same patch file keeps its own), to the line's branch."""
    import shutil
    import tomllib

    root = world.project.root
    toml = root / "kpatch.toml"
    bases = {u["name"]: u["base"] for u in tomllib.loads(toml.read_text())["upstream"]}
    with toml.open("a") as out:
        for name, base in bases.items():
            out.write(f'\n[line."0.9".{name}]\nbranch = "main"\nbase = "{base}"\n')
            shutil.copytree(root / "patches" / name, root / "patches" / "0.9" / name)
    ran = world.run("propose", f"kernels/{KERNELS_PATCH}", "--line", "0.9", "--fork", "alice", "--dry-run")
    assert ran.exit_code == 0, ran.output
    assert "kpatch/0.9/kernels/0001-Add-the-kimi-op" in ran.stdout
    assert "kpatch/kernels/0001-Add-the-kimi-op" not in ran.stdout
    assert world.fake.writes() == []
