"""kpatch nightly end to end on the real Docker engine: the example project (a git checkout with a local bare
origin, so the push is real), the example pair built, verified and tested, and the stateful fake GitHub.

The wheel cache is shared by the module's tests: a pair built once from the same commits is reused, as on the
nightly's CI runner, so only the nights that change a wheel start build containers."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kpatch.examples.upstreams import KERNEL_FILES
from tests.support.fake_github import fake_github
from tests.support.gitrepos import Project, git
from tests.support.nightly_world import (
    BINDINGS,
    BROKEN,
    CULPRIT_SUBJECT,
    K1,
    REPO,
    TOKEN,
    World,
    files_under,
    git_objects,
    make_world,
)

OP_LINE = "return [list(head) + list(k_pe) for head in k_nope]"


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("nightly-cache")


@pytest.fixture
def world(project: Project, shared_cache: Path) -> Iterator[World]:
    with fake_github() as fake:
        yield make_world(project, shared_cache, fake)


def _clean(world: World, base_image: str, **env: str | None) -> dict[str, Any]:
    """A night that must pass; its report."""
    result, report = world.night("--base-image", base_image, env=dict(env))
    assert result.exit_code == 0, result.output
    assert report["outcome"] == "passed", report
    return report


def _containers_started_since(since: float) -> list[str]:
    """Containers this test process (the in-process kpatch) created on the engine since `since`."""
    owner = f"{socket.gethostname()}:{os.getpid()}"
    events = subprocess.run(["docker", "events", "--since", f"{since:.3f}", "--until", f"{time.time():.3f}",
                             "--filter", "type=container", "--filter", "event=create", "--filter",
                             f"label=kpatch.owner={owner}", "--format", "{{.Actor.ID}}"],
                            capture_output=True, text=True, check=True)
    return events.stdout.split()


def test_a_clean_night_opens_one_pull_request_with_the_refreshed_files(world: World, base_image: str) -> None:
    main = git(world.root, "rev-parse", "HEAD")
    report = _clean(world, base_image)
    assert [s["status"] for s in report["stages"]] == ["passed"] * 4
    heads = {m["upstream"]: m["new_base"] for m in report["moves"]}
    assert heads == {"kernels": git(world.project.kernels, "rev-parse", "main"),
                     "app": git(world.project.app, "rev-parse", "main")}
    assert [m["commits"] for m in report["moves"]] == [14, 14]
    assert {p["class"] for p in report["patches"]} == {"clean"} and len(report["wheels"]) == 2
    assert [(s["upstream"], s["outcome"]) for s in report["suites"]] == [("kernels", "passed"), ("app", "passed")]
    # the branch: main plus the refreshed kpatch.toml (new bases) and the new lock, pushed for real
    pushed = world.branch()
    assert pushed is not None and git(world.origin, "rev-parse", f"{pushed}^") == main
    assert git(world.origin, "diff", "--name-only", "main", pushed).split() == ["kpatch.toml", "pylock.toml"]
    toml = tomllib.loads(git(world.origin, "show", f"{pushed}:kpatch.toml"))
    assert {u["name"]: u["base"] for u in toml["upstream"]} == heads
    lock = (world.root / "dist" / "pylock.toml").read_text()
    assert git(world.origin, "show", f"{pushed}:pylock.toml") == lock.strip()  # git() strips the last newline
    assert report["push"]["status"] == "pushed" and report["push"]["commit"] == pushed
    # ONE pull request, with the report
    (pull,) = world.fake.items(REPO, pull=True)
    assert (pull.head, pull.base, pull.state) == ("kpatch/nightly", "main", "open")
    assert heads["kernels"][:12] in pull.title and "## Wheels and lock" in pull.body and "## Tests" in pull.body
    assert [(r["kind"], r["action"], r["outcome"]) for r in report["github"]] == [
        ("pull request", "open", "done"), ("issue", "nothing", "done")]
    # the person's checkout: still on main, nothing staged; the refreshed files are in its worktree
    assert git(world.root, "rev-parse", "HEAD") == main and git(world.root, "diff", "--cached", "--name-only") == ""
    assert (world.root / "pylock.toml").read_text() == (world.root / "dist" / "pylock.toml").read_text()


def test_the_next_clean_night_updates_the_same_pull_request(world: World, base_image: str) -> None:
    _clean(world, base_image)
    first = world.branch()
    world.churn("app", 2)
    report = _clean(world, base_image)
    assert [m["commits"] for m in report["moves"]] == [0, 2]
    (pull,) = world.fake.items(REPO, pull=True)
    new_app = git(world.project.app, "rev-parse", "main")
    assert new_app[:12] in pull.title and new_app[:12] in pull.body
    assert world.branch() not in (None, first)
    assert tomllib.loads(git(world.origin, "show", "kpatch/nightly:kpatch.toml"))["upstream"][0]["base"] == new_app
    writes = [(r.method, r.path) for r in world.fake.writes()]
    assert writes == [("POST", f"/repos/{REPO}/pulls"), ("PATCH", f"/repos/{REPO}/pulls/{pull.number}")]
    assert report["github"][0]["action"] == "update"


def test_the_next_clean_night_closes_the_failure_issue_with_a_comment(world: World, base_image: str) -> None:
    world.move("kernels", {BINDINGS: BROKEN}, CULPRIT_SUBJECT)
    result, report = world.night("--base-image", base_image)
    assert result.exit_code == 1 and report["failure"]["stage"] == "rebase"
    (issue,) = world.fake.items(REPO, pull=False)
    assert issue.state == "open" and K1 in issue.body
    # a person drops the stopped rebase; upstream takes its change back
    assert world.kpatch("rebase", "--abort").exit_code == 0
    world.move("kernels", {BINDINGS: KERNEL_FILES[BINDINGS]}, "Revert the silu rework")
    report = _clean(world, base_image)
    assert (issue.state, issue.state_reason) == ("closed", "completed")
    assert len(issue.comments) == 1 and issue.comments[0]["body"].startswith("kpatch nightly passed")
    assert [(r["kind"], r["action"]) for r in report["github"]] == [("pull request", "open"), ("issue", "close")]


def test_a_missing_token_runs_as_dry_run_and_says_so(world: World, base_image: str) -> None:
    result, report = world.night("--base-image", base_image, env={"GITHUB_TOKEN": None})
    assert result.exit_code == 0, result.output
    assert "warning: no GITHUB_TOKEN: running as --dry-run" in result.stderr
    assert report["dry_run"] == "no GITHUB_TOKEN"
    assert report["push"]["status"] == "dry-run" and report["push"]["message"].startswith("would push")
    assert [r["outcome"] for r in report["github"]] == ["dry-run", "dry-run"]
    assert report["github"][0]["message"].startswith("would open pull request kpatch/nightly -> main")
    # GitHub was not asked about the repository (only the public Upstream-PRs were read, anonymously)
    assert world.fake.writes() == [] and world.branch() is None
    assert [r.path for r in world.fake.requests if r.path.startswith(f"/repos/{REPO}")] == []
    assert {r.access for r in world.fake.requests} <= {"anonymous"}


def test_a_no_op_night_starts_no_container_and_builds_nothing(world: World, base_image: str) -> None:
    _clean(world, base_image)
    pull_writes = len(world.fake.writes())
    since = time.time()
    result, report = world.night("--base-image", base_image)  # its speed (target: under 5 s): bench_nightly.py
    assert result.exit_code == 0 and report["outcome"] == "no-op", result.output
    assert _containers_started_since(since) == []
    assert [s["status"] for s in report["stages"]] == ["skipped"] * 4
    assert report["stages"][0]["summary"].startswith("no-op: no upstream moved")
    assert report["wheels"] == [] and report["push"] is None
    assert len(world.fake.writes()) == pull_writes  # GitHub was only read (an open failure issue would be closed)


def test_a_patch_whose_pr_merged_but_still_applies_is_flagged(world: World) -> None:
    # GitHub says the kernels PR is merged, as a commit the new base does not hold yet: the patch still applies
    world.fake.add_pull("vllm-project/vllm-xpu-kernels", 592, merged=True, merge_commit_sha="f" * 40)
    result, report = world.night("--image", "kpatch-no-such-image:nightly")  # stops at build, before a container
    assert result.exit_code == 6 and report["failure"]["stage"] == "build"
    assert report["flags"] == [{"upstream": "kernels", "patch": K1, "pr": "vllm-project/vllm-xpu-kernels#592",
                                "merge_commit": "f" * 40,
                                "note": "merged upstream, not yet in the base: drop after the next bump"}]
    (issue,) = world.fake.items(REPO, pull=False)
    assert "merged upstream, not yet in the base: drop after the next bump" in issue.body
    assert "kpatch-no-such-image:nightly not found" in issue.body


def test_a_failing_test_fails_the_night_at_test_naming_the_newly_failing_tests(world: World,
                                                                                base_image: str) -> None:
    _clean(world, base_image)
    pushed = world.branch()
    patch = world.root / "patches" / "kernels" / K1
    patch.write_bytes(patch.read_bytes().replace(OP_LINE.encode(), b"return [list(k_pe) for head in k_nope]"))
    result, report = world.night("--base-image", base_image)
    assert result.exit_code == 1, result.output
    assert report["failure"]["stage"] == "test" and [s["status"] for s in report["stages"]] == [
        "passed", "passed", "passed", "failed"]
    kernels = report["suites"][0]
    assert kernels["outcome"] == "failed" and len(kernels["newly_failing"]) == 3
    (issue,) = world.fake.items(REPO, pull=False)
    assert "newly failing" in issue.body and all(t in issue.body for t in kernels["newly_failing"])
    assert "Log tail:" in issue.body and "FAILED" in issue.body  # the suite's own output
    assert world.branch() == pushed  # a failed night pushes nothing


def test_a_contract_break_fails_the_night_at_verify_with_the_contract_report(world: World, base_image: str) -> None:
    # the kernels register the op without vLLM's defaults, as vllm-xpu-kernels PR #592 did
    patch = world.root / "patches" / "kernels" / K1
    text = patch.read_bytes()
    assert text.count(b"Tensor? positions=None, Tensor? cos_sin_cache=None") == 2  # the C++ and the stand-in
    patch.write_bytes(text.replace(b"Tensor? positions=None, Tensor? cos_sin_cache=None",
                                   b"Tensor? positions, Tensor? cos_sin_cache"))
    result, report = world.night("--base-image", base_image)
    assert result.exit_code == 1, result.output
    assert [s["status"] for s in report["stages"]] == ["passed", "passed", "failed", "skipped"]
    assert "_C.fused_kimi_mla_insert schema differs" in report["failure"]["message"]
    assert any("fused_kimi_mla_insert schema differs: arg 5 positions: default None vs none" in line
               for line in report["contract"])
    (issue,) = world.fake.items(REPO, pull=False)
    assert "Op contract:" in issue.body and "does not bind" in issue.body
    assert world.branch() is None and not (world.root / "pylock.toml").exists()  # no lock kept for the branch


def test_the_token_appears_in_no_file_output_or_pushed_object(project: Project, tmp_path: Path,
                                                              base_image: str) -> None:
    summary = tmp_path / "step-summary.md"
    outputs = []
    with fake_github() as fake:
        world = make_world(project, tmp_path / "own-cache", fake)
        env: dict[str, str | None] = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
        result, _ = world.night("--base-image", base_image, env=env)
        assert result.exit_code == 0, result.output
        outputs.append(result.stdout + result.stderr)
        world.move("kernels", {BINDINGS: BROKEN}, CULPRIT_SUBJECT)
        result, _ = world.night("--base-image", base_image, env=env)
        assert result.exit_code == 1
        outputs.append(result.stdout + result.stderr)
        assert fake.requests and all(r.access == "write" for r in fake.requests)  # the token was really used
    (tmp_path / "outputs.txt").write_text("\n".join(outputs))
    forms = [TOKEN.encode(), base64.b64encode(f"x-access-token:{TOKEN}".encode())]
    files = list(files_under(tmp_path))
    assert len(files) > 100 and summary in files
    leaks = [str(p) for p in files for form in forms if form in p.read_bytes()]
    leaks += [f"object in {repo.name}" for repo in (world.origin, world.root) for form in forms
              if form in git_objects(repo)]
    assert leaks == []
