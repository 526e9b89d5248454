"""kpatch rebase on real repositories: classes, the culprit, one transaction, recorded resolutions."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from kpatch.errors import ExitCode
from tests.support.cli import KPATCH, kpatch
from tests.support.fake_github import fake_github
from tests.support.gitrepos import git, kill_inside_git_am, mirror_dir
from tests.support.rebase_repos import FILES, RebaseProject, replace_line


def classes(payload: dict[str, Any], stack: str) -> list[str]:
    return [p["class"] for p in next(s for s in payload["stacks"] if s["upstream"] == stack)["patches"]]


def resolve_c(rp: RebaseProject) -> None:
    tree = rp.root / "work" / ".rebase" / "kernels"
    (tree / "c.txt").write_text(replace_line(FILES["c"], 15, "c line 15 rewritten upstream, fixed by us"))
    git(tree, "add", "c.txt")


def test_conflict_names_the_culprit_and_writes_nothing(rp: RebaseProject) -> None:
    before = rp.tracked()
    result = rp.run("rebase", "--json")
    assert result.exit_code == ExitCode.CONFLICT, result.output
    payload = json.loads(result.stdout)["result"]
    # The expectation: upstream (verbatim), upstream (other context), conflict, clean. Fix d and the
    # app stack are classified by trial applies: a conflict stops the stacks, not the report.
    assert classes(payload, "kernels") == ["upstream", "upstream", "conflict", "clean"]
    assert classes(payload, "app") == ["clean", "clean"]
    kernels = payload["stacks"][0]
    assert [p["applied"] for p in kernels["patches"]] == [False, False, False, False]
    assert kernels["patches"][3]["why"].startswith("trial apply")
    assert [s["outcome"] for s in payload["stacks"]] == ["conflict", "blocked"]
    assert "same patch-id as upstream" in kernels["patches"][0]["why"]
    assert "empty after a 3-way apply" in kernels["patches"][1]["why"]
    culprit = kernels["patches"][2]["culprit"]
    assert culprit["sha"] == rp.culprit and culprit["subject"] == "Rewrite c"
    assert culprit["commits"] == 70 and culprit["trials"] <= 7
    assert kernels["patches"][2]["hunks"][0]["path"] == "c.txt"
    assert "GitHub unreachable" in payload["github"]
    assert payload["committed"] is False
    assert rp.tracked() == before  # kpatch.toml and patches/ byte-identical
    human = rp.run("rebase")
    assert human.exit_code == ExitCode.WORKTREE and "--continue" in human.stderr  # a rebase is in progress
    assert rp.run("apply").exit_code == ExitCode.WORKTREE
    assert rp.run("rebase", "--abort").exit_code == 0
    assert rp.tracked() == before and not (rp.root / "work" / ".rebase" / "kernels").exists()


def test_continue_commits_everything_in_one_step(rp: RebaseProject) -> None:
    assert rp.run("rebase").exit_code == ExitCode.CONFLICT
    resolve_c(rp)
    result = rp.run("rebase", "--continue", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)["result"]
    assert classes(payload, "kernels") == ["upstream", "upstream", "three-way", "clean"]
    assert classes(payload, "app") == ["clean", "clean"]
    app_why = payload["stacks"][1]["patches"][0]["why"]
    assert app_why == "requires kernels/0001-Fix-a.patch, which is now upstream"
    assert payload["committed"] is True
    toml = (rp.root / "kpatch.toml").read_text()
    assert f'base = "{rp.kernels_new}"' in toml and f'base = "{git(rp.app, "rev-parse", "HEAD")}"' in toml
    series = (rp.root / "patches" / "kernels" / "series").read_text()
    assert "# dropped 0001-Fix-a.patch: upstream (same patch-id" in series
    assert "# dropped 0002-Fix-b.patch: upstream (empty after a 3-way apply" in series
    assert not (rp.root / "patches" / "kernels" / "0001-Fix-a.patch").exists()
    assert "rewritten upstream, fixed by us" in (rp.root / "patches" / "kernels" / "0003-Fix-c.patch").read_text()
    assert list((rp.root / "patches" / ".rerere" / "kernels").glob("*/postimage"))
    # The refreshed stacks apply and export byte-identically on the new bases.
    assert rp.run("apply").exit_code == 0
    assert rp.run("export", "--check").exit_code == 0
    assert rp.run("status", "--json").exit_code == 0


def test_recorded_resolution_resolves_the_next_rebase(rp: RebaseProject, tmp_path: Path) -> None:
    before = rp.tracked()
    assert rp.run("rebase").exit_code == ExitCode.CONFLICT
    resolve_c(rp)
    assert rp.run("rebase", "--continue").exit_code == 0
    recorded = rp.root / "patches" / ".rerere"
    # Back to the old bases and stacks, keeping only the recorded resolution; a fresh cache and work folder.
    kept = tmp_path / "rerere-copy"
    shutil.copytree(recorded, kept)
    shutil.rmtree(rp.root / "patches")
    shutil.rmtree(rp.root / "work")
    for name, data in before.items():
        (rp.root / name).parent.mkdir(parents=True, exist_ok=True)
        (rp.root / name).write_bytes(data)
    shutil.copytree(kept, recorded)
    again = rp.run("rebase", "--json", "--cache-dir", str(tmp_path / "fresh-cache"))
    assert again.exit_code == 0, again.output
    payload = json.loads(again.stdout)["result"]
    assert classes(payload, "kernels") == ["upstream", "upstream", "three-way", "clean"]
    assert payload["stacks"][0]["patches"][2]["why"] == "conflict resolved by a recorded resolution"


def test_onto_unknown_ref_and_backwards(rp: RebaseProject) -> None:
    before = rp.tracked()
    bad = rp.run("rebase", "--onto", "kernels=nope")
    assert bad.exit_code == ExitCode.UPSTREAM and "'nope' is not a commit, tag or branch" in bad.stderr
    assert rp.run("rebase", "--onto", f"kernels={rp.kernels_new}").exit_code == ExitCode.CONFLICT
    assert rp.run("rebase", "--abort").exit_code == 0
    back = git(rp.kernels, "rev-list", "--max-parents=0", "HEAD")
    toml = rp.root / "kpatch.toml"
    toml.write_text(toml.read_text().replace(git(rp.kernels, "rev-parse", "HEAD~70"),
                                             git(rp.kernels, "rev-parse", "HEAD~10")))
    moved = rp.tracked()
    backwards = rp.run("rebase", "--onto", f"kernels={back}")
    assert backwards.exit_code == ExitCode.BAD_INPUT and "goes backwards past the base" in backwards.stderr
    assert "--force" in backwards.stderr
    assert rp.tracked() == moved
    assert before != moved


def test_fetch_failure_changes_nothing(rp: RebaseProject, tmp_path: Path) -> None:
    before = rp.tracked()
    result = rp.run("rebase", "--url", f"app={tmp_path / 'gone'}")
    assert result.exit_code == ExitCode.BAD_INPUT  # a URL the person gave is checked before it is fetched from
    assert f"upstream app: --url app={tmp_path / 'gone'} is no git repository kpatch can fetch from" in result.stderr
    assert rp.tracked() == before
    assert not (rp.root / ".kpatch" / "state.json").exists()


def test_kill_mid_rebase_is_detected_and_continued(rp: RebaseProject, tmp_path: Path) -> None:
    """SIGKILL to kpatch and its git am while a patch is half-applied; the next command offers --continue."""
    cache = tmp_path / "kill-cache"
    assert rp.run("apply", "--cache-dir", str(cache)).exit_code == 0  # the mirrors exist, hooks can go in
    before = rp.tracked()
    kill_inside_git_am([*KPATCH, "rebase", "--cache-dir", str(cache)], rp.root,
                       mirror_dir(cache, "kernels"), tmp_path / "in-am")
    state = json.loads((rp.root / ".kpatch" / "state.json").read_text())
    kernels = state["operation"]["stacks"]["kernels"]
    assert kernels["phase"] == "running" and "in flight" in [p["phase"] for p in kernels["patches"]]
    again = rp.run("rebase", "--cache-dir", str(cache))
    assert again.exit_code == ExitCode.WORKTREE
    assert "'kpatch rebase --continue' or 'kpatch rebase --abort'" in again.stderr
    assert rp.tracked() == before
    cont = rp.run("rebase", "--continue", "--json", "--cache-dir", str(cache))
    assert cont.exit_code == ExitCode.CONFLICT, cont.output
    assert classes(json.loads(cont.stdout)["result"], "kernels") == ["upstream", "upstream", "conflict", "clean"]
    resolve_c(rp)
    done = rp.run("rebase", "--continue", "--json", "--cache-dir", str(cache))
    assert done.exit_code == 0, done.output
    assert classes(json.loads(done.stdout)["result"], "kernels") == ["upstream", "upstream", "three-way", "clean"]


def test_merged_pr_on_github_marks_a_patch_upstream(rp: RebaseProject, monkeypatch: pytest.MonkeyPatch) -> None:
    """(c): Fix c's PR is merged upstream (as the commit that rewrote its line), so it is dropped, not a conflict."""
    patch = rp.root / "patches" / "kernels" / "0003-Fix-c.patch"
    patch.write_text(patch.read_text().replace("Upstream-Status: pending\n",
                                               "Upstream-Status: submitted\nUpstream-PR: up/kernels#13\n", 1))
    with fake_github() as fake:
        fake.add_pull("up/kernels", 13, merged=True, merge_commit_sha=rp.culprit)
        fake.add_pull("up/kernels", 11)
        monkeypatch.setenv("KPATCH_GITHUB_API", fake.url)
        result = rp.run("rebase", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)["result"]
    assert payload["github"] is None
    assert classes(payload, "kernels") == ["upstream", "upstream", "upstream", "clean"]
    assert payload["stacks"][0]["patches"][2]["why"] == f"up/kernels#13 is merged upstream as {rp.culprit[:12]}"
    assert sorted(r.path for r in fake.requests) == ["/repos/up/kernels/pulls/11", "/repos/up/kernels/pulls/13"]


