"""The rebase's fast path (engine/fastpath.py): picks in one process give what `git am` gives, or hand over to it.

Each test rebases the same project twice from an apply: once as it comes (the fast path may pick the commits)
and once with the run state's stack hash dropped, which leaves only `git am`. Classes, culprits, hunks, the
rewritten patch files and the rebased commits must be the same.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kpatch.errors import ExitCode
from kpatch.examples.upstreams import commit, init_repo, write_stack
from kpatch.gitx import Repository, treepicks
from kpatch.gitx.picks import pick
from tests.support.cli import run_kpatch
from tests.support.example_toml import one_upstream
from tests.support.gitrepos import git
from tests.support.rebase_repos import numbered, replace_line

NAMES = ("f1", "f2", "f3", "f4", "f5", "f6")
FILES = {f"{n}.txt": numbered(n, 40) for n in NAMES}
CULPRIT_AT = 12  # the upstream commit (1-based after the base) that rewrites the line the f5 patch changes


@dataclass
class Case:
    root: Path
    upstream: Path
    culprit: str

    def run(self, *args: str) -> tuple[int, dict[str, Any]]:
        result = run_kpatch(self.root, *args, "--json", "--cache-dir", str(self.root.parent / "cache"))
        return result.exit_code, json.loads(result.stdout)["result"] if result.stdout.strip() else {}

    def tracked(self) -> dict[str, bytes]:
        return {str(p.relative_to(self.root)): p.read_bytes() for p in sorted((self.root / "patches").rglob("*"))
                if p.is_file()} | {"kpatch.toml": (self.root / "kpatch.toml").read_bytes()}

    def settled_head(self) -> str:
        return str(json.loads((self.root / ".kpatch" / "state.json").read_text())["settled"]["up"]["head"])

    def forget_stack_hash(self) -> None:
        """What an older run state holds: no stack hash, so only git am may move the stack."""
        path = self.root / ".kpatch" / "state.json"
        state = json.loads(path.read_text())
        state["settled"]["up"]["stack_hash"] = None
        path.write_text(json.dumps(state))


def build(tmp: Path, *, conflict: bool, short_context: bool = False, same_identity: bool = False) -> Case:
    """One upstream; a stack of six patches whose rebase has every class (and a conflict when `conflict`)."""
    upstream = tmp / "up"
    init_repo(upstream)
    base = commit(upstream, FILES, "import", 0)
    stack = [({f"{n}.txt": replace_line(FILES[f"{n}.txt"], line, f"{n} line {line} fixed")}, f"Fix {n}\n")
             for n, line in zip(NAMES, (10, 20, 20, 5, 15, 10), strict=True)]
    root = tmp / "project"
    write_stack(upstream, base, root / "patches" / "up", stack)
    if short_context:  # a patch file made with one line of context: the pick's diff (three) is not the file's
        scratch = tmp / "short"
        git(tmp, "clone", "-q", str(upstream), str(scratch))
        git(scratch, "checkout", "-q", "--detach", base)
        commit(scratch, {"f3.txt": stack[2][0]["f3.txt"]}, "Fix f3\n", 1002, ("kpatch developers",
                                                                           "dev@kpatch.invalid"))
        name = sorted((root / "patches" / "up").glob("0003-*"))[0]
        text = git(scratch, "format-patch", "-U1", "--stdout", "--zero-commit", "--no-signature", "HEAD~1..HEAD")
        name.write_text(text + "\n")  # git() strips the last newline
    if same_identity:  # the f2 patch gets the f1 patch's subject and date: two commits with one identity
        first, second = sorted((root / "patches" / "up").glob("000[12]-*"))
        date = next(line for line in first.read_text().splitlines() if line.startswith("Date: "))
        text = "".join(date + "\n" if line.startswith("Date: ") else line
                       for line in second.read_text().splitlines(keepends=True))
        second.write_text(text.replace("Subject: [PATCH] Fix f2", "Subject: [PATCH] Fix f1"))
    culprit = ""
    f2 = "".join(f"new top {i}\n" for i in range(5)) + FILES["f2.txt"]
    for i in range(1, 21):
        if i == 3:  # f2: lines above the patch: an offset only, am applies the file as it is
            commit(upstream, {"f2.txt": f2}, "Grow f2", 100 + i)
        elif i == 6:  # f3: line 22 changes, inside three lines of context (not inside one)
            commit(upstream, {"f3.txt": replace_line(FILES["f3.txt"], 22, "f3 line 22 upstream")}, "Touch f3", 100 + i)
        elif i == 9:  # f4: the same fix with another change: empty after a 3-way merge
            text = replace_line(replace_line(FILES["f4.txt"], 5, "f4 line 5 fixed"), 30, "f4 line 30 upstream")
            commit(upstream, {"f4.txt": text}, "Fix f4 and more", 100 + i)
        elif i == CULPRIT_AT and conflict:
            culprit = commit(upstream, {"f5.txt": replace_line(FILES["f5.txt"], 15, "f5 line 15 upstream")},
                             "Rewrite f5", 100 + i)
        else:
            commit(upstream, {f"churn/{i % 4}.txt": f"churn {i}\n"}, f"churn {i}", 100 + i)
    (root / "kpatch.toml").write_text(one_upstream(upstream, base))
    case = Case(root=root, upstream=upstream, culprit=culprit)
    assert case.run("apply")[0] == 0
    return case


def twins(tmp: Path, **kwargs: bool) -> tuple[Case, Case]:
    """The same project twice, applied; the second one can only go through git am."""
    fast = build(tmp / "fast", **kwargs)
    am = build(tmp / "am", **kwargs)
    am.forget_stack_hash()
    return fast, am


def picked(case: Case) -> list[str]:
    """What the fast path logged in the last rebase's log file."""
    logs = (case.root.parent / "cache" / "logs").glob("kpatch-*-rebase.log")
    lines = max(logs, key=lambda p: p.stat().st_mtime_ns).read_text().splitlines()
    return [line.split("kpatch.rebase: ", 1)[1] for line in lines if "kpatch.rebase: fast path:" in line]


