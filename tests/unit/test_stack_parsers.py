"""The series, mbox and diff parsers on text: what they accept, what they refuse, and the paths they find."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpatch.errors import SeriesError
from kpatch.stack import UpstreamStatus, added_file, added_text, parse_dropped, parse_patch_text, parse_series_text
from kpatch.stack.diff import post_images
from kpatch.stack.mbox import read_diff
from kpatch.stack.series import header_comments, render_series

HEAD = """From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A U Thor <a@example.invalid>
Date: Mon, 1 Jan 2026 00:00:00 +0000
Subject: [PATCH] {subject}

{body}---
 x | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

"""
P = Path("p.patch")


def patch(diff: str, *, subject: str = "Fix x", body: str = "Upstream-Status: pending\n") -> str:
    return HEAD.format(subject=subject, body=body) + diff + "-- \n2.43.0\n"


# --- series ---------------------------------------------------------------------------------------------------


def test_series_lists_patches_in_order_with_their_line_numbers() -> None:
    text = "# applied in this order\n\n0001-a.patch\n  0002-b.patch  # a note\n# dropped 0003-c.patch: upstream\n"
    assert parse_series_text(text, "series") == {"0001-a.patch": 3, "0002-b.patch": 4}
    assert parse_dropped(text) == {"0003-c.patch": "upstream"}
    assert header_comments(text) == "# applied in this order\n"


@pytest.mark.parametrize(("text", "says"), [
    ("0001-a.patch\n0001-a.patch\n", "series:2: 0001-a.patch is listed twice (first on line 1)"),
    ("../0001-a.patch\n", "series:1: '../0001-a.patch' is not a patch file name"),
    ("0001-a.diff\n", "series:1: '0001-a.diff' is not a patch file name"),
    ("-p1 0001-a.patch\n", "series:1: '-p1 0001-a.patch' is not a patch file name"),
])
def test_series_refuses_what_is_not_a_plain_patch_name(text: str, says: str) -> None:
    with pytest.raises(SeriesError, match=f"^{says.replace('(', r'[(]').replace(')', r'[)]')}"):
        parse_series_text(text, "series")


def test_series_renders_header_dropped_notes_then_patches() -> None:
    rendered = render_series("# top\n", {"0001-a.patch": "upstream (same\npatch-id)"}, ["0002-b.patch"])
    assert rendered == b"# top\n# dropped 0001-a.patch: upstream (same patch-id)\n0002-b.patch\n"
    assert parse_dropped(rendered.decode()) == {"0001-a.patch": "upstream (same patch-id)"}


# --- mbox headers and trailers ---------------------------------------------------------------------------------

DIFF = "diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"


def test_mbox_gives_subject_author_trailers_and_paths() -> None:
    body = "Why.\n\nUpstream-Status: submitted\nUpstream-PR: vllm-project/vllm#1\nRequires: kernels/0001-x.patch\n"
    parsed = parse_patch_text(patch(DIFF, subject="[XPU] Fix x", body=body), P)
    assert (parsed.subject, parsed.author, parsed.status) == ("[XPU] Fix x", "A U Thor <a@example.invalid>",
                                                              UpstreamStatus.SUBMITTED)
    assert parsed.prs == ("vllm-project/vllm#1",) and [str(r) for r in parsed.requires] == ["kernels/0001-x.patch"]
    assert parsed.paths == ("x",) and parsed.new_files == () and parsed.new_symlinks == ()


def test_an_encoded_subject_is_decoded() -> None:
    text = patch(DIFF).replace("Subject: [PATCH] Fix x", "Subject: [PATCH] =?UTF-8?q?F=C3=BCx?= x")
    assert parse_patch_text(text, P).subject == "Füx x"


@pytest.mark.parametrize(("edit", "says"), [
    (lambda t: t.replace("From 0000", "From 0001", 1).replace("2001", "2002", 1), "p.patch:1: not a git format-patch"),
    (lambda t: t.replace("Date: Mon, 1 Jan 2026 00:00:00 +0000\n", ""), "p.patch: missing Date: header"),
    (lambda t: t.replace("Subject:", "Subject", 1), "p.patch:4: malformed mail header"),
    (lambda t: t.replace("Upstream-Status: pending", "Upstream-Status: later"), "p.patch:6: Upstream-Status must"),
    (lambda t: t.replace("Upstream-Status: pending", "Upstream-PR: ../..#1"), "p.patch:6: Upstream-PR must look"),
    (lambda t: t.replace("Upstream-Status: pending", "Requires: kernels"), "p.patch:6: Requires must look like"),
    (lambda t: t.split("diff --git")[0], "p.patch: no 'diff --git' section"),
])
def test_mbox_errors_name_the_file_and_line(edit: object, says: str) -> None:
    with pytest.raises(SeriesError) as caught:
        parse_patch_text(edit(patch(DIFF)), P)  # type: ignore[operator]
    assert str(caught.value).startswith(says) and "\n" not in str(caught.value)


def test_trailers_after_the_three_dashes_are_not_trailers() -> None:
    text = patch(DIFF, body="Upstream-Status: pending\n").replace(" x | 2 +-\n", " x | 2 +-\nUpstream-PR: nope\n")
    assert parse_patch_text(text, P).prs == ()


# --- the diff walker --------------------------------------------------------------------------------------------


def test_deleted_sql_comments_and_added_plus_lines_are_content_not_headers() -> None:
    diff = ("diff --git a/schema.sql b/schema.sql\nindex 1..2 100644\n--- a/schema.sql\n+++ b/schema.sql\n"
            "@@ -1,5 +1,4 @@\n--- an SQL comment\n CREATE TABLE t (x int);\n---- x\n-+++ y\n+++ z\n+-- new\n"
            " SELECT 1;\n")
    assert parse_patch_text(patch(diff), P).paths == ("schema.sql",)


def test_a_hunk_with_too_few_lines_or_cut_short_is_refused() -> None:
    short = DIFF.replace("@@ -1 +1 @@", "@@ -1,2 +1,2 @@")
    with pytest.raises(SeriesError, match=r"p\.patch:\d+: hunk is shorter than its header says"):
        parse_patch_text(patch(short), P)
    with pytest.raises(SeriesError, match="the patch ends inside a hunk"):
        parse_patch_text(HEAD.format(subject="x", body="") + DIFF.replace("@@ -1 +1 @@", "@@ -1,3 +1,3 @@"), P)


def test_new_files_symlinks_renames_and_modes_are_all_paths() -> None:
    diff = ("diff --git a/new.txt b/new.txt\nnew file mode 100644\nindex 0..1\n--- /dev/null\n+++ b/new.txt\n"
            "@@ -0,0 +1 @@\n+n\n"
            "diff --git a/link b/link\nnew file mode 120000\nindex 0..1\n--- /dev/null\n+++ b/link\n"
            "@@ -0,0 +1 @@\n+target\n\\ No newline at end of file\n"
            "diff --git a/old name.c b/new name.c\nsimilarity index 100%\nrename from old name.c\n"
            "rename to new name.c\n"
            "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"
            'diff --git "a/\\303\\274.txt" "b/\\303\\274.txt"\nindex 1..2 100644\n--- "a/\\303\\274.txt"\n'
            '+++ "b/\\303\\274.txt"\n@@ -1 +1 @@\n-a\n+b\n')
    parsed = parse_patch_text(patch(diff), P)
    assert parsed.paths == ("link", "new name.c", "new.txt", "old name.c", "run.sh", "ü.txt")
    assert parsed.new_files == ("link", "new.txt") and parsed.new_symlinks == ("link",)


@pytest.mark.parametrize("path", ["../evil", ".git/config", "a/.GIT/hooks/x", "/etc/passwd"])
def test_a_path_outside_the_worktree_is_refused(path: str) -> None:
    diff = f"diff --git a/{path} b/{path}\nindex 1..2 100644\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(SeriesError, match="patch writes outside the worktree"):
        parse_patch_text(patch(diff), P)


def test_a_folded_subject_is_unfolded_by_the_mail_header_reader() -> None:
    text = patch(DIFF).replace("Subject: [PATCH] Fix x", "Subject: [PATCH] Fix x\n  in two\n\tlines")
    assert parse_patch_text(text, P).subject == "Fix x in two lines"


def test_a_continuation_line_before_any_header_is_a_malformed_header() -> None:
    text = patch(DIFF).replace("From: A U Thor", " From: A U Thor", 1)
    with pytest.raises(SeriesError, match=r"^p\.patch:2: malformed mail header"):
        parse_patch_text(text, P)


def test_the_diff_reader_gives_each_new_files_hunks_and_their_post_images(tmp_path: Path) -> None:
    diff = ("diff --git a/schema.sql b/schema.sql\nindex 1..2 100644\n--- a/schema.sql\n+++ b/schema.sql\n"
            "@@ -1,3 +1,3 @@\n--- an SQL comment\n+-- new\n keep\n\n"
            "diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n"
            "@@ -1 +0,0 @@\n-bye\n"
            "diff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n"
            "@@ -0,0 +1,2 @@\n+one\n+two\n")
    file = tmp_path / "0001-x.patch"
    file.write_text(patch(diff))
    # an empty context line (its space lost in transit) is context, as git apply counts it
    assert post_images(read_diff(file)) == {"schema.sql": [["-- new", "keep", ""]], "new.txt": [["one", "two"]]}
    assert added_file(file, "new.txt") == "one\ntwo\n" and added_text(file, "schema.sql") == "-- new\n"
    with pytest.raises(SeriesError, match="is not a new file in this patch"):
        added_file(file, "schema.sql")
    with pytest.raises(SeriesError, match=r"does not touch other\.txt"):
        added_text(file, "other.txt")