def test_a_merged_pr_drops_its_patch_with_the_merge_commit_and_leaves_no_stale_upstream_pr_trailer(
        rp: RebaseProject, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asked in one GraphQL query (a token is set): Fix c's PR is merged as a commit of the new base, so the patch
    goes with its trailers; the series keeps one `# dropped` note naming the PR and the merge commit (the
    evidence); Fix d's open PR stays, and `status --prs` asks only about it afterwards."""
    fix_c, fix_d = (rp.root / "patches" / "kernels" / name for name in ("0003-Fix-c.patch", "0004-Fix-d.patch"))
    for path, pr in ((fix_c, "up/kernels#13"), (fix_d, "up/kernels#14")):
        path.write_text(path.read_text().replace("Upstream-Status: pending\n",
                                                 f"Upstream-Status: submitted\nUpstream-PR: {pr}\n", 1))
    with fake_github() as fake:
        fake.grant("ghp_rebaseTestToken", "read")
        fake.add_pull("up/kernels", 13)
        fake.merge("up/kernels", 13, rp.culprit)
        fake.add_pull("up/kernels", 14)
        monkeypatch.setenv("KPATCH_GITHUB_API", fake.url)
        monkeypatch.setenv("GITHUB_TOKEN", "ghp_rebaseTestToken")
        result = rp.run("rebase", "--json")
        assert [r.path for r in fake.requests] == ["/graphql"]
        status = rp.run("status", "--prs", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)["result"]
    dropped = payload["stacks"][0]["patches"][2]
    assert (dropped["class"], dropped["commit"]) == ("upstream", rp.culprit)
    assert dropped["why"] == f"up/kernels#13 is merged upstream as {rp.culprit[:12]}"
    assert not fix_c.exists() and fix_d.exists()
    series = (rp.root / "patches" / "kernels" / "series").read_text()
    assert "0003-Fix-c.patch\n" not in series.replace("# dropped 0003-Fix-c.patch", "")
    assert (f"# dropped 0003-Fix-c.patch: upstream (up/kernels#13 is merged upstream as {rp.culprit[:12]}; "
            f"commit {rp.culprit})\n") in series
    mentions = {name: text for name, text in ((n, b.decode(errors="replace")) for n, b in rp.tracked().items())
                if "up/kernels#13" in text}
    assert list(mentions) == ["patches/kernels/series"]  # the evidence note only: no trailer anywhere
    state = json.loads((rp.root / ".kpatch" / "state.json").read_text())
    assert state.get("operation") is None and "up/kernels#13" not in json.dumps(state)
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout)["result"]["pr_states"] == {"up/kernels#14": "open"}


