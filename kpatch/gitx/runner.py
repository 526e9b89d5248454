"""The one place that starts git.

git is started with `subprocess` directly, not through GitPython's `Git.execute`: importing GitPython costs more
(about 55 ms) than kpatch's whole budget for a command's fixed cost, and `Git.execute` adds nothing kpatch uses.
GitPython stays for the object model (`Repository.repo`), imported only where that is read.

Every call gets the same environment: user and system config ignored (output and commits must not depend on the
machine), `LC_ALL=C` (kpatch reads git's English messages), a fixed committer, no terminal prompts, and, on
Linux, a parent-death signal so that a killed kpatch never leaves a git process writing in its worktrees.
Only fetches read the user's config (credentials, proxies), with the transports pinned by kpatch.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from subprocess import Popen
from typing import Any

from kpatch.errors import GitError, StorageError
from kpatch.gitx.storage import storage_problem
from kpatch.output.redact import redact_text

log = logging.getLogger("kpatch.git")

COMMITTER = ("kpatch", "kpatch@localhost")
# Transports a fetch may use, whatever the user's config or GIT_ALLOW_PROTOCOL say (no ext::, no fd::).
ALLOWED_PROTOCOLS = ("https", "ssh", "git", "file")
# Commands that write nothing in a worktree or a repository (or only in kpatch's own temp folders): they need no
# parent-death signal, and without the preexec hook that sets it Python can start them with vfork, half the cost.
_READERS = frozenset({"cat-file", "diff", "for-each-ref", "format-patch", "log", "ls-tree", "mailinfo", "mailsplit",
                      "merge-base", "patch-id", "rev-list", "rev-parse", "status", "describe", "show", "--version"})


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


ORPHAN_MARKER = "KPATCH_PARENT"  # in the environment of every git kpatch starts: how gitx/orphans.py finds them


def base_env(*, user_config: bool = False) -> dict[str, str]:
    """What kpatch sets for every git call (on top of the inherited environment)."""
    env = {"LC_ALL": "C", "LANGUAGE": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_COMMITTER_NAME": COMMITTER[0],
           "GIT_COMMITTER_EMAIL": COMMITTER[1], "GIT_EDITOR": "true", "GIT_MERGE_AUTOEDIT": "no",
           ORPHAN_MARKER: str(os.getpid())}
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
    import ctypes  # only here: most of kpatch's start-up never needs it

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


def git_python() -> Any:
    """The `git` package (GitPython), imported on first use with its own start-up check quiet.

    GitPython starts its `git cat-file` processes with this process's environment (its own variables can add,
    not remove): the repository-local ones (see _LOCAL_ENV) leave it, or a kpatch run from a git hook would read
    the person's repository instead of kpatch's.
    """
    for key in [k for k in os.environ if _local(k)]:
        del os.environ[key]
    os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")
    import git

    return git


def _command(args: Sequence[str], user_config: bool) -> list[str]:
    return ["git", *(fetch_config() if user_config else []), *args]


def run(args: Sequence[str], cwd: Path | None = None, *, stdin: bytes | None = None,
        env: Mapping[str, str] | None = None, check: bool = True, user_config: bool = False) -> Completed:
    """Run git to completion; raise GitError (or StorageError on a full or read-only disk) when `check`."""
    command = _command(args, user_config)
    started = time.monotonic()
    try:
        feed: dict[str, Any] = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
        proc = subprocess.run(command, cwd=cwd, capture_output=True, env=_env(env, user_config),
                              preexec_fn=_guard(command), check=False, **feed)
    except OSError as failure:  # git could not be started at all
        raise GitError(command, -1, "", str(failure)) from None
    stderr = proc.stderr.decode("utf-8", "replace")
    log.debug("%s (cwd=%s) -> %d in %.3fs%s", redact_text(" ".join(command)), cwd, proc.returncode,
              time.monotonic() - started, f"\n{redact_text(stderr.strip())}" if stderr.strip() and proc.returncode
              else "")
    if check and proc.returncode != 0:
        raise failure_for(command, proc.returncode, proc.stdout, stderr, cwd)
    return Completed(status=proc.returncode, stdout=proc.stdout, stderr=stderr)


def out(args: Sequence[str], cwd: Path | None = None, **kwargs: Any) -> str:
    """stdout of a git command as text, trailing newline removed."""
    return run(args, cwd, **kwargs).text


def popen(args: Sequence[str], cwd: Path, *, env: Mapping[str, str] | None = None, user_config: bool = False,
          with_stdout: bool = True, with_stdin: bool = False) -> Popen[bytes]:
    """Start git with stdout and stderr as pipes (for commands whose output kpatch reads as it comes); with
    `with_stdin`, stdin too (for a command kpatch talks to: a line in, an answer out)."""
    command = _command(args, user_config)
    log.debug("start %s (cwd=%s)", redact_text(" ".join(command)), cwd)
    try:
        return Popen(command, cwd=cwd, stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
                     stdout=subprocess.PIPE if with_stdout else subprocess.DEVNULL, stderr=subprocess.PIPE,
                     env=_env(env, user_config), preexec_fn=_guard(command))
    except OSError as failure:
        raise GitError(command, -1, "", str(failure)) from None


def _guard(command: Sequence[str]) -> Callable[[], None] | None:
    """The parent-death hook for a command that may write; none for a reader (see _READERS)."""
    words = iter(command[1:])
    subcommand = next((word for word in words if word != "-c" or next(words, None) is None), "")
    options = command[:command.index("--")] if "--" in command else command
    checks_only = subcommand == "apply" and "--check" in options  # `git apply --check` writes nothing
    return None if subcommand in _READERS or checks_only else _prctl()


# git's repository-local variables (`git rev-parse --local-env-vars`): inherited from a hook or an alias, they would
# point every git kpatch starts at the person's repository instead of kpatch's mirrors and worktrees.
_LOCAL_ENV = frozenset({"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
                        "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
                        "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX",
                        "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE", "GIT_COMMON_DIR"})


def _local(key: str) -> bool:
    return key in _LOCAL_ENV or key.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))


def _env(extra: Mapping[str, str] | None, user_config: bool) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not _local(k)}
    return {**inherited, **(fetch_env() if user_config else base_env()), **(extra or {})}


def failure_for(command: list[str], status: int, stdout: bytes, stderr: str, cwd: Path | None) -> Exception:
    """The kpatch error for a failed git command: a full or read-only disk is named as such, with its path."""
    problem = storage_problem(command[1:], stderr, cwd)
    if problem:
        return StorageError(problem)
    return GitError(command, status, stdout.decode("utf-8", "replace"), stderr)
