"""The stack writer reads back (as mailsplit + mailinfo read them) only the patch texts whose mail part is new.

A rebase moves most patches' lines: their diff changes, their mail (headers, message, diffstat) does not. git am
reads such a text exactly as it reads the file it replaces, so only texts whose part before the diff changed are
read back through git (stack/writer.py, `_same_mail`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpatch.errors import WorktreeError
from kpatch.examples.upstreams import commit, init_repo
from kpatch.gitx import Repository, format_patches
from kpatch.stack import load_series
from kpatch.stack.writer import render
from tests.support.gitrepos import git
from tests.support.rebase_repos import numbered, replace_line


@pytest.fixture
def mailinfo_runs() -> Iterator[list[str]]:
    """The `git mailinfo` calls kpatch starts while the test runs."""
    seen: list[str] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("kpatch.git")
    level = logger.level
    logger.setLevel(logging.DEBUG)  # not `logger.level = ...`: that keeps logging's cached "debug is off"
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def stack(tmp: Path, message: str, author: tuple[str, str] = ("Ann Dev", "ann@example.invalid")) -> tuple[Path, str]:
    """A repo whose base has 40 lines in a.txt, a series folder holding the patch of one fix, and the base."""
    repo = tmp / "repo"
    init_repo(repo)
    base = commit(repo, {"a.txt": numbered("a", 40)}, "base", 0)
    commit(repo, {"a.txt": replace_line(numbered("a", 40), 30, "a line 30 fixed")}, message, 5, author)
    folder = tmp / "patches"
    folder.mkdir()
    text = format_patches(Repository(repo), base)[0]
    (folder / "0001-fix.patch").write_bytes(text)
    (folder / "series").write_text("0001-fix.patch\n")
    return repo, base


def moved(repo: Path, base: str, message: str, author: tuple[str, str] = ("Ann Dev", "ann@example.invalid")) -> str:
    """The same fix (same message, author and date) on a base with two lines more at the top: its diff moved."""
    git(repo, "checkout", "-q", "--detach", base)
    new_base = commit(repo, {"a.txt": "top 1\ntop 2\n" + numbered("a", 40)}, "upstream grows a", 1)
    commit(repo, {"a.txt": "top 1\ntop 2\n" + replace_line(numbered("a", 40), 30, "a line 30 fixed")}, message, 5,
           author)
    return new_base


def mailinfos(seen: list[str]) -> int:
    return sum(" mailinfo " in line for line in seen)


def test_a_patch_whose_diff_moved_is_not_read_back_again(tmp_path: Path, mailinfo_runs: list[str]) -> None:
    """Same message, author and date, lines shifted by an upstream change: the text differs only after its mail
    part, so it is written without a mailsplit/mailinfo round trip."""
    repo, base = stack(tmp_path, "Fix a\n\nA body line.\n")
    new_base = moved(repo, base, "Fix a\n\nA body line.\n")
    old = (tmp_path / "patches" / "0001-fix.patch").read_bytes()
    rendered = render(Repository(repo), new_base, load_series("up", tmp_path / "patches"), {})
    text = rendered.files[tmp_path / "patches" / "0001-fix.patch"]
    assert text != old and text.split(b"\ndiff --git ")[0] == old.split(b"\ndiff --git ")[0]
    assert mailinfos(mailinfo_runs) == 0


def test_a_patch_whose_message_changed_is_read_back_through_git_when_its_mail_is_not_plain(
        tmp_path: Path, mailinfo_runs: list[str]) -> None:
    """A reworded message changes the mail part: the text is read back, by git itself when the mail is not plain
    (a non-ASCII author name, which format-patch encodes)."""
    zoe = ("Zo\u00eb Dev", "zoe@example.invalid")
    repo, base = stack(tmp_path, "Fix a\n\nA body line.\n", zoe)
    new_base = moved(repo, base, "Fix a\n\nA reworded body line.\n", zoe)
    render(Repository(repo), new_base, load_series("up", tmp_path / "patches"), {})
    assert mailinfos(mailinfo_runs) == 1


def test_a_plain_reworded_message_is_read_back_in_process_and_refused_as_git_would(
        tmp_path: Path, mailinfo_runs: list[str]) -> None:
    """A plain mail is read back in process (gitx/mails.py): no mailinfo, and a line that ends the message for
    git am is still found."""
    repo, base = stack(tmp_path, "Fix a\n\nA body line.\n")
    new_base = moved(repo, base, "Fix a\n\nThe part above.\n---\nThe part below.\n")
    with pytest.raises(WorktreeError, match="ends the message for git am"):
        render(Repository(repo), new_base, load_series("up", tmp_path / "patches"), {})
    assert mailinfos(mailinfo_runs) == 0


def test_a_bad_message_is_refused_even_when_the_old_file_had_it(tmp_path: Path) -> None:
    """A body line starting with 'From ' (a second mail for mailsplit) is never taken on trust from the old file:
    the read-back runs and refuses it."""
    message = "Fix a\n\nFrom review Mon Sep 17 00:00:00 2001\n"
    repo, base = stack(tmp_path, message)
    new_base = moved(repo, base, message)
    with pytest.raises(WorktreeError, match="2 mails"):
        render(Repository(repo), new_base, load_series("up", tmp_path / "patches"), {})