def stacks(payload: dict[str, Any]) -> list[tuple[str, str, object, object]]:
    """What a rebase reports per patch, without what differs between two projects (their paths)."""
    return [(p["name"], p["class"], p["culprit"] and p["culprit"]["sha"], p["hunks"])
            for s in payload["stacks"] for p in s["patches"]]


def same_files(fast: Case, am: Case) -> None:
    assert {k: v for k, v in fast.tracked().items() if k != "kpatch.toml"} == \
        {k: v for k, v in am.tracked().items() if k != "kpatch.toml"}


def test_the_picks_class_every_patch_as_git_am_does(tmp_path: Path) -> None:
    """clean (file untouched upstream), clean (an offset), three-way, upstream (empty), clean: same classes,
    same patch files and the same rebased commits as git am's, without am."""
    fast, am = twins(tmp_path, conflict=False)
    code, payload = fast.run("rebase")
    assert code == 0, payload
    assert picked(fast) == ["fast path: 6 of 6 patch(es) picked"]
    am_code, am_payload = am.run("rebase")
    assert am_code == 0 and picked(am) == []
    assert [k for _, k, _, _ in stacks(payload)] == ["clean", "clean", "three-way", "upstream", "clean", "clean"]
    assert stacks(payload) == stacks(am_payload)
    same_files(fast, am)
    assert fast.settled_head() == am.settled_head()  # the same commits, SHA for SHA


def test_a_stop_hands_over_to_git_am_with_the_same_culprit(tmp_path: Path) -> None:
    """The pick of the f5 patch conflicts: git am goes on from it; conflict, culprit, hunks, the trial
    predictions after it, --continue and the result are git am's."""
    fast, am = twins(tmp_path, conflict=True)
    code, payload = fast.run("rebase")
    assert picked(fast) == ["fast path: 4 of 6 patch(es) picked; git am from 0005-Fix-f5.patch"]
    am_code, am_payload = am.run("rebase")
    assert code == am_code == ExitCode.CONFLICT
    assert [k for _, k, _, _ in stacks(payload)] == ["clean", "clean", "three-way", "upstream", "conflict", "clean"]
    assert stacks(payload) == stacks(am_payload)
    assert stacks(payload)[4][2] == fast.culprit
    for case in (fast, am):
        tree = case.root / "work" / ".rebase" / "up"
        assert git(tree, "status", "--porcelain").startswith("UU f5.txt")  # am's stop, for a person to resolve
        (tree / "f5.txt").write_text(replace_line(FILES["f5.txt"], 15, "f5 line 15 upstream, fixed"))
        git(tree, "add", "f5.txt")
    code, payload = fast.run("rebase", "--continue")
    am_code, am_payload = am.run("rebase", "--continue")
    assert code == am_code == 0
    assert stacks(payload) == stacks(am_payload)
    same_files(fast, am)
    assert fast.settled_head() == am.settled_head()


