"""Patch-ids of patch files need no git repository (`git patch-id` reads its input), whether or not a rebase in the
same process asked some ahead (kpatch/gitx/patches.py): the release lines' matrix hashes the project's patch files
from the project folder, which need not be a git checkout (the demo's is not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpatch.gitx.patches import drop_patch_ids_ahead, file_patch_ids, prefetch_patch_ids
from kpatch.gitx.repo import Repository
from tests.support.gitrepos import git

PATCH = """From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A U Thor <author@example.com>
Date: Thu, 1 Jan 2026 00:00:00 +0000
Subject: [PATCH] Change a line

---
 file.txt | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/file.txt b/file.txt
index 1111111..2222222 100644
--- a/file.txt
+++ b/file.txt
@@ -1 +1 @@
-old
+new
"""


@pytest.mark.parametrize("asked_ahead", [False, True])
def test_patch_files_are_hashed_in_a_folder_that_is_no_git_repository(tmp_path: Path, asked_ahead: bool) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    patch = folder / "0001-Change-a-line.patch"
    patch.write_text(PATCH)
    try:
        if asked_ahead:  # another repository's ids asked ahead, as a rebase does, and not taken yet
            repo = tmp_path / "repo"
            git(tmp_path, "init", "-q", str(repo))
            (repo / "file.txt").write_text("old\n")
            git(repo, "add", "file.txt")
            git(repo, "commit", "-q", "-m", "base")
            head = git(repo, "rev-parse", "HEAD")
            prefetch_patch_ids(Repository(repo), head, head, ["file.txt"], [patch])
        ids = file_patch_ids(Repository(folder), [patch])
    finally:
        drop_patch_ids_ahead()
    assert len(ids) == 1 and ids[0] is not None and len(ids[0]) == 40
