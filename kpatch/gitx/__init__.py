"""The one git adapter, on GitPython: mirrors, worktrees, the am engine, patch-ids, format-patch, trial applies.

Nothing else in kpatch starts git. Every call runs with `LC_ALL=C`, user config ignored (fetch aside), a
fixed committer, `--` or `--end-of-options` before user values, and dies with kpatch.
"""

from kpatch.gitx.am import Am, AmRun, Hunk, Method
from kpatch.gitx.mirror import FETCH_TRIES, Mirror, url_problem
from kpatch.gitx.patches import (
    FORMAT_PATCH,
    MailReading,
    Trial,
    commit_patch_ids,
    file_patch_ids,
    format_patches,
    patch_ids,
    patch_ids_of,
    read_mail,
    read_mails,
    trial,
)
from kpatch.gitx.repo import SHA_RE, CommitFacts, CommitInfo, Repository
from kpatch.gitx.runner import COMMITTER, Completed, out, run

__all__ = [
    "COMMITTER", "FETCH_TRIES", "FORMAT_PATCH", "SHA_RE", "Am", "AmRun", "CommitFacts", "CommitInfo", "Completed",
    "Hunk", "MailReading", "Method", "Mirror", "Repository", "Trial", "commit_patch_ids", "file_patch_ids",
    "format_patches", "out", "patch_ids", "patch_ids_of", "read_mail", "read_mails", "run", "trial", "url_problem",
]
