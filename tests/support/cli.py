"""The one way tests run the kpatch CLI: in pytest's process (`run_kpatch`, Click's runner: fast, and an exception
propagates with its traceback) or as its own process (`kpatch` waits for it, `start` does not: the way a user runs
it, with its real environment, umask, signals and exit code). Both answers carry `exit_code`, `stdout`, `stderr`
and `output`.

`KPATCH_UNDER_TEST=<source tree>` runs the kpatch of another tree in the processes started here (e.g. an old
commit, to show that a test fails there): only the process under test changes, the fixtures stay this tree's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner, Result

from kpatch.cli import COMMANDS, main

UNDER_TEST = "KPATCH_UNDER_TEST"
KPATCH = (sys.executable, "-m", "kpatch")  # the command line of kpatch as its own process


def run_kpatch(root: Path | None, *args: str, env: Mapping[str, str | None] | None = None,
               stdin: str | None = None) -> Result:
    """kpatch ARGS in this process, from `root` as the working folder (None: the current one); `env` is set
    for the call (None as a value unsets the variable), `stdin` is what it reads."""
    old = Path.cwd()
    if root is not None:
        os.chdir(root)
    try:
        return CliRunner().invoke(main, list(args), env=env, input=stdin, catch_exceptions=False)
    finally:
        os.chdir(old)


@dataclass(frozen=True)
class Ran:
    """One finished kpatch process."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def errors(self) -> list[str]:
        """The `error:` lines on stderr."""
        return [line for line in self.stderr.splitlines() if line.startswith("error:")]


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment (isolated by conftest) plus `extra`, pointing Python at the kpatch under test."""
    import kpatch

    env = {**os.environ, **(extra or {})}
    # The kpatch these tests import, unless told otherwise: not whichever one the interpreter finds first.
    tree = os.environ.get(UNDER_TEST) or str(Path(kpatch.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH")]))
    env.setdefault("COLUMNS", "200")
    return env


def kpatch(cwd: Path, *args: str, env: Mapping[str, str] | None = None, umask: int | None = None,
           timeout: float = 600) -> Ran:
    """Run `python -m kpatch ARGS` in `cwd` and wait for it."""

    def set_umask() -> None:
        if umask is not None:
            os.umask(umask)

    proc = subprocess.run([*KPATCH, *args], cwd=cwd, env=environment(env),
                          capture_output=True, text=True, timeout=timeout, preexec_fn=set_umask)
    return Ran(exit_code=proc.returncode, stdout=proc.stdout, stderr=proc.stderr)


def start(cwd: Path, *args: str, env: Mapping[str, str] | None = None, **popen: Any) -> subprocess.Popen[str]:
    """Start `python -m kpatch ARGS` in `cwd` and return at once (stdout and stderr piped unless `popen` says
    otherwise): for tests that signal or kill it."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([*KPATCH, *args], cwd=cwd, env=environment(env), text=True, **popen)


def all_commands() -> dict[str, click.Command]:
    """Every command by name (each module of kpatch/commands/ imported)."""
    ctx = click.Context(main)
    return {name: command for name in COMMANDS if (command := main.get_command(ctx, name)) is not None}
