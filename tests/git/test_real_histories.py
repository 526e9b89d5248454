"""Real histories (issue 36 item 3, issue 38's empty first commit): shapes seen in real forks and Debian quilt
series, each on a small real repository: an empty commit first on a branch, subjects with runs of spaces, patch
file names as `git format-patch` gives them, plain patches without a date."""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import Result

from tests.support.cli import run_kpatch
from tests.support.gitrepos import git
from tests.support.https_git import https_git


@dataclass
class Small:
    """An upstream `app` (one commit, tagged v1), a fork of it to add commits to, and projects made by init."""

    tmp: Path
    up: Path
    fork: Path

    def project(self, name: str = "proj") -> Path:
        root = self.tmp / name
        root.mkdir()
        made = run_kpatch(root, "init", "--upstream", f"app={self.up}@v1")
        assert made.exit_code == 0, made.output
        return root

    def commit(self, subject: str, *, files: dict[str, str] | None = None, step: int = 1) -> str:
        """A commit on the fork's branch `f`: `files` written (none: an empty commit)."""
        for path, text in (files or {}).items():
            (self.fork / path).write_text(text)
            git(self.fork, "add", path)
        git(self.fork, "commit", "--quiet", "--allow-empty", "--cleanup=verbatim", "-m", subject, date=step)
        return git(self.fork, "rev-parse", "HEAD")


@pytest.fixture
def small(tmp_path: Path) -> Small:
    up = tmp_path / "up"
    up.mkdir()
    git(up, "init", "--quiet", "-b", "main")
    (up / "a.txt").write_text("a\n")
    git(up, "add", "a.txt")
    git(up, "commit", "--quiet", "-m", "base")
    git(up, "tag", "v1")
    fork = tmp_path / "fork"
    git(tmp_path, "clone", "--quiet", str(up), str(fork))
    git(fork, "checkout", "--quiet", "-b", "f")
    return Small(tmp=tmp_path, up=up, fork=fork)


def _import(root: Path, *args: str) -> Result:
    return run_kpatch(root, "import", "app", *args)


def _stack(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "patches" / "app").iterdir())}


def _series(root: Path) -> list[str]:
    """The patch names the series lists, in order (its comments left out)."""
    text = (root / "patches" / "app" / "series").read_text()
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def _format_patch(tree: Path, out: Path, since: str = "v1") -> list[str]:
    """git's own format-patch of since..HEAD: the file names it gives, in order."""
    git(tree, "format-patch", "--quiet", "-o", str(out), f"{since}..HEAD")
    return sorted(p.name for p in out.iterdir())


# --- issue 38: an empty commit first on the branch ----------------------------------------------------------------


def test_an_empty_commit_first_on_the_branch_is_left_out_and_named(small: Small) -> None:
    empty = small.commit("Empty one")
    small.commit("Real one", files={"b.txt": "b\n"}, step=2)
    root = small.project()
    result = _import(root, "--from", f"{small.fork}@f")
    assert result.exit_code == 0, result.output
    assert f"skipped commit {empty[:12]} \"Empty one\": it changes nothing" in result.stdout
    assert _series(root) == ["0001-Real-one.patch"]


# --- names as git names them ----------------------------------------------------------------------------------------

SUBJECTS = [
    "Fix foo_bar.baz in x.y",
    "Keep ..dots... and trailing dots...",
    "Ünïcode wörds: naïve café",
    "[XPU] Tag: with/slashes and (parens) & co",
    "Rename the very_long_module.name and the other_module.name and more words",
    "a_b__c..d--e  f",
    "Ends in an underscore_",
    "!!!",
]


def test_new_patch_files_are_named_as_git_format_patch_names_them(small: Small) -> None:
    for step, subject in enumerate(SUBJECTS, start=1):
        small.commit(subject, files={f"f{step}.txt": f"{step}\n"}, step=step)
    root = small.project()
    result = _import(root, "--from", f"{small.fork}@f")
    assert result.exit_code == 0, result.output
    theirs = _format_patch(small.fork, small.tmp / "fp")
    ours = _series(root)
    assert ours == theirs
    assert sorted(_stack(root)) == sorted([*theirs, "series"])


# --- subjects git am reads otherwise --------------------------------------------------------------------------------