def test_a_pick_git_apply_would_take_differently_hands_over_to_git_am( tmp_path: Path) -> None:
    """A patch file with one line of context applies as it is where the pick's diff (three lines) changed:
    am would not merge, so am takes that patch and the rest; the class is am's (clean)."""
    fast, am = twins(tmp_path, conflict=False, short_context=True)
    code, payload = fast.run("rebase")
    assert picked(fast)[-1] == "fast path: 2 of 6 patch(es) picked; git am from 0003-Fix-f3.patch"
    am_code, am_payload = am.run("rebase")
    assert code == am_code == 0, (payload, am_payload)
    assert stacks(payload)[2][1] == "clean"
    assert stacks(payload) == stacks(am_payload)
    same_files(fast, am)
    assert fast.settled_head() == am.settled_head()


def test_an_edited_patch_file_is_applied_not_its_old_commit(tmp_path: Path) -> None:
    """The files no longer hold what the applied commits hold (a message reworded by hand): git am applies the
    files, and the rebased stack carries the edit."""
    case = build(tmp_path, conflict=False)
    patch = sorted((case.root / "patches" / "up").glob("0001-*"))[0]
    patch.write_text(patch.read_text().replace("Subject: [PATCH] Fix f1", "Subject: [PATCH] Fix f1, reworded"))
    code, payload = case.run("rebase")
    assert code == 0, payload
    assert picked(case) == []
    assert "Fix f1, reworded" in patch.read_text()
    log = git(case.root / "work" / "up", "log", "--format=%s", "-6")
    assert "Fix f1, reworded" in log


def test_an_export_lets_the_next_rebase_pick(tmp_path: Path) -> None:
    """A commit made in the worktree and exported: the files hold the commits again, so the picks run."""
    case = build(tmp_path, conflict=False)
    tree = case.root / "work" / "up"
    commit(tree, {"f6.txt": replace_line(FILES["f6.txt"], 30, "f6 line 30 ours")}, "Fix f6 more\n", 2000)
    assert case.run("export")[0] == 0
    code, payload = case.run("rebase")
    assert code == 0, payload
    assert picked(case) == ["fast path: 7 of 7 patch(es) picked"]
    assert len(payload["stacks"][0]["patches"]) == 7


def test_a_three_way_apply_leaves_no_stack_hash(tmp_path: Path) -> None:
    """An apply that needed a 3-way merge made a commit that is not its file's own diff: the next rebase
    applies the files with git am."""
    case = build(tmp_path, conflict=False)
    assert json.loads((case.root / ".kpatch" / "state.json").read_text())["settled"]["up"]["stack_hash"]
    code, payload = case.run("apply", "--onto", "up=main")  # f3's context changed upstream: three-way
    assert code == 0, payload
    assert json.loads((case.root / ".kpatch" / "state.json").read_text())["settled"]["up"]["stack_hash"] is None
    assert case.run("rebase", "--force")[0] == 0
    assert picked(case) == []


def test_commits_that_look_alike_are_picked_without_a_worktree_as_git_am_takes_them(tmp_path: Path) -> None:
    """Two commits with the same author, date and message: `git rebase` picks could not be matched to them
    (gitx.picks refuses them), but the picks without a worktree make each commit themselves and need no matching:
    the stack is picked, and classes, files and commits are git am's."""
    fast, am = twins(tmp_path, conflict=False, same_identity=True)
    code, payload = fast.run("rebase")
    am_code, am_payload = am.run("rebase")
    assert code == am_code == 0, payload
    assert picked(fast) == ["fast path: 6 of 6 patch(es) picked"]
    assert stacks(payload) == stacks(am_payload)
    same_files(fast, am)
    assert fast.settled_head() == am.settled_head()