@pytest.mark.parametrize("status", [500, 503])
def test_github_server_errors_degrade(rp: RebaseProject, monkeypatch: pytest.MonkeyPatch, status: int) -> None:
    with fake_github() as fake:
        fake.fail(status, times=100)
        monkeypatch.setenv("KPATCH_GITHUB_API", fake.url)
        result = rp.run("rebase", "--json")
    assert result.exit_code == ExitCode.CONFLICT, result.output  # the rebase itself goes on as usual
    payload = json.loads(result.stdout)["result"]
    assert payload["github"] == f"GitHub unavailable ({fake.url} answered {status}): Upstream-PR states not checked"
    assert f"warning: GitHub unavailable ({fake.url} answered {status})" in result.stderr


def test_every_conflict_is_reported_in_one_run(rp: RebaseProject) -> None:
    """A second conflict behind the first is found by a trial apply, with its own culprit; both get resolved."""
    from kpatch.examples.upstreams import commit

    second = commit(rp.kernels, {"d.txt": replace_line(FILES["d"], 20, "d line 20 rewritten upstream")},
                    "Rewrite d", 500)
    result = rp.run("rebase", "--json")
    assert result.exit_code == ExitCode.CONFLICT
    kernels = json.loads(result.stdout)["result"]["stacks"][0]["patches"]
    assert [p["class"] for p in kernels] == ["upstream", "upstream", "conflict", "conflict"]
    assert kernels[2]["culprit"]["sha"] == rp.culprit and kernels[3]["culprit"]["sha"] == second
    assert kernels[3]["why"] == "trial apply" and kernels[3]["culprit"]["trials"] <= 7
    resolve_c(rp)
    again = rp.run("rebase", "--continue", "--json")
    assert again.exit_code == ExitCode.CONFLICT  # now "Fix d" conflicts for real
    kernels = json.loads(again.stdout)["result"]["stacks"][0]["patches"]
    assert [p["class"] for p in kernels] == ["upstream", "upstream", "three-way", "conflict"]
    assert kernels[3]["applied"] is False and kernels[3]["why"] == "" and kernels[3]["culprit"]["sha"] == second
    tree = rp.root / "work" / ".rebase" / "kernels"
    (tree / "d.txt").write_text(replace_line(FILES["d"], 20, "d line 20 rewritten upstream, fixed by us"))
    git(tree, "add", "d.txt")
    done = rp.run("rebase", "--continue", "--json")
    assert done.exit_code == 0, done.output
    assert classes(json.loads(done.stdout)["result"], "kernels") == ["upstream", "upstream", "three-way", "three-way"]