def test_subjects_with_runs_of_spaces_are_imported_as_git_am_reads_them_said_once(small: Small) -> None:
    spaced = small.commit("Fix  the  cache", files={"b.txt": "b\n"}, step=1)
    small.commit("A plain one", files={"c.txt": "c\n"}, step=2)
    tabbed = small.commit("Tabs\tand   spaces", files={"d.txt": "d\n"}, step=3)
    root = small.project()
    result = _import(root, "--from", f"{small.fork}@f")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("git am reads a subject with every run of spaces made one space") == 1
    assert f"commit {spaced[:12]}: 'Fix  the  cache' -> 'Fix the cache'" in result.stdout
    assert f"commit {tabbed[:12]}: 'Tabs\\tand   spaces' -> 'Tabs and spaces'" in result.stdout
    assert "A plain one" not in result.stdout.split("wrote")[0]
    stack = _stack(root)
    assert list(stack) == ["0001-Fix-the-cache.patch", "0002-A-plain-one.patch", "0003-Tabs-and-spaces.patch",
                           "series"]
    assert b"Subject: [PATCH] Fix the cache\n" in stack["0001-Fix-the-cache.patch"]
    applied = run_kpatch(root, "apply")
    assert applied.exit_code == 0, applied.output
    assert run_kpatch(root, "export", "--check").exit_code == 0
    # git's own format-patch of the same commits, imported with --series: the same stack, the same words
    _format_patch(small.fork, small.tmp / "mails")
    other = small.project("other")
    taken = _import(other, "--series", str(small.tmp / "mails"))
    assert taken.exit_code == 0, taken.output
    assert _stack(other) == stack
    assert taken.stdout.count("git am reads a subject with every run of spaces made one space") == 1
    assert "0001-Fix-the-cache.patch: 'Fix  the  cache' -> 'Fix the cache'" in taken.stdout


def test_a_plain_patch_whose_subject_has_runs_of_spaces_is_imported_as_git_am_reads_it(small: Small) -> None:
    folder = small.tmp / "quilt"
    folder.mkdir()
    (folder / "fix.diff").write_text("Subject: Fix  the  cache\n\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n")
    root = small.project()
    result = _import(root, "--series", str(folder), "--author", "A U Thor <a@example.invalid>")
    assert result.exit_code == 0, result.output
    assert "fix.diff: 'Fix  the  cache' -> 'Fix the cache'" in result.stdout
    assert list(_stack(root)) == ["0001-Fix-the-cache.patch", "series"]


def test_export_names_the_collapsed_spaces_as_the_reason_git_am_reads_a_subject_otherwise(small: Small) -> None:
    small.commit("Fine", files={"b.txt": "b\n"})
    root = small.project()
    assert _import(root, "--from", f"{small.fork}@f").exit_code == 0
    assert run_kpatch(root, "apply").exit_code == 0
    tree = root / "work" / "app"
    (tree / "c.txt").write_text("c\n")
    git(tree, "add", "c.txt")
    git(tree, "commit", "--quiet", "-m", "Two  spaces")
    result = run_kpatch(root, "export")
    assert result.exit_code != 0
    assert "git am reads its subject as 'Two spaces' (it makes every run of spaces one space)" in result.stderr


# --- reproducible import ---------------------------------------------------------------------------------------------

DP_PATCH = """\
# DP: Fix the greeting (from upstream's bug tracker)

--- a/a.txt
+++ b/a.txt
@@ -1 +1 @@
-a
+{line}
"""


def test_plain_patches_without_a_date_import_to_the_same_bytes_dated_as_the_base(small: Small) -> None:
    folder = small.tmp / "debian-patches"
    folder.mkdir()
    (folder / "greeting.diff").write_text(DP_PATCH.format(line="hello"))
    (folder / "series").write_text("greeting.diff\n")
    stacks = []
    for name in ("one", "two"):
        root = small.project(name)
        result = _import(root, "--series", str(folder), "--author", "Debian Maintainer <dm@example.invalid>")
        assert result.exit_code == 0, result.output
        stacks.append(_stack(root))
    assert stacks[0] == stacks[1]
    base_date = subprocess.run(["git", "log", "-1", "--format=%cD", "v1"], cwd=small.up, capture_output=True,
                               text=True, check=True).stdout.strip()
    (data,) = (v for k, v in stacks[0].items() if k != "series")
    date = re.search(rb"^Date: (.*)$", data, re.MULTILINE)
    assert date is not None and date.group(1).decode() == base_date


# --- a stack whose remaining patches are all upstream ----------------------------------------------------------------


