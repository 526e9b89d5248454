"""A plain format-patch mail is read in process (gitx/mails.py): what it reads must be exactly what git's own
mailsplit + `mailinfo -b -u` read, and a mail it cannot vouch for goes to git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kpatch.examples.upstreams import commit, init_repo
from kpatch.gitx import Repository, format_patches
from kpatch.gitx.mails import MailReading, _git_readings, plain_reading, read_mails

EXAMPLES = 300 if os.environ.get("HYPOTHESIS_PROFILE") == "ci" else 40
FIRST = "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
DIFF = ("---\n x.txt | 2 +-\n 1 file changed\n\ndiff --git a/x.txt b/x.txt\n--- a/x.txt\n+++ b/x.txt\n"
        "@@ -1 +1 @@\n-a\n+b\n")


def git_reading(text: bytes) -> MailReading:
    return _git_readings([text])[0]


def mail(subject: str, body: str = "", author: str = "Ann Dev <ann@example.invalid>", extra: str = "") -> bytes:
    return (f"{FIRST}From: {author}\nDate: Tue, 14 Nov 2023 22:13:20 +0000\nSubject: {subject}\n{extra}\n{body}"
            f"{DIFF}").encode()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A repository with a base commit and the tree of one change on it."""
    from kpatch.gitx import out, run

    repo = tmp_path_factory.mktemp("mails") / "repo"
    init_repo(repo)
    base = commit(repo, {"x.txt": "one\ntwo\n"}, "base", 0)
    (repo / "x.txt").write_text("one\n2\n")
    run(["add", "x.txt"], repo)
    return repo, base, out(["write-tree"], repo)


def test_a_typical_stack_commit_is_read_in_process_as_git_reads_it(scratch: tuple[Path, str, str]) -> None:
    """A tagged subject long enough to fold, a folded From (a long name), a body with trailers: plain, and read
    exactly as git reads it."""
    repo, base, tree = scratch
    message = ("[Kernel][XPU] Fuse the rms_norm and the residual add into one op, for the decode path of the "
               "attention backends\n\nThe two ops ran back to back.\n\nSigned-off-by: Ann Dev <ann@example.invalid>\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ann Q. Developer-Longname of the Kernels Team",
           "GIT_AUTHOR_EMAIL": "ann.q.developer+kernels@users.noreply.example.invalid"}
    sha = subprocess.run(["git", "commit-tree", tree, "-p", base, "-F", "-"], cwd=repo, input=message, env=env,
                         capture_output=True, text=True, check=True).stdout.strip()
    [text] = format_patches(Repository(repo), base, sha)
    assert b"\n " in text.split(b"\n\n")[0]  # a folded header: the case worth checking
    plain = plain_reading(text)
    assert plain is not None
    assert plain == git_reading(text)
    assert plain.message.rstrip("\n") == message.rstrip("\n")


@pytest.mark.parametrize(("subject", "plain"), [
    ("[PATCH] Fix x", True), ("[PATCH] [XPU] Fix x", True), ("[PATCH] [XPU]  Fix   x", True),
    ("[PATCH] Re: Fix x", True), ("[PATCH] re:Fix x", True), ("[PATCH] [XPU] Re: x", True), ("[PATCH] :x", True),
    ("[PATCH] [PATCH v2] x", True), ("[PATCH] [A] [B] x", False), ("[PATCH] [unclosed x", True),
    ("[PATCH] R", True), ("[PATCH] Re:", True), ("[PATCH] =?UTF-8?q?x?=", False), ("[PATCH] Fix\n  folded", True),
    ("[PATCH] Fix\n\tfolded", True),
])
def test_a_subject_is_read_as_mailinfo_reads_it_or_left_to_git(subject: str, plain: bool) -> None:
    text = mail(subject)
    reading = plain_reading(text)
    assert (reading is not None) == plain
    if reading is not None:
        assert reading == git_reading(text)


@pytest.mark.parametrize(("author", "plain"), [
    ("Ann Dev <ann@example.invalid>", True), ('"Ann Q. Dev" <ann@example.invalid>', True),
    ("Al <al@example.invalid>", False),  # under 3 characters: mailinfo takes the address for the name
    ("Ann  Dev <ann@example.invalid>", False), ("=?UTF-8?q?Zo=C3=AB?= <z@example.invalid>", False),
    ('"Ann (x) Dev" <ann@example.invalid>', False), ("ann@example.invalid", False),
    ("Ann Dev\n <ann@example.invalid>", True),
    # a name that is an address (OpenBSD's commits in Debian's openssh): mailinfo takes it for name and address
    ('"djm@openbsd.org" <djm@openbsd.org>', True), ('"ann@example.invalid" <other@example.invalid>', True),
    ('"a@b@c" <a@example.invalid>', False), ("ann@example.invalid <ann@example.invalid>", False),
])
def test_an_author_is_read_as_mailinfo_reads_it_or_left_to_git(author: str, plain: bool) -> None:
    text = mail("[PATCH] Fix x", author=author)
    reading = plain_reading(text)
    assert (reading is not None) == plain
    if reading is not None:
        assert reading == git_reading(text)


