"""The one git adapter (git started with subprocess; GitPython reads commit objects): mirrors, worktrees, am, picks.

Nothing else in kpatch starts git. Every call runs with `LC_ALL=C`, user config ignored (fetch aside), a
fixed committer, `--` or `--end-of-options` before user values, and dies with kpatch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kpatch.gitx.am import Am, AmRun, Hunk, Method
    from kpatch.gitx.mails import MailReading, read_mail, read_mails
    from kpatch.gitx.mirror import FETCH_TRIES, Mirror
    from kpatch.gitx.patches import (
        FORMAT_PATCH,
        Trial,
        TrialIndex,
        commit_patch_ids,
        file_patch_ids,
        format_patches,
        patch_ids,
        patch_ids_of,
        restore_preimages,
        trial,
    )
    from kpatch.gitx.repo import SHA_RE, CommitFacts, CommitInfo, Repository
    from kpatch.gitx.runner import COMMITTER, Completed, out, run
    from kpatch.gitx.urls import url_problem

# Each name is loaded with its submodule on first use: `kpatch status` never pays for the am engine or the picks.
_LAZY = {
    "am": ("Am", "AmRun", "Hunk", "Method"),
    "mirror": ("FETCH_TRIES", "Mirror"),
    "mails": ("MailReading", "read_mail", "read_mails"),
    "patches": ("FORMAT_PATCH", "Trial", "TrialIndex", "commit_patch_ids", "file_patch_ids", "format_patches",
                "patch_ids", "patch_ids_of", "restore_preimages", "trial"),
    "repo": ("SHA_RE", "CommitFacts", "CommitInfo", "Repository"),
    "runner": ("COMMITTER", "Completed", "out", "run"),
    "urls": ("url_problem",),
}
_WHERE = {name: module for module, names in _LAZY.items() for name in names}

__all__ = [
    "COMMITTER", "FETCH_TRIES", "FORMAT_PATCH", "SHA_RE", "Am", "AmRun", "CommitFacts", "CommitInfo", "Completed",
    "Hunk", "MailReading", "Method", "Mirror", "Repository", "Trial", "TrialIndex", "commit_patch_ids",
    "file_patch_ids", "format_patches", "out", "patch_ids", "patch_ids_of", "read_mail", "read_mails",
    "restore_preimages", "run", "trial", "url_problem",
]


def __getattr__(name: str) -> object:
    """Load the submodule that defines `name` on first use."""
    if name not in _WHERE:
        raise AttributeError(f"module 'kpatch.gitx' has no attribute {name!r}")
    return getattr(importlib.import_module(f"kpatch.gitx.{_WHERE[name]}"), name)