@pytest.mark.parametrize("squashed", [False, True], ids=["picked", "squashed"])
@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_rebase_onto_an_upstream_that_has_every_patch_drops_them_all_and_writes_the_empty_stack(
        small: Small, warm: bool, squashed: bool) -> None:
    small.commit("First patch", files={"b.txt": "b\n"}, step=1)
    small.commit("Second patch", files={"c.txt": "c\n"}, step=2)
    root = small.project()
    assert _import(root, "--from", f"{small.fork}@f").exit_code == 0
    if warm:  # the stack applied: its worktree and run state are there
        assert run_kpatch(root, "apply").exit_code == 0
    git(small.up, "fetch", "--quiet", str(small.fork), "f")
    if squashed:  # both in one upstream commit: no patch-id finds them, each applies as empty
        git(small.up, "cherry-pick", "--no-commit", "v1..FETCH_HEAD")
        git(small.up, "commit", "--quiet", "-m", "Both patches in one", date=5)
    else:
        git(small.up, "cherry-pick", "v1..FETCH_HEAD", date=5)
    merged = git(small.up, "rev-list", "--reverse", "v1..main").split()
    merged = merged * 2 if squashed else merged
    (small.up / "z.txt").write_text("later\n")
    git(small.up, "add", "z.txt")
    git(small.up, "commit", "--quiet", "-m", "A later upstream commit", date=6)
    head = git(small.up, "rev-parse", "main")
    result = run_kpatch(root, "rebase", "--json")
    assert result.exit_code == 0, result.output
    (stack,) = json.loads(result.stdout)["result"]["stacks"]
    names = ["0001-First-patch.patch", "0002-Second-patch.patch"]
    assert [(p["name"], p["class"], p["commit"]) for p in stack["patches"]] == \
        [(name, "upstream", commit) for name, commit in zip(names, merged, strict=True)]
    assert _series(root) == []
    series = (root / "patches" / "app" / "series").read_text()
    for name, commit in zip(names, merged, strict=True):
        assert re.search(rf"^# dropped {re.escape(name)}: upstream \(.*; commit {commit}\)$", series, re.MULTILINE)
    assert list(_stack(root)) == ["series"]
    assert f'base = "{head}"' in (root / "kpatch.toml").read_text()
    status = run_kpatch(root, "status")
    assert status.exit_code == 0, status.output
    assert run_kpatch(root, "rebase", "--continue").exit_code != 0  # nothing left in progress
    if warm:
        assert git(root / "work" / "app", "rev-parse", "HEAD") == head


# --- issue 36 item 2: every state shown is the state on disk ----------------------------------------------------------


def test_status_after_a_rebase_left_a_worktree_with_changes_shows_it_at_the_old_base(small: Small) -> None:
    small.commit("First patch", files={"b.txt": "b\n"}, step=1)
    root = small.project()
    assert _import(root, "--from", f"{small.fork}@f").exit_code == 0
    assert run_kpatch(root, "apply").exit_code == 0
    tree = root / "work" / "app"
    old_base = git(small.up, "rev-parse", "v1")
    old_head = git(tree, "rev-parse", "HEAD")
    (tree / "a.txt").write_text("my local change\n")
    (tree / "b.txt").write_text("another\n")
    (small.up / "z.txt").write_text("later\n")
    git(small.up, "add", "z.txt")
    git(small.up, "commit", "--quiet", "-m", "A later upstream commit", date=6)
    new_base = git(small.up, "rev-parse", "main")
    rebased = run_kpatch(root, "rebase")
    assert rebased.exit_code == 0, rebased.output
    assert "left as it is" in rebased.stderr
    assert git(tree, "rev-parse", "HEAD") == old_head  # on disk: the old base, the changes kept
    shown = run_kpatch(root, "status", "--json")
    assert shown.exit_code == 0, shown.output
    (report,) = json.loads(shown.stdout)["result"]["upstreams"]
    assert report["base_commit"] == new_base
    assert report["worktree_base"] == old_base
    assert report["modified_files"] == 2
    assert [p["state"] for p in report["patches"]] == ["not applied"]
    human = run_kpatch(root, "status")
    assert human.exit_code == 0, human.output
    assert f"worktree at the old base {old_base[:12]}, not on the base, with 2 modified files: bring it across " \
        f"with 'git -C {tree} stash', 'kpatch apply', then 'git -C {tree} stash pop'" in human.stdout
    assert re.search(r"0001-First-patch\.patch +not applied", human.stdout)
    # the commands it names do bring it across, the changes kept
    git(tree, "stash")
    assert run_kpatch(root, "apply").exit_code == 0
    git(tree, "stash", "pop")
    (after,) = json.loads(run_kpatch(root, "status", "--json").stdout)["result"]["upstreams"]
    assert after["worktree_base"] is None and after["modified_files"] == 2
    assert [p["state"] for p in after["patches"]] == ["applied"]
    assert git(tree, "merge-base", "HEAD", new_base) == new_base


