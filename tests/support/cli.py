"""kpatch as its own process, the way a user runs it: its real environment, umask, signals and exit code.

`KPATCH_UNDER_TEST=<source tree>` runs the kpatch of another tree instead (e.g. an old commit, to show
that a test fails there): only the process under test changes, the fixtures stay this tree's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

UNDER_TEST = "KPATCH_UNDER_TEST"


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

    proc = subprocess.run([sys.executable, "-m", "kpatch", *args], cwd=cwd, env=environment(env),
                          capture_output=True, text=True, timeout=timeout, preexec_fn=set_umask)
    return Ran(exit_code=proc.returncode, stdout=proc.stdout, stderr=proc.stderr)
