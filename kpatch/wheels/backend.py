"""What every build backend (a Docker container, this host) is given, gives back, and must provide."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from packaging.version import InvalidVersion, Version

from kpatch.container.image import TAIL, Toolchain
from kpatch.errors import BuildError
from kpatch.wheels.compiler_cache import CacheStats, stats_from

INFO_NAME = "kpatch-build-info.json"  # written by build-wheel.sh next to the wheel: what the build saw
@dataclass(frozen=True)
class BuildJob:
    """One wheel build: the source archive (under `src/`), the wheels it is built against, the script to run."""

    name: str
    env: Mapping[str, str]
    source_tar: bytes
    deps: tuple[Path, ...]
    script: bytes
    timeout: float  # seconds: then the build is killed ([upstream.build] timeout, or build-wheels --timeout)


@dataclass(frozen=True)
class BuildOutput:
    """What one build left in its out folder: exactly one wheel, and what it saw (torch)."""

    filename: str
    data: bytes
    torch: str | None  # the torch version (with local label) importable after the build; None: no torch
    compiler_cache: CacheStats | None = None  # what the compiler cache did (None: the build ran without one)


class Backend(Protocol):
    """A place to run build-wheel.sh: fresh for every build, nothing of it left afterwards."""

    @property
    def toolchain(self) -> Toolchain: ...

    def build(self, job: BuildJob, on_line: Callable[[str], None]) -> BuildOutput: ...

    def started_since(self, since: float) -> int:
        """How many isolated build environments (containers) this backend started since `since`."""
        ...


class Output:
    """A build's output as it comes (text, in pieces): each line to `on_line`; the last lines kept for its error.

    A hung step often printed what it runs and no newline yet: that unfinished line counts as its last."""

    def __init__(self, on_line: Callable[[str], None]) -> None:
        self.on_line = on_line
        self.lines: list[str] = []
        self.partial = ""

    def __call__(self, text: str) -> None:
        *complete, self.partial = (self.partial + text).split("\n")
        for line in complete:
            line = line.rstrip("\r")
            self.lines = [*self.lines[-(TAIL - 1):], line]
            self.on_line(line)

    def tail(self) -> list[str]:
        partial = self.partial.rstrip("\r")
        return [*self.lines[-(TAIL - 1):], partial] if partial.strip() else self.lines

    def failed(self, name: str, status: int) -> BuildError:
        return BuildError(f"{name}: build step failed (exit {status}); last lines:\n" + "\n".join(self.tail()))

    def timed_out(self, name: str, timeout: float) -> BuildError:
        """The one error line of a build killed at its timeout, naming its last line of output; the tail after it."""
        tail = self.tail()
        last = next((line.strip() for line in reversed(tail) if line.strip()), "(no output)")
        return BuildError(f"upstream {name}: build timed out after {timeout:g} s while running: {last}\n"
                          + "\n".join(tail))


def collect(name: str, files: Mapping[str, bytes]) -> BuildOutput:
    """The build's out folder -> its one wheel and its build info; anything else is a clear BuildError."""
    wheels = {n: d for n, d in files.items() if n.endswith(".whl")}
    if len(wheels) != 1:
        raise BuildError(f"{name}: the build wrote {len(wheels)} wheels, expected one: {sorted(wheels)}")
    (filename, data), = wheels.items()
    raw = files.get(INFO_NAME)
    if raw is None:
        raise BuildError(f"{name}: the build script wrote no {INFO_NAME} (a build script override must write it)")
    try:
        info = json.loads(raw)
        torch = info["torch"]
        if torch is not None:
            torch = str(Version(torch))  # normalized, as the lock and the pins write it
    except (ValueError, KeyError, TypeError, InvalidVersion) as err:
        raise BuildError(f"{name}: bad {INFO_NAME} from the build ({err})") from None
    return BuildOutput(filename=filename, data=data, torch=torch, compiler_cache=stats_from(info.get("compiler_cache")))
