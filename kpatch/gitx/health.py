"""What `kpatch doctor` asks git: which git this is and whether it has what kpatch uses; a mirror's fsck."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kpatch import scratch
from kpatch.errors import GitError
from kpatch.gitx.runner import run


@dataclass(frozen=True)
class GitCapabilities:
    """The git on PATH, and each feature kpatch needs from it (asked of git itself, not guessed from the version)."""

    version: str | None  # "2.39.5"; None: no git could be started
    keep_cr: bool  # git am --keep-cr: CRLF files (real vLLM has them) keep their CRs
    worktree: bool  # git worktree: one checkout per stack from one mirror
    patch_id_verbatim: bool  # git patch-id --verbatim (git 2.39): status tells CR-stripped patches apart
    problem: str | None = None  # why git could not be asked


def capabilities() -> GitCapabilities:
    """Ask git, in a scratch repository, for each feature kpatch uses."""
    try:
        version = re.sub(r"^git version\s+", "", run(["--version"]).text.strip())
        with scratch.folder("doctor") as folder:
            run(["init", "--quiet", str(folder)])
            am_help = run(["am", "-h"], folder, check=False)  # usage goes to stdout, exit 129
            worktree = run(["worktree", "list"], folder, check=False).status == 0
            verbatim = run(["patch-id", "--verbatim"], folder, stdin=b"", check=False).status == 0
        keep_cr = "--keep-cr" in am_help.text + am_help.stderr
        return GitCapabilities(version=version, keep_cr=keep_cr, worktree=worktree, patch_id_verbatim=verbatim)
    except GitError as err:
        return GitCapabilities(version=None, keep_cr=False, worktree=False, patch_id_verbatim=False,
                               problem=str(err))


def fsck(repository: Path) -> str | None:
    """`git fsck` of a mirror: None when it is sound, else git's first complaint."""
    done = run(["fsck", "--no-progress", "--no-dangling"], repository, check=False)
    if done.status == 0:
        return None
    lines = [line for line in (done.stderr + done.text).splitlines() if line.strip()]
    return lines[0] if lines else f"git fsck exited {done.status}"
