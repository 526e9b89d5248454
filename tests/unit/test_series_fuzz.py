"""Hypothesis fuzz of the series and patch parsers: any text gives a result or SeriesError, never a crash."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kpatch.dashboard.record import _changed
from kpatch.errors import SeriesError
from kpatch.stack import parse_patch_text, parse_series_text
from kpatch.stack.mbox import Head, _message, parse_head

HEAD = "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
PIECES = st.sampled_from([
    HEAD, "From: A <a@b>\n", "Subject: [PATCH] x\n", "Date: Mon, 1 Jan 2026 00:00:00 +0000\n", "\n", "---\n",
    "Upstream-Status: pending\n", "Upstream-Status: bogus\n", "Upstream-PR: o/r#1\n", "Upstream-PR: nope\n",
    "Requires: k/0001-x.patch\n", "Requires: /x\n", "diff --git a/x b/x\n", "--- a/x\n", "+++ b/x\n",
    "+++ b/../x\n", "--- \"a/\\303\\274\"\n", "+++ \"b/bad\n", "rename to .git/config\n", "new file mode 120000\n",
    "@@ -1 +1 @@\n", "-a\n", "+b\n", " Subject: =?UTF-8?q?=C3?=\n", "Subject: =?bogus?q?x?=\n", "\t folded\n",
])


@given(st.text())
def test_series_parser_never_crashes(text: str) -> None:
    try:
        names = parse_series_text(text, "series")
    except SeriesError as err:
        assert str(err).startswith("series:") and "\n" not in str(err)
        return
    assert all(name.endswith(".patch") and "/" not in name for name in names)


@given(st.lists(PIECES, max_size=30), st.text(max_size=40))
def test_patch_parser_never_crashes(pieces: list[str], noise: str) -> None:
    text = "".join(pieces) + noise
    try:
        patch = parse_patch_text(text, Path("p.patch"))
    except SeriesError as err:
        assert str(err).startswith("p.patch") and "\n" not in str(err)
        return
    assert all(not p.startswith("/") and ".." not in p.split("/") for p in patch.paths)


def _outcome(read: Callable[[], object]) -> object:
    try:
        return read()
    except SeriesError as err:
        return str(err)


@given(st.lists(PIECES, max_size=30), st.text(max_size=40))
def test_parse_head_reads_the_mail_part_as_the_whole_patch_parser_does(pieces: list[str], noise: str) -> None:
    """parse_head splits only the mail part into lines (the diff left out when the headers end before it): the
    same subject, date and PRs as parse_patch_text's mail part gives, and the same error."""
    text = HEAD + "".join(pieces) + noise  # an mbox's first line: the cases past it

    def whole() -> object:
        _all, headers, _start, (_status, prs, _requires, _lines) = _message(text, Path("p.patch"))
        return Head(subject=re.sub(r"^\[PATCH[^\]]*\]\s*", "", headers["subject"]), date=headers["date"],
                    prs=tuple(prs))

    assert _outcome(lambda: parse_head(text, Path("p.patch"))) == _outcome(whole)


@given(st.lists(st.sampled_from(["+a", "-b", " c", "--- a/x", "+++ b/x", "-- ", "--", "+", "-", "", "\r", "x\ry",
                                 "\u2028", "\x0c+d", "2.39.2"]), max_size=40),
       st.sampled_from(["\n", "\r\n"]))
def test_the_history_counts_changed_lines_as_splitlines_cuts_them(rows: list[str], end: str) -> None:
    diff = end.join(rows)
    assert _changed(diff) == sum(1 for row in diff.splitlines() if row[:1] in ("+", "-") and row != "-- " and
                                 not row.startswith(("+++ ", "--- ")))
