"""Every error kpatch raises on purpose: each class owns its exit code and a one-line message."""

from __future__ import annotations

import errno
from enum import IntEnum

# OSErrors that mean a full or read-only disk (or no permission to write): exit 5 with the path, never a crash.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EACCES, errno.EPERM})


class ExitCode(IntEnum):
    """Documented process exit codes (README: "Exit codes")."""

    OK = 0
    CONFLICT = 1  # needs a person: a patch did not apply, or a --check found stale files
    BAD_INPUT = 2  # usage, kpatch.toml, series or patch file errors
    WORKTREE = 3  # a worktree is dirty, busy with another operation, or has nothing in progress
    UPSTREAM = 4  # an upstream could not be fetched or a ref could not be found
    GIT = 5  # git itself failed in a way kpatch did not expect
    BUILD = 6  # a build step, the docker engine or an image failed
    NO_DEVICE = 7  # kpatch test: a suite needs an XPU and none is present (not "passed", not "failed")
    INTERNAL = 70  # a bug in kpatch: a crash log is written
    INTERRUPTED = 130  # Ctrl-C
    CLOSED_PIPE = 141  # the reader of the output went away (`| head -1`): 128 + SIGPIPE, as git's and coreutils'


class KpatchError(Exception):
    """Base class: `str(err)` is the one-line message shown to the user."""

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(KpatchError):
    """A command-line argument is wrong."""

    exit_code = ExitCode.BAD_INPUT


class ConfigError(KpatchError):
    """kpatch.toml is wrong: the message names the file and line."""

    exit_code = ExitCode.BAD_INPUT


class SeriesError(KpatchError):
    """A series file or patch file is wrong: the message names the file and line."""

    exit_code = ExitCode.BAD_INPUT


class WorktreeError(KpatchError):
    """A worktree is not in a state the command can work on (dirty, mid-am, nothing in progress)."""

    exit_code = ExitCode.WORKTREE


class UpstreamError(KpatchError):
    """An upstream URL could not be fetched, or a ref does not exist there."""

    exit_code = ExitCode.UPSTREAM


class GitError(KpatchError):
    """git failed unexpectedly; carries the command, its exit status and its output."""

    exit_code = ExitCode.GIT

    def __init__(self, command: list[str], status: int, stdout: str, stderr: str) -> None:
        # imported where used: only when an error is made: every module imports errors
        from kpatch.output.redact import redact_text

        words = [w for i, w in enumerate(command[1:], 1) if w != "-c" and command[i - 1] != "-c"]
        last = (stderr.strip() or stdout.strip() or "no output").splitlines()[-1]
        super().__init__(redact_text(f"git {' '.join(words[:3])} failed (exit {status}): {last}"))
        self.command = command
        self.status = status
        self.stdout = stdout
        self.stderr = stderr


class StorageError(KpatchError):
    """A disk is full or read-only: the message names the path kpatch could not write."""

    exit_code = ExitCode.GIT


class BuildError(KpatchError):
    """A wheel build, the docker engine or the image failed."""

    exit_code = ExitCode.BUILD


class LockError(KpatchError):
    """A pylock.toml cannot be read, is not a valid PEP 751 lock, or has a [tool.kpatch] table kpatch cannot read."""

    exit_code = ExitCode.BAD_INPUT


class VerifyFailed(KpatchError):
    """`verify` (or build-wheels' last step) found the set broken: a person must fix the stacks or rebuild."""

    exit_code = ExitCode.CONFLICT


class PatchConflict(KpatchError):
    """A patch being imported does not apply onto the base: a person must fix it (nothing was written)."""

    exit_code = ExitCode.CONFLICT
