"""The upstream commits behind a conflicting, changed or three-way patch: every commit of old base..new base that
touched the patch's lines (one `git log -p -U0` read once, the patch's lines carried through each commit), with the
pull request its subject names, linked on GitHub."""

from __future__ import annotations

from pathlib import Path

from kpatch.errors import ExitCode
from kpatch.examples.upstreams import commit, init_repo, write_stack
from kpatch.gitx import Repository
from kpatch.stack.series import load_series
from tests.git.test_rangediff import move_d, rebase_through_the_conflict
from tests.support.cli import run_kpatch
from tests.support.gitrepos import git
from tests.support.json_envelope import checked
from tests.support.rebase_repos import FILES, RebaseProject, numbered, replace_line

GITHUB = "https://github.com/up/kernels"


def on_github(rp: RebaseProject) -> dict[str, str | None]:
    """kpatch.toml names the kernels upstream on GitHub; KPATCH_URL_KERNELS fetches it from the local copy."""
    toml = rp.root / "kpatch.toml"
    old = f'url = "{rp.kernels}"'
    assert old in toml.read_text()
    toml.write_text(toml.read_text().replace(old, f'url = "{GITHUB}.git"'))
    return {"KPATCH_URL_KERNELS": str(rp.kernels)}


def touch_c(rp: RebaseProject) -> tuple[str, str]:
    """Upstream after "Rewrite c" (the culprit, on Fix c's line 15): two lines put at the top of c.txt (outside Fix
    c's lines, which only move down), then c line 17 (in Fix c's context, now line 19) reworded in PR 1234."""
    top = "c header 1\nc header 2\n" + replace_line(FILES["c"], 15, "c line 15 rewritten upstream")
    header = commit(rp.kernels, {"c.txt": top}, "Put a header on c", 900)
    tidy = commit(rp.kernels, {"c.txt": replace_line(top, 19, "c line 17 tidied upstream")}, "Tidy c (#1234)", 910)
    return header, tidy


def test_a_conflict_lists_every_upstream_commit_on_its_lines_with_the_pull_request_link(rp: RebaseProject) -> None:
    env = on_github(rp)
    header, tidy = touch_c(rp)
    result = run_kpatch(rp.root, "rebase", "--json", env=env)
    assert result.exit_code == ExitCode.CONFLICT, result.output
    kernels = next(s for s in checked(result.stdout, "rebase")["result"]["stacks"] if s["upstream"] == "kernels")
    fix_c = next(p for p in kernels["patches"] if p["name"] == "0003-Fix-c.patch")
    assert fix_c["class"] == "conflict" and fix_c["culprit"]["sha"] == rp.culprit
    assert [(c["sha"], c["subject"], c["pr"], c["link"]) for c in fix_c["upstream_commits"]] == [
        (tidy, "Tidy c (#1234)", 1234, f"{GITHUB}/pull/1234"), (rp.culprit, "Rewrite c", None, None)]
    assert header not in {c["sha"] for c in fix_c["upstream_commits"]}  # same file, not its lines
    assert fix_c["upstream_commits"][0]["author"] == "Up Stream <up@example.invalid>"
    assert all(p["upstream_commits"] == [] for p in kernels["patches"] if p["name"] != "0003-Fix-c.patch")

    assert run_kpatch(rp.root, "rebase", "--abort").exit_code == 0
    human = run_kpatch(rp.root, "rebase", env=env)
    assert human.exit_code == ExitCode.CONFLICT
    lines = human.stdout.splitlines()
    at = lines.index("  0003-Fix-c.patch (conflict): touched upstream by 2 commits")
    assert "broken by " + rp.culprit[:12] in lines[at - 2]  # right under the table, whose row names the culprit
    assert lines[at + 1].startswith(f'    {tidy[:12]} "Tidy c (#1234)" (Up Stream, 20')
    assert lines[at + 1].endswith(f") {GITHUB}/pull/1234")
    assert lines[at + 2].startswith(f'    {rp.culprit[:12]} "Rewrite c" (Up Stream, 20') and lines[at + 2].endswith(")")
    assert header[:12] not in human.stdout


