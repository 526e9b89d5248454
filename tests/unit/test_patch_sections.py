"""The upstream walk's cutting of `git log -p` output (gitx/patches.py): by the regex engine, the same sections
and commit subjects as line by line (bytes.splitlines, a lone CR included)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kpatch.gitx.patches import _COMMIT_LINE, _only_paths, _only_paths_by_line

PIECES = st.sampled_from([
    b"commit " + b"a" * 40 + b" Fix it\n", b"commit " + b"b" * 40 + b"\n", b"commit short\n", b"commit " + b"c" * 40,
    b"diff --git a/x.c b/x.c\n", b"diff --git a/y.c b/y.c\n", b'diff --git "a/\\303\\274" "b/\\303\\274"\n',
    b"index 1..2 100644\n", b"--- a/x.c\n", b"+++ b/x.c\n", b"@@ -1 +1 @@\n", b"-old\n", b"+new\r\n", b"+cr\r",
    b" ctx\n", b"\n", b"diff --git a/x.c b/y.c\n",
])


@given(st.lists(PIECES, max_size=40), st.sets(st.sampled_from(["x.c", "y.c", "ü"])))
def test_sections_kept_are_the_line_by_line_ones(pieces: list[bytes], paths: set[str]) -> None:
    diff = b"".join(pieces)
    assert _only_paths(diff, paths) == _only_paths_by_line(diff, paths)


@given(st.lists(PIECES, max_size=40))
def test_commit_subjects_are_read_as_line_by_line(pieces: list[bytes]) -> None:
    diff = b"".join(pieces)
    by_line = {line[7:47].decode(): line[48:].decode("utf-8", "replace") for line in diff.split(b"\n")
               if line.startswith(b"commit ") and len(line) >= 47}
    found = {m.group(1).decode(): (m.group(2) or b"").decode("utf-8", "replace") for m in _COMMIT_LINE.finditer(diff)}
    assert found == by_line