def _files(root: Path) -> dict[str, bytes]:
    """Every file of the project and its worktree (git's own folders left out): 'nothing changed' checks."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.parts and p.name != "lock"}


@pytest.mark.parametrize("where", ["no-repository", "unreachable"])
@pytest.mark.parametrize("command", ["apply", "status"])
def test_a_given_url_that_is_no_git_repository_is_bad_input_naming_the_upstream_and_the_url(
        small: Small, command: str, where: str) -> None:
    small.commit("First patch", files={"b.txt": "b\n"})
    root = small.project()
    assert _import(root, "--from", f"{small.fork}@f").exit_code == 0
    assert run_kpatch(root, "apply").exit_code == 0  # the mirror has everything: nothing needs a fetch
    if where == "no-repository":
        url = str(small.tmp / "just-a-folder")
        Path(url).mkdir()
    else:
        url = "https://127.0.0.1:9/app.git"
    before = _files(root)
    result = run_kpatch(root, command, "--url", f"app={url}")
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: upstream app: --url app={url} is no git repository "
                                                     "kpatch can fetch from: "), result.stderr
    assert _files(root) == before
    assert run_kpatch(root, command, "--url", f"app={small.up}").exit_code == 0  # a real one is taken


@pytest.mark.parametrize("cause", ["no-repository", "authentication-refused", "not-found"])
def test_a_fetch_that_cannot_pass_on_a_retry_fails_at_once(small: Small, monkeypatch: pytest.MonkeyPatch,
                                                           cause: str) -> None:
    root = small.project()
    monkeypatch.setenv("KPATCH_FETCH_RETRY_DELAY", "5")  # a retry would take 5 s, a second one 10 s more
    monkeypatch.setenv("XDG_CACHE_HOME", str(small.tmp / "fresh-cache"))
    with https_git({"app": small.up}, small.tmp / "server", "user", "secret") as server:
        monkeypatch.setenv("GIT_SSL_CAINFO", str(server.ca_file))
        if cause == "no-repository":
            url, shown, says = str(small.tmp / "not-a-repository"), "", "does not appear to be a git repository"
            Path(url).mkdir()
        elif cause == "authentication-refused":
            url = server.url.replace("https://", "https://user:wrong@") + "/app.git"
            shown, says = server.url.replace("https://", "https://***@") + "/app.git", "Authentication failed"
        else:
            url = server.url.replace("https://", "https://user:secret@") + "/nothing-here.git"
            shown, says = server.url.replace("https://", "https://***@") + "/nothing-here.git", "not found"
        toml = root / "kpatch.toml"
        toml.write_text(toml.read_text().replace(f'"{small.up}"', f'"{url}"'))
        started = time.monotonic()
        result = run_kpatch(root, "apply")
        took = time.monotonic() - started
    assert took < 5, result.output
    assert result.exit_code == 4, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "tries" not in errors[0], result.stderr
    assert errors[0].startswith(f"error: upstream app: cannot fetch {shown or url}: ")
    assert says in errors[0] and "secret" not in result.output and "wrong" not in result.output
    assert errors[0].endswith("(to work offline: --url app=PATH or KPATCH_URL_APP=PATH)")


def test_no_fetch_hint_names_an_option_the_command_lacks_or_the_user_gave(small: Small) -> None:
    root = small.tmp / "made"
    root.mkdir()
    remote = run_kpatch(root, "init", "--upstream", "app=https://127.0.0.1:9/app.git@v1")
    assert remote.exit_code == 4, remote.output
    [error] = [line for line in remote.stderr.splitlines() if line.startswith("error:")]
    assert "--url" not in error and "KPATCH_URL" not in error
    assert "after 3 tries" in error  # a refused connection may pass on a retry: still retried
    assert error.endswith("(to work offline: --upstream app=PATH@v1 of a local clone)")
    folder = small.tmp / "not-a-repository"
    folder.mkdir()
    local = run_kpatch(root, "init", "--upstream", f"app={folder}@v1")
    assert local.exit_code == 4, local.output
    [error] = [line for line in local.stderr.splitlines() if line.startswith("error:")]
    assert "to work offline" not in error and "tries" not in error  # the path given is the one that failed
    assert not (root / "kpatch.toml").exists()