@pytest.mark.parametrize("verb", ["abort", "continue"])
def test_git_locks_a_killed_git_left_in_any_mirror_are_gone_after_abort_or_continue(rp: RebaseProject,
                                                                                    verb: str) -> None:
    """A git killed with kpatch can leave packed-refs.lock in a mirror (git closes that file at once, so no process
    is seen holding it), also in a stack that has no git am in progress to abort. The person's own git in that
    upstream's worktree fails on it (a branch deleted, a rebase), so --abort and --continue clear it."""
    assert rp.run("rebase").exit_code == ExitCode.CONFLICT  # kernels stopped in git am; app waits, untouched
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "kpatch"
    mirrors = cache / "mirrors"
    app, kernels = mirror_dir(cache, "app"), mirror_dir(cache, "kernels")
    stale = [app / "packed-refs.lock", kernels / "packed-refs.lock", app / "refs" / "tags" / "v1.lock"]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    if verb == "continue":
        resolve_c(rp)
    result = rp.run("rebase", f"--{verb}")
    assert result.exit_code == 0, result.output
    assert [p for p in stale if p.exists()] == []
    assert not list(mirrors.rglob("*.lock"))


def test_a_rebase_stopped_early_tries_each_later_patch_once_not_once_per_earlier_patch(tmp_path: Path) -> None:
    """The trial applies that predict the patches after a conflict (and the stacks it blocks) go onto one index in
    turn: a 250-patch rebase stopped at patch 75 ran 12,753 `git apply` processes (90 s), every earlier patch
    again for each (here that would be about 2,400); now two per patch (a check, then the apply), and what they
    predict is what `--continue` then finds."""
    from tests.support.many_patches import Upstreamed, make_long_project
    from tests.support.rebase_kills import resolve_conflicts

    counts = {"kernels": 90, "app": 50}
    later = {"kernels": Upstreamed(merged=(10,), three_way=(20, 60), conflict=30),
             "app": Upstreamed(merged=(15,), three_way=(30,))}
    project = make_long_project(tmp_path, counts, later)
    stopped = kpatch(project.root, "rebase", "--json", "--verbose")
    assert stopped.exit_code == ExitCode.CONFLICT, stopped.stderr
    applies = stopped.stderr.count(" apply --cached ")
    assert 0 < applies < 3 * sum(counts.values()), applies  # a check and an apply each, and the culprit's
    stacks = json.loads(stopped.stdout)["result"]["stacks"]
    predicted = {s["upstream"]: [p["class"] for p in s["patches"]] for s in stacks}
    assert predicted["kernels"].count("conflict") == 1 and "conflict" not in predicted["app"]
    assert "three-way" in predicted["kernels"][31:] and "three-way" in predicted["app"]
    resolve_conflicts(project.root / "work" / ".rebase" / "kernels")
    done = kpatch(project.root, "rebase", "--continue", "--json")
    assert done.exit_code == 0, done.stderr
    found = {s["upstream"]: [p["class"] for p in s["patches"]] for s in json.loads(done.stdout)["result"]["stacks"]}
    stop = predicted["kernels"].index("conflict")
    assert found["app"] == predicted["app"] and found["kernels"][stop + 1:] == predicted["kernels"][stop + 1:]
