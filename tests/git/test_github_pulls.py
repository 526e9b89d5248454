"""`Upstream-PR:` safety: GitHub's name rules in the trailer and kpatch.toml, and a merge commit that must be a SHA."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kpatch import config
from kpatch.errors import ConfigError, ExitCode, SeriesError, UsageError
from kpatch.forge import github
from kpatch.stack import parse_patch_text
from tests.support.fake_github import fake_github
from tests.support.gitrepos import git
from tests.support.rebase_repos import RebaseProject

PATCH = """From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A <a@b.c>
Date: Mon, 1 Jan 2026 00:00:00 +0000
Subject: [PATCH] Fix x

Upstream-Status: submitted
Upstream-PR: {pr}
---
diff --git a/x b/x
--- a/x
+++ b/x
@@ -1 +1 @@
-a
+b
"""
SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize("pr", ["vllm-project/vllm#123", "vllm-project/vllm-xpu-kernels#592", "o/.github#1",
                                "a_b/r.js#9", "x/...#1", "o/r_-.x#1234567890"])
def test_trailer_takes_names_github_allows(pr: str) -> None:
    assert parse_patch_text(PATCH.format(pr=pr), Path("p.patch")).prs == (pr,)


@pytest.mark.parametrize("pr", ["../..#1", "o/..#1", "o/.#1", "../r#1", "./r#1", "-o/r#1", "o-/r#1", "o.x/r#1",
                                "o/r/x#1", "o/r#0", "o/r#01", "o/r#12345678901", "o/r#1 x", "o#1", "/r#1", "o/#1",
                                f"{'o' * 40}/r#1", f"o/{'r' * 101}#1", "o/r%2F..#1", "o/r?x=1#1"])
def test_trailer_refuses_names_github_does_not_allow(pr: str) -> None:
    with pytest.raises(SeriesError) as err:
        parse_patch_text(PATCH.format(pr=pr), Path("p.patch"))
    assert str(err.value) == f"p.patch:7: Upstream-PR must look like owner/repo#123, not {pr!r}"


@pytest.mark.parametrize("token", [None, "ghp_pullsTestToken"], ids=["rest", "graphql"])
@pytest.mark.parametrize("sha", ["main~20", "", None, SHA.upper(), SHA[:12], f"{SHA}\n", 42, "HEAD"])
def test_a_merge_commit_that_is_not_a_sha_is_refused(sha: object, token: str | None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_github() as fake:
        fake.add_pull("up/kernels", 13, merged=True, merge_commit_sha=sha)
        fake.add_pull("up/kernels", 14, merged=True, merge_commit_sha=SHA)
        monkeypatch.setenv("KPATCH_GITHUB_API", fake.url)
        if token:
            fake.grant(token, "read")
            monkeypatch.setenv("GITHUB_TOKEN", token)
        else:
            monkeypatch.delenv("GITHUB_TOKEN", raising=False)
        check = github.check_pulls({"up/kernels#13", "up/kernels#14"})
    assert check.unavailable is None
    assert [r.path for r in fake.requests] == (["/graphql"] if token else
                                               ["/repos/up/kernels/pulls/13", "/repos/up/kernels/pulls/14"])
    bad, good = check.pulls["up/kernels#13"], check.pulls["up/kernels#14"]
    assert (bad.merged, bad.merge_commit) == (True, None)
    assert bad.problem is not None and "merge_commit_sha is not a commit SHA" in bad.problem
    assert (good.merge_commit, good.problem) == (SHA, None)


def test_an_open_pull_request_has_no_merge_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """GitHub gives open PRs a test-merge SHA too: it is not a commit of the upstream."""
    with fake_github() as fake:
        fake.add_pull("up/kernels", 11, merge_commit_sha=SHA)
        monkeypatch.setenv("KPATCH_GITHUB_API", fake.url)
        check = github.check_pulls({"up/kernels#11"})
    assert (check.pulls["up/kernels#11"].merged, check.pulls["up/kernels#11"].merge_commit) == (False, None)


def test_graphql_states_come_in_batches_of_fifty_and_a_missing_one_is_not_found(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_github() as fake:
        fake.grant("ghp_batchToken", "read")
        for n in range(1, 61):
            fake.add_pull("up/kernels", n)
        fake.merge("up/kernels", 60, SHA)
        monkeypatch.setenv("KPATCH_GITHUB_API", fake.url)
        monkeypatch.setenv("GITHUB_TOKEN", "ghp_batchToken")
        check = github.check_pulls({f"up/kernels#{n}" for n in range(1, 62)} | {"gone/repo#1"})
    assert [r.path for r in fake.requests] == ["/graphql", "/graphql"]  # 62 PRs: 50 + 12
    assert len(check.pulls) == 60 and check.unavailable is None
    assert check.pulls["up/kernels#60"].merge_commit == SHA and check.pulls["up/kernels#1"].summary == "open"


def test_the_fake_refuses_a_query_kpatch_does_not_send() -> None:
    """The fake answers only kpatch's query shape, so a changed query fails here, not on GitHub."""
    import requests

    with fake_github() as fake:
        fake.grant("ghp_shapeToken", "read")
        fake.add_pull("up/kernels", 1)
        reply = requests.post(f"{fake.url}/graphql", json={"query": "{ viewer { login } }"},
                              headers={"Authorization": "bearer ghp_shapeToken"}, timeout=10).json()
    assert reply == {"errors": [{"message": "Parse error: the fake answers only kpatch's Upstream-PR query",
                                 "locations": [{"line": 1, "column": 1}]}]}