def test_picks_report_their_progress_and_what_became_of_each_commit(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """gitx.picks on its own: progress as git reports it, a commit already in HEAD dropped (None), a stop; with
    nothing but git and sh on PATH (the todo goes in without `cp`)."""
    repo = tmp_path / "repo"
    init_repo(repo)
    base = commit(repo, {"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"}, "base", 0)
    ours = [commit(repo, {f"{n}.txt": f"{n} ours\n"}, f"ours {n}", i) for i, n in enumerate("abc", 1)]
    git(repo, "checkout", "-q", "--detach", base)
    commit(repo, {"b.txt": "b ours\n", "c.txt": "c theirs\n"}, "theirs", 10)
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("git", "sh"):
        (tools / name).symlink_to(shutil.which(name) or f"/usr/bin/{name}")
    monkeypatch.setenv("PATH", str(tools))
    seen: list[int] = []
    went = pick(Repository(repo), ours, seen.append)
    monkeypatch.undo()
    assert went is not None and went.stopped  # c conflicts
    assert went.picked[1] is None and went.picked[0] is not None and len(went.picked) == 2
    assert seen[-1] == 2 and seen == sorted(seen)
    assert git(repo, "status", "--porcelain") == "" and not (repo / ".git" / "rebase-merge").exists()
    assert git(repo, "log", "--format=%s", "-2").splitlines() == ["ours a", "theirs"]


def test_picks_without_a_worktree_make_the_commits_git_rebase_makes(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """gitx.treepicks against gitx.picks on the same commits: a pick merged with an upstream change to its file,
    one already upstream (dropped), a stop at a conflict; the same commit SHAs and the same stop. Past MERGES_MAX
    merges it answers None (the caller picks with git rebase)."""
    repo = tmp_path / "repo"
    init_repo(repo)
    a = numbered("a", 30)
    base = commit(repo, {"a.txt": a, "b.txt": "b\n", "c.txt": "c\n"}, "base", 0)
    ours = [commit(repo, {"a.txt": replace_line(a, 25, "ours a")}, "ours a\n\nbody  \n", 1),
            commit(repo, {"b.txt": "b ours\n"}, "ours b", 2),
            commit(repo, {"c.txt": "c ours\n"}, "ours c", 3)]
    git(repo, "checkout", "-q", "--detach", base)
    onto = commit(repo, {"a.txt": replace_line(a, 3, "theirs a"), "b.txt": "b ours\n", "c.txt": "c theirs\n"},
                  "theirs", 10)
    seen: list[int] = []
    without = treepicks.pick(Repository(repo), onto, ours, seen.append)
    assert git(repo, "rev-parse", "HEAD") == onto  # nothing moved
    assert without is not None and without.stopped and without.picked[1] is None and len(without.picked) == 2
    assert seen == [1, 2]
    assert pick(Repository(repo), ours, lambda _n: None) == without  # git rebase -i, onto HEAD (the same commit)
    monkeypatch.setattr(treepicks, "MERGES_MAX", 1)
    assert treepicks.pick(Repository(repo), onto, ours, lambda _n: None) is None


def test_a_discarded_worktree_commit_is_not_picked(tmp_path: Path) -> None:
    """The worktree holds a commit no patch file has; with --discard the picks are the files' commits (those
    kpatch settled), never what the worktree holds now."""
    case = build(tmp_path, conflict=False)
    tree = case.root / "work" / "up"
    commit(tree, {"f6.txt": replace_line(FILES["f6.txt"], 30, "f6 line 30 ours")}, "Not exported\n", 2000)
    assert case.run("rebase")[0] == ExitCode.WORKTREE  # refused: the commit would be lost
    code, payload = case.run("rebase", "--discard")
    assert code == 0, payload
    assert picked(case) == ["fast path: 6 of 6 patch(es) picked"]
    assert "Not exported" not in git(tree, "log", "--format=%s", "-8")
    assert not any("Not exported" in p.read_text() for p in (case.root / "patches" / "up").glob("*.patch"))


def _applies_alone(repo: Path, commit_sha: str, patch: Path, paths: tuple[str, ...], index: Path) -> bool:
    """The check as it was made one patch at a time: ls-tree of its paths into a fresh index, then git apply."""
    env = {"GIT_INDEX_FILE": str(index)}
    entries = Repository(repo).run(["ls-tree", "-z", "--full-tree", commit_sha, "--", *paths]).stdout
    Repository(repo).run(["update-index", "-z", "--index-info"], stdin=entries, env=env)
    return Repository(repo).run(["apply", "--cached", "--check", "--", str(patch)], env=env, check=False).status == 0


def test_the_batched_apply_checks_answer_as_one_check_per_patch(tmp_path: Path) -> None:
    """applies_each (one index, a folder per check) answers as a fresh index per patch does: the same path at two
    commits (applies at one, not at the other), an executable file, a file in a folder one commit lacks, a new
    file that already exists, a deleted file, and a path that is a folder there."""
    from kpatch.gitx.picks import applies_each
    from kpatch.stack import parse_patch

    repo = tmp_path / "repo"
    init_repo(repo)
    base = commit(repo, {"a.txt": numbered("a", 20), "sub/dir/b.txt": numbered("b", 20), "gone.txt": "gone\n",
                         "run.sh": "#!/bin/sh\necho one\n"}, "base", 0)
    git(repo, "update-index", "--chmod=+x", "run.sh")
    git(repo, "commit", "-q", "-m", "exec")
    base = git(repo, "rev-parse", "HEAD")
    moved = commit(repo, {"a.txt": replace_line(numbered("a", 20), 10, "a line 10 upstream")}, "move a", 1)
    no_sub = commit(repo, {"new.txt": "new\n"}, "new file", 2)
    git(repo, "rm", "-q", "-r", "sub")
    git(repo, "commit", "-q", "-m", "no sub")
    no_sub = git(repo, "rev-parse", "HEAD")
    git(repo, "rm", "-q", "gone.txt")
    (repo / "gone.txt").mkdir()
    (repo / "gone.txt" / "x").write_text("x\n")
    git(repo, "add", "gone.txt/x")
    git(repo, "commit", "-q", "-m", "gone is a folder")
    folder = git(repo, "rev-parse", "HEAD")
    patches = {}
    for name, files in {"a": {"a.txt": replace_line(numbered("a", 20), 10, "a line 10 ours")},
                        "b": {"sub/dir/b.txt": replace_line(numbered("b", 20), 3, "b ours")},
                        "run": {"run.sh": "#!/bin/sh\necho two\n"}, "new": {"new.txt": "new\n"}}.items():
        git(repo, "checkout", "-q", "--detach", base)
        for path, text in files.items():
            (repo / path).write_text(text)
        git(repo, "commit", "-q", "-a", "-m", name) if name != "new" else commit(repo, files, name, 3)
        patches[name] = tmp_path / f"{name}.patch"
        patches[name].write_text(git(repo, "format-patch", "--stdout", "-1", "HEAD") + "\n")
    git(repo, "checkout", "-q", "--detach", base)
    git(repo, "rm", "-q", "gone.txt")
    git(repo, "commit", "-q", "-m", "drop gone")
    patches["gone"] = tmp_path / "gone.patch"
    patches["gone"].write_text(git(repo, "format-patch", "--stdout", "-1", "HEAD") + "\n")
    cases = [(c, patches[n]) for c, n in ((base, "a"), (moved, "a"), (base, "b"), (no_sub, "b"), (base, "run"),
                                          (no_sub, "run"), (base, "new"), (no_sub, "new"), (base, "gone"),
                                          (folder, "gone"), (moved, "run"))]
    checks = [(c, p, parse_patch(p).paths) for c, p in cases]
    alone = [_applies_alone(repo, c, p, paths, tmp_path / f"index-{n}") for n, (c, p, paths) in enumerate(checks)]
    assert alone == [True, False, True, False, True, True, True, False, True, False, True]
    assert applies_each(Repository(repo), checks) == alone
    assert applies_each(Repository(repo), []) == []


def test_the_batched_apply_checks_take_file_names_with_newlines(tmp_path: Path) -> None:
    """A name git quotes (a newline, a tab, a quote) cannot go into a `cat-file --batch` line: such a check is made
    with the file's own entries, with the same answer, instead of failing the rebase."""
    from kpatch.gitx.picks import applies_each
    from kpatch.stack import parse_patch

    repo = tmp_path / "repo"
    init_repo(repo)
    odd = 'odd\ndir/name\t"q".txt'  # a folder name with a newline, a file name with a tab and quotes
    base = commit(repo, {odd: numbered("o", 20), "plain.txt": numbered("p", 20)}, "base", 0)
    moved = commit(repo, {odd: replace_line(numbered("o", 20), 10, "o line 10 upstream")}, "move", 1)
    git(repo, "checkout", "-q", "--detach", base)
    commit(repo, {odd: replace_line(numbered("o", 20), 10, "o line 10 ours"),
                  "plain.txt": replace_line(numbered("p", 20), 2, "p ours")}, "ours", 2)
    patch = tmp_path / "ours.patch"
    patch.write_bytes(git(repo, "format-patch", "--stdout", "-1", "HEAD").encode() + b"\n")
    paths = parse_patch(patch).paths
    assert odd in paths
    assert applies_each(Repository(repo), [(base, patch, paths), (moved, patch, paths)]) == [True, False]


def test_a_format_patch_started_ahead_is_what_the_writer_reads(tmp_path: Path) -> None:
    """prefetch_patches formats base..tip in the background; the writer's format_patches of that range takes its
    texts (no second git format-patch), byte for byte what a fresh run gives; a range moved since is run afresh."""
    import logging

    from kpatch.gitx.patches import _format_patches, format_patches, prefetch_patches

    repo = tmp_path / "repo"
    init_repo(repo)
    base = commit(repo, {"a.txt": numbered("a", 20)}, "base", 0)
    for n in range(1, 4):
        commit(repo, {"a.txt": replace_line(numbered("a", 20), n, f"a {n} ours")}, f"ours {n}\n\nbody {n}\n", n)
    tree = Repository(repo)
    fresh = _format_patches(tree, base, tree.head())
    assert len(fresh) == 3
    prefetch_patches(tree, base, tree.head())
    seen: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = seen.append  # type: ignore[method-assign,assignment]
    logger = logging.getLogger("kpatch.git")
    level = logger.level
    logger.setLevel(logging.DEBUG)  # not `logger.level = ...`: that keeps logging's cached "debug is off"
    logger.addHandler(handler)

    def here() -> list[logging.LogRecord]:  # format-patch runs logged by this thread, not the one ahead
        return [r for r in seen if "format-patch" in r.getMessage() and r.threadName == "MainThread"]

    try:
        assert format_patches(Repository(repo), base) == fresh
        assert here() == []
        prefetch_patches(tree, base, tree.head())
        commit(repo, {"a.txt": replace_line(numbered("a", 20), 9, "a 9 ours")}, "ours 9\n", 9)
        moved = format_patches(tree, base)
        assert len(moved) == 4 and moved[:3] == fresh
        assert len(here()) == 1
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_only_a_git_apply_that_just_checks_starts_without_the_parent_death_hook() -> None:
    """`git apply --check` writes nothing, so the batched checks start as readers (vfork, safe beside the threads
    that run them); an apply that writes an index keeps the hook, even with a file named --check."""
    from kpatch.gitx.runner import _guard

    assert _guard(["git", "-c", "rerere.enabled=false", "apply", "--cached", "--check", "--directory=d", "--",
                   "p.patch"]) is None
    assert _guard(["git", "-c", "rerere.enabled=false", "apply", "--cached", "--3way", "--", "p.patch"]) is not None
    assert _guard(["git", "apply", "--cached", "--", "--check"]) is not None


def test_a_picked_stacks_review_takes_its_old_side_from_the_picked_commits_not_a_second_git_am(
        tmp_path: Path) -> None:
    """The commits the fast path picks hold exactly the patch files (Settled.stack_hash), so the review's old side
    is those commits: no `git am` of the files runs again (on 150 real patches it was most of a rebase's cost).
    The review is the one git am's old side gives, pairing, classes and range-diff text alike, with the old
    commits' SHAs those of the picked commits."""
    fast, am = twins(tmp_path, conflict=False)
    applied = fast.settled_head()
    code, payload = fast.run("rebase")
    assert code == 0, payload
    am_code, am_payload = am.run("rebase")
    assert am_code == 0, am_payload
    logs = (fast.root.parent / "cache" / "logs").glob("kpatch-*-rebase.log")
    ran = max(logs, key=lambda p: p.stat().st_mtime_ns).read_text()
    assert " am -3 " not in ran and "picked" in ran  # neither the picks' hand-over nor the old side ran git am
    review, am_review = (p["stacks"][0]["review"] for p in (payload, am_payload))
    base = review["old_base"]
    olds = git(fast.root / "work" / "up", "rev-list", "--reverse", f"{base}..{applied}").split()
    assert review["old_range"] == f"{base}..{applied}"
    assert [p["old_commit"] for p in review["patches"]] == olds
    renamed = json.dumps(am_review)
    for mine, theirs in zip(olds, [p["old_commit"] for p in am_review["patches"]], strict=True):
        renamed = renamed.replace(theirs, mine).replace(theirs[:7], mine[:7])
    renamed = renamed.replace(am_review["old_range"].split("..")[0], base)
    assert json.loads(renamed) == review