def test_a_committed_rebase_shows_the_commits_behind_its_changed_and_three_way_patches(rp: RebaseProject) -> None:
    move_d(rp)
    result = rebase_through_the_conflict(rp)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    at = lines.index("  0003-Fix-c.patch (changed): touched upstream by 1 commit")
    assert lines[at + 1].startswith(f'    {rp.culprit[:12]} "Rewrite c" (Up Stream, ')
    at = lines.index("  0004-Fix-d.patch (three-way): touched upstream by 1 commit")
    assert lines[at + 1].endswith(" (#42)")  # a pull request, but no forge to link it on (a local upstream)


def test_diff_lists_the_upstream_commits_between_the_two_revisions_bases(rp: RebaseProject) -> None:
    env = on_github(rp)
    git(rp.root, "init", "-q", "-b", "main")
    git(rp.root, "add", "kpatch.toml", "patches")
    git(rp.root, "commit", "-q", "-m", "the stacks")
    header, tidy = touch_c(rp)
    assert run_kpatch(rp.root, "rebase", env=env).exit_code == ExitCode.CONFLICT
    tree = rp.root / "work" / ".rebase" / "kernels"
    (tree / "c.txt").write_text((tree / "c.txt").read_text().replace("c line 15 rewritten upstream",
                                                                       "c line 15 rewritten upstream, fixed by us"))
    git(tree, "add", "c.txt")
    assert run_kpatch(rp.root, "rebase", "--continue", env=env).exit_code == 0
    result = run_kpatch(rp.root, "diff", "--json", env=env)
    assert result.exit_code == 0, result.output
    kernels = next(s for s in checked(result.stdout, "diff")["result"]["stacks"] if s["upstream"] == "kernels")
    fix_c = next(p for p in kernels["patches"] if p["name"] == "0003-Fix-c.patch")
    assert fix_c["change"] == "changed"
    assert [(c["sha"], c["link"]) for c in fix_c["upstream_commits"]] == [(tidy, f"{GITHUB}/pull/1234"),
                                                                          (rp.culprit, None)]
    human = run_kpatch(rp.root, "diff", env=env)
    assert "  0003-Fix-c.patch (changed): touched upstream by 2 commits\n" in human.stdout
    assert f") {GITHUB}/pull/1234\n" in human.stdout and header[:12] not in human.stdout


def test_a_patchs_lines_are_read_on_the_base_through_the_patches_before_it(tmp_path: Path) -> None:
    """Patch 2's file numbers its lines after patch 1's five new lines: its lines on the base are 5 lower. An
    upstream commit on base line 28 meets them; one on base line 37 (where patch 2's file has its line 32) does not;
    a merge on the first-parent line is one commit, named by its pull request."""
    from kpatch.engine.evidence import behind

    upstream = tmp_path / "up"
    init_repo(upstream)
    text = numbered("f", 40)
    base = commit(upstream, {"f.txt": text}, "import", 0)
    ours = replace_line(text, 5, "f line 5\n" + "".join(f"ours {i}\n" for i in range(1, 5)) + "ours 5")
    write_stack(upstream, base, tmp_path / "patches", [
        ({"f.txt": ours}, "Add ours\n"),
        ({"f.txt": replace_line(ours, 35, "f line 30 fixed")}, "Fix line 30\n")])
    far = commit(upstream, {"f.txt": (text := replace_line(text, 37, "f line 37 upstream"))}, "Change 37", 10)
    near = commit(upstream, {"f.txt": (text := replace_line(text, 28, "f line 28 upstream"))}, "Change 28 (#5)", 11)
    git(upstream, "checkout", "-q", "-b", "side")
    commit(upstream, {"f.txt": replace_line(text, 29, "f line 29 on a branch")}, "Change 29", 12)
    git(upstream, "checkout", "-q", "main")
    commit(upstream, {"g.txt": "other\n"}, "Another file", 13)
    git(upstream, "merge", "-q", "--no-ff", "side", "-m", "Merge pull request #77 from up/side")
    merge = git(upstream, "rev-parse", "HEAD")
    series = load_series("up", tmp_path / "patches")
    found = behind(Repository(upstream), base, merge, series.patches, {"0002-Fix-line-30.patch"}, GITHUB)
    assert [(c.sha, c.pr, c.link) for c in found["0002-Fix-line-30.patch"]] == [
        (merge, 77, f"{GITHUB}/pull/77"), (near, 5, f"{GITHUB}/pull/5")]
    assert far not in {c.sha for c in found["0002-Fix-line-30.patch"]}
    assert set(found) == {"0002-Fix-line-30.patch"}
