"""The one place that starts git, through GitPython's `Git.execute`.

Every call gets the same environment: user and system config ignored (output and commits must not depend on the
machine), `LC_ALL=C` (kpatch reads git's English messages), a fixed committer, no terminal prompts, and, on
Linux, a parent-death signal so that a killed kpatch never leaves a git process writing in its worktrees.
Only fetches read the user's config (credentials, proxies), with the transports pinned by kpatch.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kpatch.errors import GitError, StorageError
from kpatch.gitx.orphans import MARKER as ORPHAN_MARKER
from kpatch.gitx.storage import storage_problem
from kpatch.redact import redact_text

if TYPE_CHECKING:
    from subprocess import Popen

log = logging.getLogger("kpatch.git")

COMMITTER = ("kpatch", "kpatch@localhost")
# Transports a fetch may use, whatever the user's config or GIT_ALLOW_PROTOCOL say (no ext::, no fd::).
ALLOWED_PROTOCOLS = ("https", "ssh", "git", "file")


@dataclass(frozen=True)
class Completed:
    """A finished git command: its exit status and output."""

    status: int
    stdout: bytes
    stderr: str

    @property
    def text(self) -> str:
        """stdout as text without the trailing newline."""
        return self.stdout.decode("utf-8", errors="replace").rstrip("\n")


def base_env(*, user_config: bool = False) -> dict[str, str]:
    """What kpatch sets for every git call (on top of the inherited environment)."""
    env = {"LC_ALL": "C", "LANGUAGE": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_COMMITTER_NAME": COMMITTER[0],
           "GIT_COMMITTER_EMAIL": COMMITTER[1], "GIT_EDITOR": "true", "GIT_MERGE_AUTOEDIT": "no",
           ORPHAN_MARKER: str(os.getpid())}  # inherited by what git starts: tells orphans (gitx/orphans.py)
    if not user_config:
        env |= {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return env


def fetch_env() -> dict[str, str]:
    """A fetch reads the user's config (credentials, proxies) but may only use kpatch's transports."""
    return {**base_env(user_config=True), "GIT_ALLOW_PROTOCOL": ":".join(ALLOWED_PROTOCOLS),
            "GIT_PROTOCOL_FROM_USER": "0"}


def fetch_config() -> list[str]:
    """`-c` options that pin the transports even where the user's config allows more (e.g. ext::)."""
    args = ["-c", "protocol.allow=never"]
    for name in ALLOWED_PROTOCOLS:
        args += ["-c", f"protocol.{name}.allow=always"]
    return args


@cache
def _prctl() -> Callable[[], None] | None:
    """A preexec function that makes the child die with kpatch (Linux), or None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    pr_set_pdeathsig = 1
    parent = os.getpid()

    def die_with_parent() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # kpatch died between fork and prctl: the signal will never come
            os._exit(1)

    return die_with_parent


@cache
def _git_class() -> Any:
    """GitPython's `Git`, imported on first use: `kpatch --help` never pays for it."""
    os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")
    from git.cmd import Git

    return Git


def _command(args: Sequence[str], user_config: bool) -> list[str]:
    return ["git", *(fetch_config() if user_config else []), *args]


def run(args: Sequence[str], cwd: Path | None = None, *, stdin: bytes | None = None,
        env: Mapping[str, str] | None = None, check: bool = True, user_config: bool = False) -> Completed:
    """Run git to completion; raise GitError (or StorageError on a full or read-only disk) when `check`."""
    from git.exc import GitCommandError

    command = _command(args, user_config)
    full_env = {**(fetch_env() if user_config else base_env()), **(env or {})}
    started = time.monotonic()
    git = _git_class()(str(cwd) if cwd else None)
    with tempfile.TemporaryFile() if stdin is not None else _null() as feed:
        if feed is not None and stdin is not None:
            feed.write(stdin)
            feed.seek(0)
        try:
            status, out, err = git.execute(command, istream=feed, with_extended_output=True, with_exceptions=False,
                                           stdout_as_string=False, strip_newline_in_stdout=False, env=full_env,
                                           preexec_fn=_prctl())
        except GitCommandError as failure:  # git could not be started at all
            raise GitError(command, -1, "", str(failure)) from None
    stderr = err.decode("utf-8", "replace") if isinstance(err, bytes) else str(err)
    log.debug("%s (cwd=%s) -> %d in %.3fs%s", redact_text(" ".join(command)), cwd, status,
              time.monotonic() - started, f"\n{redact_text(stderr.strip())}" if stderr.strip() and status else "")
    if check and status != 0:
        raise failure_for(command, status, out, stderr, cwd)
    return Completed(status=status, stdout=out, stderr=stderr)


def out(args: Sequence[str], cwd: Path | None = None, **kwargs: Any) -> str:
    """stdout of a git command as text, trailing newline removed."""
    return run(args, cwd, **kwargs).text


def popen(args: Sequence[str], cwd: Path, *, env: Mapping[str, str] | None = None, user_config: bool = False,
          with_stdout: bool = True) -> Popen[bytes]:
    """Start git with stdout and stderr as pipes (for commands whose output kpatch reads as it comes)."""
    command = _command(args, user_config)
    full_env = {**(fetch_env() if user_config else base_env()), **(env or {})}
    git = _git_class()(str(cwd))
    log.debug("start %s (cwd=%s)", redact_text(" ".join(command)), cwd)
    handle = git.execute(command, as_process=True, env=full_env, with_stdout=with_stdout, preexec_fn=_prctl())
    proc: Popen[bytes] = handle.proc
    handle.proc = None  # kpatch waits for it itself; GitPython must not kill it when the wrapper goes away
    return proc


def failure_for(command: list[str], status: int, stdout: bytes, stderr: str, cwd: Path | None) -> Exception:
    """The kpatch error for a failed git command: a full or read-only disk is named as such, with its path."""
    problem = storage_problem(command[1:], stderr, cwd)
    if problem:
        return StorageError(problem)
    return GitError(command, status, stdout.decode("utf-8", "replace"), stderr)


class _null:
    """A context manager standing in for a temp file when a command gets no input."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