@pytest.mark.parametrize(("body", "plain"), [
    ("", True), ("A body.\n\nSigned-off-by: A <a@b.c>\n", True), ("\n\nAfter blank lines.\n", True),
    ("From: Bob <b@example.invalid>\n\nIn-body author.\n", False), ("Subject: other\n", False),
    ("Date: today\n", False), ("[PATCH] x\n", False), (">From x\n", False), ("From here on\n", False),
    ("cut -- >8 -- here\n", False), ("a\r\nb\n", False), ("  indented first line\n", True),
    ("----\nnot a break\n", True), ("---  \nends it\n", True), ("--- a/name\nends it\n", True),
    ("diff -u x\n", True), ("Index: x\n", True), ("Ünïcode body ✓\n", True),
])
def test_a_body_is_read_as_mailinfo_reads_it_or_left_to_git(body: str, plain: bool) -> None:
    text = mail("[PATCH] Fix x", body=body)
    reading = plain_reading(text)
    assert (reading is not None) == plain
    if reading is not None:
        assert reading == git_reading(text)


def test_mails_that_are_not_plain_are_read_by_git_in_their_places() -> None:
    texts = [mail("[PATCH] one"), mail("[PATCH] two", author="=?UTF-8?q?Zo=C3=AB?= <z@example.invalid>"),
             mail("[PATCH] three", body="From: Bob <b@example.invalid>\n\nx\n"), mail("[PATCH] four"), b""]
    readings = read_mails(Repository(Path()), texts)
    assert [r.message.partition("\n")[0] for r in readings] == ["one", "two", "three", "four", ""]
    assert readings[1].author == "Zoë <z@example.invalid>" and readings[2].author == "Bob <b@example.invalid>"
    assert readings[:4] == [git_reading(text) for text in texts[:4]] and readings[4].mails == 0


# --- generated: whatever is read in process is what git reads ----------------------------------------------------

PIECE = st.sampled_from(["[PATCH]", "[PATCH v2]", "[XPU]", "[", "]", "Re:", "re:", "RE", ":", " ", "  ", "\t", "=?",
                         "Fix", "x", "PATCH", "(", ")", '"', "\\", "<", ">", "@", ".", "é", "R", "e"])
FIELD = st.lists(PIECE | st.text("abcXYZ ._-'", max_size=6), max_size=8).map("".join)
LINE = st.sampled_from(["", " ", "---", "--- a/x", "----", "diff --git a/x b/x", "Index: x", "From here",
                        "From: A <a@b.c>", "Subject: y", "Date: z", ">From x", "[PATCH] y", "-- >8 --",
                        "Signed-off-by: A", "text", "\ttabbed", "Ünïcode"]) | st.text("ab :-[]", max_size=12)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subject=FIELD, name=FIELD, email=st.sampled_from(["a@b.c", "a.b+c@d-e.f", "a@b@c", "ab", ""]),
       quoted=st.booleans(), fold_at=st.integers(0, 40), body=st.lists(LINE, max_size=6))
def test_a_handmade_mail_read_in_process_is_read_as_git_reads_it(subject: str, name: str, email: str, quoted: bool,
                                                                 fold_at: int, body: list[str]) -> None:
    value = f"[PATCH] {subject}"
    if 9 < fold_at < len(value) and value[fold_at] == " ":
        value = value[:fold_at] + "\n" + value[fold_at:]  # folded where format-patch folds: before a space
    author = (f'"{name}"' if quoted else name) + f" <{email}>"
    text = mail(value, body="".join(f"{line}\n" for line in body), author=author)
    reading = plain_reading(text)
    event("in process" if reading is not None else "to git")
    if reading is not None:
        assert reading == git_reading(text)


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(subject=FIELD, name=FIELD, body=st.lists(LINE, max_size=6))
def test_format_patch_of_a_commit_read_in_process_is_read_as_git_reads_it(scratch: tuple[Path, str, str],
                                                                          subject: str, name: str,
                                                                          body: list[str]) -> None:
    repo, base, tree = scratch
    env = {**os.environ, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": "a@example.invalid",
           "GIT_AUTHOR_DATE": "@1700000000 +0000", "GIT_COMMITTER_DATE": "@1700000000 +0000"}
    message = "\n".join([subject, "", *body]) + "\n"
    made = subprocess.run(["git", "commit-tree", tree, "-p", base, "-F", "-"], cwd=repo, input=message, env=env,
                          capture_output=True, text=True)
    if made.returncode != 0 or not subject.strip():  # git refuses some names; an empty subject is another case
        return
    [text] = format_patches(Repository(repo), base, made.stdout.strip())
    reading = plain_reading(text)
    event("in process" if reading is not None else "to git")
    if reading is not None:
        assert reading == git_reading(text)


ADDRESS_PART = st.text("ab.+_-", min_size=1, max_size=8) | st.text("ab.@\"<> ", max_size=4)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(local=ADDRESS_PART, domain=ADDRESS_PART, email=st.sampled_from(["a@b.c", "x.y@z", "q@r"]))
def test_a_quoted_name_that_is_an_address_read_in_process_is_read_as_git_reads_it(local: str, domain: str,
                                                                                 email: str) -> None:
    text = mail("[PATCH] Fix x", author=f'"{local}@{domain}" <{email}>')
    reading = plain_reading(text)
    event("in process" if reading is not None else "to git")
    if reading is not None:
        assert reading == git_reading(text)
