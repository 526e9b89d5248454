"""apply(export(x)) == x, or a clear refusal (issue 8 items 8-10, issue 9 item 2): commit messages git am
reads differently, CRLF files on both am paths, diffs whose content looks like headers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from kpatch.errors import ExitCode, WorktreeError
from kpatch.examples.upstreams import commit
from tests.support.cli import kpatch
from tests.support.gitrepos import Project, git

KIMI = "0001-Add-the-kimi-op.patch"
INI = b"; which kernels are built\r\n[kernels]\r\nkimi = on\r\nrms_norm = on\r\n"


def identity(tree: Path, rev: str = "HEAD") -> tuple[str, str, str]:
    """What a commit is to a person: its message exactly, its author and date, its tree."""
    return (git(tree, "log", "-1", "--format=%B", rev), git(tree, "log", "-1", "--format=%an <%ae> %ad", "--date=raw",
                                                             rev), git(tree, "rev-parse", f"{rev}^{{tree}}"))


# --- 8. commit messages ------------------------------------------------------------------------------------------

MESSAGES = {
    "a From line as mbox writes it": "Fix x\n\nFrom 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001\n"
                                     "and more\n",
    "a diff --git line": "Fix x\n\ndiff --git a/x b/x\nexplained\n\nUpstream-Status: pending\n",
    "a --- line": "Fix x\n\nThe part above.\n---\nThe part below.\n\nUpstream-Status: pending\n",
    "an Index: line": "Fix x\n\nIndex: csrc/ops.h\n\nUpstream-Status: pending\n",
    "a leading Re:": "Re: Fix x\n\nUpstream-Status: pending\n",
    "a leading [PATCH]": "[PATCH] Fix x\n\nUpstream-Status: pending\n",
    "a From line that is prose": "Fix x\n\nFrom here on the op is fused.\n\nUpstream-Status: pending\n",
    "a signature-like line": "Fix x\n\n-- \nnot a signature\n\nUpstream-Status: pending\n",
    "non-ASCII and a tag": "[XPU] Fïx ✓ the op\n\nÜnïcode body.\n\nUpstream-Status: pending\n",
}
MUST_REFUSE = {"a From line as mbox writes it", "a diff --git line", "a --- line", "an Index: line"}


@pytest.mark.parametrize("case", sorted(MESSAGES))
def test_export_round_trips_a_message_exactly_or_refuses_clearly(project: Project, case: str) -> None:
    assert kpatch(project.root, "apply").exit_code == 0
    tree = project.workdir / "kernels"
    sha = commit(tree, {"csrc/extra.cpp": "// extra\n"}, MESSAGES[case], 9000)
    before = project.snapshot()
    check, ran = kpatch(project.root, "export", "--check"), kpatch(project.root, "export")
    if ran.exit_code != 0:  # refused: clearly, by --check too, and nothing changed
        assert ran.exit_code == check.exit_code == ExitCode.WORKTREE, ran.output
        [error] = ran.errors()
        assert check.errors() == [error]
        assert f"commit {sha[:12]} " in error and ("reword" in error or "git am would" in error)
        assert project.snapshot() == before
        return
    assert case not in MUST_REFUSE, f"{case}: exported, but git am reads it back differently"
    assert check.exit_code == ExitCode.CONFLICT  # one new patch file: stale, not refused
    fresh = project.root / "fresh"
    assert kpatch(project.root, "apply", "--workdir", str(fresh)).exit_code == 0
    assert identity(fresh / "kernels") == identity(tree, sha)
    assert kpatch(project.root, "export", "--check").exit_code == 0


def test_export_refuses_an_empty_commit_and_writes_nothing(project: Project) -> None:
    assert kpatch(project.root, "apply").exit_code == 0
    tree = project.workdir / "kernels"
    git(tree, "commit", "--quiet", "--allow-empty", "-m", "Nothing at all")
    sha = git(tree, "rev-parse", "HEAD")
    before = project.snapshot()
    ran = kpatch(project.root, "export")
    assert ran.exit_code == ExitCode.WORKTREE, ran.output
    assert ran.errors() == [f'error: commit {sha[:12]} "Nothing at all" changes nothing (an empty commit): drop it '
                            "from the stack"]
    assert project.snapshot() == before


# --- 8. the same, generated: apply(export(x)) == x or a clear refusal -------------------------------------------

ROUND_TRIPS = 300 if os.environ.get("HYPOTHESIS_PROFILE") == "ci" else 15
TRICKY = st.sampled_from([
    "From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001", "From here on", ">From x",
    "diff --git a/x b/x", "---", "--- a/x", "+++ b/x", "Index: x", "Re: x", "RE: x", "[PATCH] x", "[PATCH 1/2] x",
    "[XPU] x", "-- ", "Subject: x", "From: A <a@b.c>", "Date: today", "Upstream-Status: pending",
    "Signed-off-by: A <a@b.c>", "", " ", "\t", "#comment", "@@ -1 +1 @@", "+x", "-x", "Ünïcode ✓", "=?UTF-8?q?x?=",
    "a\tb", "  indented", "x\x0by", "Fix: y",
])
LINE = TRICKY | st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00\r\n"), max_size=30)
REASONS = ("reads as one line", "takes for a mail header", "reads its subject as", "ends the message", "mails out of",
           "read its author as", "it differs from line")
NAME = st.text(st.characters(exclude_categories=("Cs", "Cc"), exclude_characters="<>"), min_size=1, max_size=20)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str, str]:
    """A repository with a base commit and the tree of one change on it, and a worktree to apply into.

    Built with kpatch's own git runner (no user config): module fixtures come before conftest's isolation.
    """
    from kpatch.examples.upstreams import init_repo
    from kpatch.gitx import out, run

    repo = tmp_path_factory.mktemp("roundtrip") / "repo"
    init_repo(repo)
    base = commit(repo, {"x.txt": "one\ntwo\nthree\n"}, "base", 0)
    (repo / "x.txt").write_text("one\n2\nthree\n")
    run(["add", "x.txt"], repo)
    changed = out(["write-tree"], repo)
    into = repo.parent / "into"
    run(["worktree", "add", "--quiet", "--detach", "--", str(into), base], repo)
    return repo, into, base, changed


@settings(max_examples=ROUND_TRIPS, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(subject=LINE, blank=st.integers(0, 3), body=st.lists(LINE, max_size=8), name=NAME)
def test_apply_of_export_gives_the_same_commit_or_a_clear_refusal(scratch: tuple[Path, Path, str, str], subject: str,
                                                                   blank: int, body: list[str], name: str) -> None:
    import subprocess

    from kpatch.gitx import Am, Repository, format_patches
    from kpatch.stack.writer import check_round_trips

    repo, into, base, changed = scratch
    # What `git commit` would keep of the message (its default cleanup for a message not edited).
    lines = [subject, *([""] if blank else []), *body]  # mostly a subject line, a blank line, a body
    message = subprocess.run(["git", "stripspace"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                             check=True).stdout
    assume(message.strip())
    env = {**os.environ, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": "a@example.invalid",
           "GIT_AUTHOR_DATE": "@1700000000 +0000", "GIT_COMMITTER_DATE": "@1700000000 +0000"}
    made = subprocess.run(["git", "commit-tree", changed, "-p", base, "-F", "-"], cwd=repo, input=message,
                          capture_output=True, text=True, env=env)
    assume(made.returncode == 0)  # git refuses some names (nothing but punctuation)
    sha = made.stdout.strip()
    [data] = format_patches(Repository(repo), base, sha)
    try:
        check_round_trips(Repository(repo), [(sha, data)])
    except WorktreeError as refusal:
        assert "\n" not in str(refusal) and str(refusal).startswith(f"commit {sha[:12]} ")
        event("refused: " + next((kind for kind in REASONS if kind in str(refusal)), "another reason"))
        return
    event("exported")
    patch = repo.parent / "one.patch"
    patch.write_bytes(data)
    git(into, "reset", "-q", "--hard", base)
    run = Am(Repository(into)).start([patch], lambda done: None)
    if run.stopped:
        git(into, "am", "--abort")
    assert not run.stopped, f"export accepted a patch git am cannot apply:\n{run.output}"
    assert identity(into) == identity(repo, sha)


@pytest.mark.parametrize(("name", "open_"), [
    ("00((\u00a0\u00a0\u00a0", True),  # hypothesis found it: git am gave a different tail each run
    ("Zo\u00eb (ACME", True), ("Zo\u00eb \"Z", True), ("\u00e9 (x) (y", True), ("\u00e9 (a\\)", True),
    ("Zo\u00eb (ACME)", False), ("\u00e9 ((y))", False), ("\u00e9 )(x)", False), ("Zoe (ACME", False),
])
def test_an_author_name_git_am_reads_past_its_end_is_refused(scratch: tuple[Path, Path, str, str], name: str,
                                                             open_: bool) -> None:
    """git mailinfo unquotes the comments and quoted strings of a name it decoded from RFC 2047 (a non-ASCII
    name); one left open makes it read past the name's end, into whatever memory follows. Such an author is
    refused; a balanced or an ASCII one (format-patch quotes it) goes through git am as it is."""
    import subprocess

    from kpatch.gitx import Am, Repository, format_patches
    from kpatch.stack.writer import check_round_trips

    repo, into, base, changed = scratch
    env = {**os.environ, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": "a@example.invalid",
           "GIT_AUTHOR_DATE": "@1700000000 +0000", "GIT_COMMITTER_DATE": "@1700000000 +0000"}
    sha = subprocess.run(["git", "commit-tree", changed, "-p", base, "-m", "Fix x"], cwd=repo, capture_output=True,
                         text=True, env=env, check=True).stdout.strip()
    [data] = format_patches(Repository(repo), base, sha)
    if open_:
        with pytest.raises(WorktreeError, match="past its end"):
            check_round_trips(Repository(repo), [(sha, data)])
        return
    check_round_trips(Repository(repo), [(sha, data)])
    patch = repo.parent / "named.patch"
    patch.write_bytes(data)
    for _ in range(3):  # what git am makes of it, every time
        git(into, "reset", "-q", "--hard", base)
        assert not Am(Repository(into)).start([patch], lambda done: None).stopped
        assert identity(into) == identity(repo, sha)


# --- 9. CRLF files, on the apply and the rebase path -------------------------------------------------------------


def test_a_crlf_file_keeps_its_crs_through_apply_and_export(project: Project) -> None:
    patch = project.root / "patches" / "kernels" / KIMI
    assert b"+kimi = on\r\n" in patch.read_bytes()
    before = project.snapshot()
    assert kpatch(project.root, "apply").exit_code == 0
    assert (project.workdir / "kernels" / "csrc" / "kernels.ini").read_bytes() == INI
    check = kpatch(project.root, "export", "--check")
    assert check.exit_code == 0, check.output
    assert kpatch(project.root, "export").exit_code == 0
    after = project.snapshot()
    assert {k: v for k, v in after.items() if k.startswith("patches/")} == \
        {k: v for k, v in before.items() if k.startswith("patches/")}


def test_a_commit_whose_crs_were_stripped_is_not_applied_in_status(project: Project) -> None:
    assert kpatch(project.root, "apply").exit_code == 0
    tree = project.workdir / "kernels"
    kimi, test = git(tree, "rev-parse", "HEAD~1"), git(tree, "rev-parse", "HEAD")
    git(tree, "checkout", "-q", "HEAD~2")
    git(tree, "cherry-pick", "-n", kimi)
    ini = tree / "csrc" / "kernels.ini"
    ini.write_bytes(ini.read_bytes().replace(b"kimi = on\r\n", b"kimi = on\n"))  # what am without --keep-cr does
    git(tree, "commit", "-q", "-a", "-C", kimi)
    git(tree, "cherry-pick", test)
    ran = kpatch(project.root, "status", "--json")
    kernels = json.loads(ran.stdout)["result"]["upstreams"][0]
    assert [p["state"] for p in kernels["patches"]] == ["modified", "applied"]
    assert kpatch(project.root, "export", "--check").exit_code == ExitCode.CONFLICT


def test_rebase_keeps_the_crs_of_a_crlf_file(project: Project) -> None:
    patch = project.root / "patches" / "kernels" / KIMI
    ran = kpatch(project.root, "rebase", "--json")
    assert ran.exit_code == 0, ran.output
    kernels = json.loads(ran.stdout)["result"]["stacks"][0]
    assert kernels["old_base"] == project.kernels_base and kernels["new_base"] == git(project.kernels, "rev-parse",
                                                                                       "main")
    assert [p["class"] for p in kernels["patches"]] == ["clean", "clean"]
    assert b"+kimi = on\r\n" in patch.read_bytes()
    assert (project.workdir / "kernels" / "csrc" / "kernels.ini").read_bytes() == INI
    assert kpatch(project.root, "export", "--check").exit_code == 0
    assert kpatch(project.root, "apply").exit_code == 0
    states = [p["state"] for u in json.loads(kpatch(project.root, "status", "--json").stdout)["result"]["upstreams"]
              for p in u["patches"]]
    assert states == ["applied"] * 4


# --- 10. diff content that looks like a header --------------------------------------------------------------------

SQL = "-- an SQL comment\nCREATE TABLE t (x int);\n-- x\n--- y\n++ z\nSELECT 1;\n"


def test_a_patch_deleting_sql_comments_applies_and_round_trips(project: Project) -> None:
    new_base = commit(project.kernels, {"sql/schema.sql": SQL}, "Add the schema", 500)
    toml = project.root / "kpatch.toml"
    toml.write_text(toml.read_text().replace(project.kernels_base, new_base))
    assert kpatch(project.root, "apply").exit_code == 0
    tree = project.workdir / "kernels"
    edited = SQL.replace("-- an SQL comment\n", "").replace("-- x\n--- y\n", "-- new comment\n").replace("++ z\n", "")
    commit(tree, {"sql/schema.sql": edited + "++ w\n"}, "Trim the schema comments\n\nUpstream-Status: pending\n",
           9100)
    assert kpatch(project.root, "export").exit_code == 0
    text = (project.root / "patches" / "kernels" / "0003-Trim-the-schema-comments.patch").read_text()
    for line in ("--- an SQL comment", "--- x", "---- y", "-++ z", "+-- new comment", "+++ w"):
        assert f"\n{line}\n" in text  # deleted and added lines that look like file headers
    fresh = project.root / "fresh"
    ran = kpatch(project.root, "apply", "--workdir", str(fresh))
    assert ran.exit_code == 0, ran.output
    assert (fresh / "kernels" / "sql" / "schema.sql").read_text() == edited + "++ w\n"
    assert kpatch(project.root, "export", "--check").exit_code == 0


# --- what kpatch itself would refuse to read back: export refuses it, names the commit, writes nothing ----------

UNREADABLE = {  # case -> (stack, files, message, what the refusal says)
    "an Upstream-Status kpatch rejects": ("kernels", {"csrc/extra.cpp": "// extra\n"},
                                          "Fix x\n\nUpstream-Status: bogus\n", "Upstream-Status must be"),
    "a malformed Upstream-PR": ("kernels", {"csrc/extra.cpp": "// extra\n"},
                                "Fix x\n\nUpstream-PR: see the forum\n", "Upstream-PR must look like"),
    "a malformed Requires": ("app", {"app/extra.py": "x = 1\n"}, "Fix x\n\nRequires: the kernels fix\n",
                             "Requires must look like"),
    "a Requires of a patch no stack has": ("app", {"app/extra.py": "x = 1\n"},
                                           "Fix x\n\nRequires: kernels/0099-Gone.patch\n", "not in kernels's series"),
    "a file name that is not UTF-8": ("kernels", {}, "Add a latin-1 name\n", "is not UTF-8"),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_export_refuses_a_patch_kpatch_would_not_read_back_and_writes_nothing(project: Project, case: str) -> None:
    """A stack kpatch cannot read stops status, export and apply (exit 2) until fixed by hand: never write one."""
    stack, files, message, says = UNREADABLE[case]
    assert kpatch(project.root, "apply").exit_code == 0
    tree = project.workdir / stack
    if not files:
        with open(os.fsencode(tree) + b"/caf\xe9", "w") as handle:  # noqa: PTH123 - a name that is not UTF-8
            handle.write("latin-1 name\n")
    sha = commit(tree, files, message, 9000)
    before = project.snapshot()
    check, ran = kpatch(project.root, "export", "--check"), kpatch(project.root, "export")
    assert ran.exit_code == check.exit_code == ExitCode.WORKTREE, ran.output
    [error] = ran.errors()
    assert check.errors() == [error]
    assert f"commit {sha[:12]} " in error and says in error and "nothing was written" in error, error
    assert project.snapshot() == before
    status = kpatch(project.root, "status")
    assert status.exit_code not in (ExitCode.BAD_INPUT, ExitCode.INTERNAL), status.output