def test_a_name_outside_the_rules_never_reaches_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_github() as fake:
        fake.add_pull("up/kernels", 1, merged=True, merge_commit_sha=SHA)
        monkeypatch.setenv("KPATCH_GITHUB_API", fake.url)
        check = github.check_pulls({"../..#1", "up/kernels#1"})
    assert [r.path for r in fake.requests] == ["/repos/up/kernels/pulls/1"]
    assert list(check.pulls) == ["up/kernels#1"]


@pytest.mark.parametrize("sha", ["main~20", "", None, "0" * 40, "a commit off the new base"])
def test_rebase_does_not_drop_a_patch_for_a_merge_commit_that_is_not_in_the_new_base(
        rp: RebaseProject, monkeypatch: pytest.MonkeyPatch, sha: object) -> None:
    """The reply that dropped two patches and deleted their files: now the patch stays a conflict. So does a reply
    naming a real commit that the new base does not contain (a branch never merged)."""
    if sha == "a commit off the new base":
        from kpatch.examples.upstreams import commit

        git(rp.kernels, "checkout", "-q", "-b", "side", "HEAD~5")
        sha = commit(rp.kernels, {"c.txt": "side\n"}, "Not merged", 900)
        git(rp.kernels, "checkout", "-q", "main")
    patch = rp.root / "patches" / "kernels" / "0003-Fix-c.patch"
    patch.write_text(patch.read_text().replace("Upstream-Status: pending\n",
                                               "Upstream-Status: submitted\nUpstream-PR: up/kernels#13\n", 1))
    before = rp.tracked()
    with fake_github() as fake:
        fake.add_pull("up/kernels", 13, merged=True, merge_commit_sha=sha)
        fake.add_pull("up/kernels", 11)
        monkeypatch.setenv("KPATCH_GITHUB_API", fake.url)
        result = rp.run("rebase", "--json")
    assert result.exit_code == ExitCode.CONFLICT, result.output
    kernels = json.loads(result.stdout)["result"]["stacks"][0]["patches"]
    assert [p["class"] for p in kernels] == ["upstream", "upstream", "conflict", "clean"]
    assert rp.tracked() == before


def _toml(tmp_path: Path, github_table: str) -> Path:
    (tmp_path / "patches" / "k").mkdir(parents=True)
    path = tmp_path / "kpatch.toml"
    path.write_text('version = 1\n\n[[upstream]]\nname = "k"\nurl = "https://example.invalid/k.git"\n'
                    'branch = "main"\nbase = "v1"\npatches = "patches/k"\n\n' + github_table)
    return path


def test_kpatch_toml_names_the_github_repository(tmp_path: Path) -> None:
    stack = config.load(_toml(tmp_path, '[github]\nrepository = "intel-sandbox/kpatch-vllm"\n'))
    assert stack.github == github.Repository("intel-sandbox", "kpatch-vllm")
    assert config.load(_toml(tmp_path / "none", "")).github is None


@pytest.mark.parametrize(("table", "line", "says"), [
    ('[github]\nrepository = "../.."\n', 11, "[github] 'repository' must be owner/name"),
    ('[github]\nrepository = "o/r/x"\n', 11, "[github] 'repository' must be owner/name"),
    ('[github]\nrepository = 7\n', 11, "[github] 'repository' must be owner/name"),
    ('[github]\n\nrepo = "o/r"\n', 12, "unknown key 'repo' in [github]"),
])
def test_a_bad_github_table_names_file_and_line(tmp_path: Path, table: str, line: int, says: str) -> None:
    path = _toml(tmp_path, table)
    with pytest.raises(ConfigError) as err:
        config.load(path)
    assert str(err.value).startswith(f"{path}:{line}: {says}")


def test_github_repository_from_the_environment_and_its_errors() -> None:
    env = {"GITHUB_REPOSITORY": "acme/stack", "GITHUB_TOKEN": " t0k "}
    tgt = github.target(None, env)
    assert (str(tgt.repository), tgt.dry_run, tgt.asks, tgt.api) == ("acme/stack", None, True, github.DEFAULT_API)
    assert str(github.target(github.Repository("o", "r"), env).repository) == "o/r"  # kpatch.toml wins
    assert github.target(None, {}).dry_run == "no repository: set [github] repository in kpatch.toml or " \
                                             "GITHUB_REPOSITORY"
    assert github.target(None, {**env, "KPATCH_OFFLINE": "1"}).asks is False
    with pytest.raises(UsageError) as err:
        github.target(None, {"GITHUB_REPOSITORY": "acme/../x"})
    assert str(err.value) == "GITHUB_REPOSITORY must be owner/name, not 'acme/../x'"
    assert err.value.exit_code == ExitCode.BAD_INPUT
