"""What a rebase did to each patch (unchanged, changed with its interdiff, dropped, new), read from `git range-diff`
itself, on the rebase example: one patch only moves, one gets a real interdiff, two are dropped."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from kpatch import config
from kpatch.errors import ExitCode
from kpatch.examples.upstreams import commit
from kpatch.project.workspace import Workspace
from tests.support.gitrepos import git
from tests.support.json_envelope import checked
from tests.support.rebase_repos import FILES, RebaseProject, replace_line


def move_d(rp: RebaseProject) -> None:
    """Upstream puts two lines at the top of d.txt (Fix d's line moves) and rewrites line 18 (in Fix d's context)."""
    moved = "d header 1\nd header 2\n" + replace_line(FILES["d"], 18, "d line 18 reworded upstream")
    commit(rp.kernels, {"d.txt": moved}, "Move d (#42)", 900)


def rebase_through_the_conflict(rp: RebaseProject, *args: str) -> Any:
    """Rebase; resolve Fix c by hand (its own line changes: a real interdiff); go on."""
    assert rp.run("rebase").exit_code == ExitCode.CONFLICT
    tree = rp.root / "work" / ".rebase" / "kernels"
    (tree / "c.txt").write_text(replace_line(FILES["c"], 15, "c line 15 rewritten upstream, fixed by us"))
    subprocess.run(["git", "add", "c.txt"], cwd=tree, check=True)
    return rp.run("rebase", "--continue", *args)


def review(payload: dict[str, Any], stack: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in payload["stacks"] if s["upstream"] == stack)["review"]
    return found


def mirror(rp: RebaseProject, name: str) -> Path:
    return Workspace.create(config.load(rp.root / "kpatch.toml"), None, None).mirror(name).path


def test_rebase_classes_each_patch_moved_changed_dropped(rp: RebaseProject) -> None:
    move_d(rp)
    result = rebase_through_the_conflict(rp, "--json")
    assert result.exit_code == 0, result.output
    kernels = review(checked(result.stdout, "rebase")["result"], "kernels")
    changes = {p["name"]: p["change"] for p in kernels["patches"]}
    assert changes == {"0001-Fix-a.patch": "dropped", "0002-Fix-b.patch": "dropped", "0003-Fix-c.patch": "changed",
                       "0004-Fix-d.patch": "unchanged"}
    by_name = {p["name"]: p for p in kernels["patches"]}
    interdiff = by_name["0003-Fix-c.patch"]["interdiff"]
    assert "    -+c line 15 fixed by us\n" in interdiff
    assert "    ++c line 15 rewritten upstream, fixed by us\n" in interdiff
    # Fix d's context moved (range-diff shows it with `!`), its own lines did not: unchanged, the interdiff kept.
    assert " ! " in by_name["0004-Fix-d.patch"]["interdiff"].splitlines()[0]
    assert "d line 18 reworded upstream" in by_name["0004-Fix-d.patch"]["interdiff"]
    assert by_name["0001-Fix-a.patch"]["new_commit"] is None
    app = review(json.loads(result.stdout)["result"], "app")
    assert [p["change"] for p in app["patches"]] == ["unchanged", "unchanged"]
    assert all(" = " in p["interdiff"] for p in app["patches"])


def test_rebase_review_is_git_range_diff_byte_for_byte(rp: RebaseProject) -> None:
    assert rp.run("apply").exit_code == 0
    applied = {name: git(rp.root / "work" / name, "rev-parse", "HEAD") for name in ("kernels", "app")}
    move_d(rp)
    result = rebase_through_the_conflict(rp, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)["result"]
    for name in ("kernels", "app"):
        stack = review(payload, name)
        news = [p["new_commit"] for p in stack["patches"] if p["new_commit"]]
        assert stack["new_range"] == f"{stack['new_base']}..{news[-1]}"  # the rebased commits themselves
        text = subprocess.run(["git", "range-diff", "--no-color", stack["old_range"], stack["new_range"]],
                              cwd=mirror(rp, name), capture_output=True, check=True).stdout.decode()
        assert stack["range_diff"] == text
        assert "".join(p["interdiff"] for p in stack["patches"]) == text
        # the old side made from the files is, patch for patch, what git am made of them on the old base
        against_am = subprocess.run(["git", "range-diff", "--no-color", stack["old_range"],
                                     f"{stack['old_base']}..{applied[name]}"], cwd=mirror(rp, name),
                                    capture_output=True, text=True, check=True).stdout.splitlines()
        assert len(against_am) == {"kernels": 4, "app": 2}[name]
        assert all(" = " in line for line in against_am), against_am
        # the new side is the rebased commits themselves, the ones the worktree now holds
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=rp.root / "work" / name, capture_output=True,
                              text=True, check=True).stdout.strip()
        assert news[-1] == head


def test_rebase_prints_the_counts_and_names_the_changed(rp: RebaseProject) -> None:
    move_d(rp)
    result = rebase_through_the_conflict(rp)
    assert result.exit_code == 0, result.output
    assert "kernels patches: 1 unchanged, 1 changed (0003-Fix-c.patch), 2 dropped, 0 new" in result.stdout
    assert "app patches: 2 unchanged, 0 changed, 0 dropped, 0 new" in result.stdout


def committed(rp: RebaseProject) -> str:
    """The project as a git checkout with kpatch.toml and patches/ committed (as a fork's repository holds them)."""
    git(rp.root, "init", "-q", "-b", "main")
    git(rp.root, "add", "kpatch.toml", "patches")
    git(rp.root, "commit", "-q", "-m", "the stacks")
    return git(rp.root, "rev-parse", "HEAD")


def test_diff_after_a_rebase_shows_what_it_did_from_the_files_alone(rp: RebaseProject) -> None:
    before = committed(rp)
    move_d(rp)
    rebased = rebase_through_the_conflict(rp, "--json")
    assert rebased.exit_code == 0, rebased.output
    shutil.rmtree(rp.root / "work")  # no worktree needed: the patch files alone
    result = rp.run("diff", "--json")  # default: the last commit that changed patches/, so the uncommitted rebase
    assert result.exit_code == 0, result.output
    payload = checked(result.stdout, "diff")["result"]
    assert payload["revision"] == before
    kernels = next(s for s in payload["stacks"] if s["upstream"] == "kernels")
    assert {p["name"]: p["change"] for p in kernels["patches"]} == {
        "0001-Fix-a.patch": "dropped", "0002-Fix-b.patch": "dropped", "0003-Fix-c.patch": "changed",
        "0004-Fix-d.patch": "unchanged"}
    # the same interdiffs as the rebase's own commits gave, but for the pair lines (other commits, other SHAs)
    review_c = next(p for p in review(json.loads(rebased.stdout)["result"], "kernels")["patches"]
                    if p["name"] == "0003-Fix-c.patch")
    diff_c = next(p for p in kernels["patches"] if p["name"] == "0003-Fix-c.patch")
    assert diff_c["interdiff"].split("\n", 1)[1] == review_c["interdiff"].split("\n", 1)[1]
    git_text = subprocess.run(["git", "range-diff", "--no-color", kernels["old_range"], kernels["new_range"]],
                              cwd=mirror(rp, "kernels"), capture_output=True, check=True).stdout.decode()
    assert kernels["range_diff"] == git_text
    assert not git(rp.root, "stash", "list") and git(rp.root, "rev-parse", "HEAD") == before


def test_diff_stat_is_one_line_per_patch_and_upstream_filters(rp: RebaseProject) -> None:
    committed(rp)
    move_d(rp)
    assert rebase_through_the_conflict(rp).exit_code == 0
    result = rp.run("diff", "--stat", "--upstream", "kernels")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("kernels  ")
    rows = [line.split() for line in lines[1:5]]
    assert [(r[0], r[1]) for r in rows] == [("dropped", "0001-Fix-a.patch"), ("dropped", "0002-Fix-b.patch"),
                                            ("changed", "0003-Fix-c.patch"), ("unchanged", "0004-Fix-d.patch")]
    assert lines[5].strip() == "kernels patches: 1 unchanged, 1 changed (0003-Fix-c.patch), 2 dropped, 0 new"
    assert "app" not in result.stdout


def test_diff_against_a_revision_with_nothing_changed_is_all_unchanged(rp: RebaseProject) -> None:
    first = committed(rp)
    result = rp.run("diff", first, "--json")
    assert result.exit_code == 0, result.output
    stacks = json.loads(result.stdout)["result"]["stacks"]
    assert {p["change"] for s in stacks for p in s["patches"]} == {"unchanged"}
    assert all(" = " in p["interdiff"] for s in stacks for p in s["patches"])


def test_diff_bad_input_is_one_line_and_writes_nothing(rp: RebaseProject) -> None:
    outside = rp.run("diff")
    assert outside.exit_code == ExitCode.BAD_INPUT and "is not in a git checkout" in outside.stderr
    committed(rp)
    before = rp.tracked()
    unknown = rp.run("diff", "nope")
    assert unknown.exit_code == ExitCode.BAD_INPUT and "'nope' is not a commit of the project" in unknown.stderr
    other = rp.run("diff", "--upstream", "nope")
    assert other.exit_code == ExitCode.BAD_INPUT and "nope" in other.stderr
    assert len([line for line in unknown.stderr.splitlines() if line.startswith("error:")]) == 1
    assert rp.tracked() == before


def test_rebase_records_each_patchs_change_in_the_carry_history(rp: RebaseProject) -> None:
    toml = rp.root / "kpatch.toml"
    toml.write_text(toml.read_text() + '\n[dashboard]\nhistory = "history.jsonl"\n')
    move_d(rp)
    assert rebase_through_the_conflict(rp).exit_code == 0
    lines = [json.loads(line) for line in (rp.root / "history.jsonl").read_text().splitlines()]
    last = {(r["upstream"], r["patch"]): r["change"] for r in lines if r["kind"] == "patch"}
    assert last[("kernels", "0003-Fix-c.patch")] == "changed"
    assert last[("kernels", "0004-Fix-d.patch")] == "unchanged"
    assert last[("kernels", "0001-Fix-a.patch")] == "dropped"


def test_rebase_names_the_upstream_commits_behind_each_changed_or_three_way_patch(rp: RebaseProject) -> None:
    move_d(rp)
    result = rebase_through_the_conflict(rp, "--json")
    assert result.exit_code == 0, result.output
    kernels = {p["name"]: p for p in review(checked(result.stdout, "rebase")["result"], "kernels")["patches"]}
    behind_c = kernels["0003-Fix-c.patch"]["upstream_commits"]  # changed: the commit that rewrote its line
    assert [(c["sha"], c["subject"], c["pr"]) for c in behind_c] == [(rp.culprit, "Rewrite c", None)]
    behind_d = kernels["0004-Fix-d.patch"]["upstream_commits"]  # three-way: the commit that moved its context
    assert [(c["subject"], c["pr"], c["link"]) for c in behind_d] == [("Move d (#42)", 42, None)]
    assert behind_d[0]["author"] == "Up Stream <up@example.invalid>" and behind_d[0]["date"].startswith("20")
    assert kernels["0001-Fix-a.patch"]["upstream_commits"] == []


def test_a_pull_request_link_is_made_for_an_upstream_on_github_only() -> None:
    from kpatch.engine.evidence import forge_url

    assert forge_url("https://github.com/vllm-project/vllm.git") == "https://github.com/vllm-project/vllm"
    assert forge_url("git@github.com:vllm-project/vllm-xpu-kernels.git") == \
        "https://github.com/vllm-project/vllm-xpu-kernels"
    assert forge_url("/src/vllm") is None and forge_url("https://gitlab.com/a/b") is None
