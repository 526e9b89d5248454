"""`kpatch demo`: the whole pipeline, offline, on example upstreams kpatch builds itself.

apply -> the upstreams move (one patch merged upstream, one conflict with a recorded resolution) -> rebase ->
build-wheels -> verify -> test -> the lock. Each step is the real command's code on real git repositories, the real
Docker engine (or this host with the local backend); the demo stops at the first step that fails and says which.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from kpatch import config
from kpatch.commands.apply import apply
from kpatch.commands.build_wheels import BuildResult, build_wheels
from kpatch.commands.rebase import rebase
from kpatch.commands.test import test
from kpatch.commands.verify import VerifyResult, verify
from kpatch.engine.apply import ApplyResult
from kpatch.engine.rebase import RebaseResult
from kpatch.errors import ExitCode, KpatchError
from kpatch.examples import ExampleProject, make_example_project
from kpatch.examples_moves import UpstreamMove, move_upstreams, ship_resolution
from kpatch.testing.run import TestRun
from kpatch.ui import UI
from kpatch.verify.model import Status
from kpatch.workspace import Workspace

# Images the demo may build on, in this order, when they are already on the engine: it never pulls (a oneAPI
# image is many GB). kpatch-test-base:bookworm is the small Debian image scripts/docker-test-image builds.
DEMO_BASE_IMAGES = ("kpatch-test-base:bookworm", "intel/deep-learning-essentials:2026.0.0-devel-ubuntu24.04")


class Backend(Enum):
    DOCKER = "docker"
    LOCAL = "local"


@dataclass(frozen=True)
class BackendChoice:
    backend: Backend
    base_image: str | None  # the image the wheels are built on (docker only)
    why: str


@dataclass(frozen=True)
class Step:
    name: str
    seconds: float
    ok: bool
    summary: str  # one line: what happened
    exit_code: int = 0  # of the error that stopped the demo at this step


@dataclass(frozen=True)
class DemoResult:
    folder: Path
    kept: bool  # the folder stays (--keep or --dir); otherwise it is removed when the demo ends
    backend: BackendChoice
    steps: tuple[Step, ...]
    applied: ApplyResult | None
    moves: tuple[UpstreamMove, ...]
    rebase: RebaseResult | None
    build: BuildResult | None
    verify: VerifyResult | None
    test: TestRun | None
    lock: Path | None
    wheels: tuple[Path, ...]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(step.ok for step in self.steps)

    @property
    def exit_code(self) -> int:
        return next((step.exit_code or int(ExitCode.CONFLICT) for step in self.steps if not step.ok), 0)


OnStep = Callable[[Step, Any], None]  # the step, and its result for printing


def choose_backend(requested: str, base_image: str | None) -> BackendChoice:
    """docker when an engine answers and has a base image (the demo never pulls), else this host; say why."""
    from kpatch.wheels.container import probe_engine

    if requested == Backend.LOCAL.value:
        return BackendChoice(Backend.LOCAL, None, "--backend local: the wheels are built and tested on this host")
    candidates = (base_image,) if base_image else DEMO_BASE_IMAGES
    engine = probe_engine(candidates)
    if engine.problem is None and engine.present:
        return BackendChoice(Backend.DOCKER, engine.present[0],
                             f"the Docker engine at {engine.where} answers (version {engine.version}) and has "
                             f"{engine.present[0]} to build on")
    missing = (engine.problem or f"the Docker engine at {engine.where} has none of {', '.join(candidates)} and the "
               "demo never pulls one (give --base-image REF: any local image with python3, pip, setuptools, wheel)")
    if requested == Backend.DOCKER.value:
        from kpatch.errors import BuildError

        raise BuildError(f"--backend docker: {missing}")
    return BackendChoice(Backend.LOCAL, None, f"local backend, because {missing}")


def run_demo(folder: Path, ui: UI, choice: BackendChoice, *, kept: bool, on_step: OnStep) -> DemoResult:
    """Build the example in `folder` (empty) and run the pipeline on it; `on_step` sees each step as it ends."""
    started = time.monotonic()
    steps: list[Step] = []
    results: dict[str, Any] = {}

    def step(name: str, body: Callable[[], tuple[Any, bool, str]]) -> bool:
        begun = time.monotonic()
        try:
            result, ok, summary = body()
            code = 0 if ok else int(ExitCode.CONFLICT)
        except KpatchError as err:
            result, ok, summary, code = None, False, str(err).splitlines()[0], int(err.exit_code)
        done = Step(name=name, seconds=round(time.monotonic() - begun, 2), ok=ok, summary=summary, exit_code=code)
        steps.append(done)
        results[name] = result
        on_step(done, result)
        return ok

    example: list[ExampleProject] = []
    workspace: list[Workspace] = []

    def build_example() -> tuple[Any, bool, str]:
        made = make_example_project(folder)
        ship_resolution(made)
        example.append(made)
        workspace.append(Workspace.create(config.load(made.root / config.CONFIG_NAME), folder / "cache", None))
        return made, True, (f"two upstreams with history ({made.kernels.name}, {made.app.name}), a project with a "
                            "stack of 2 patches for each, and one recorded conflict resolution")

    with _offline():
        pipeline: list[tuple[str, Callable[[], tuple[Any, bool, str]]]] = [
            ("example", build_example),
            ("apply", lambda: _apply(workspace[0], ui)),
            ("upstream moves", lambda: _moves(example[0])),
            ("rebase", lambda: _rebase(workspace[0], ui)),
            ("build-wheels", lambda: _build(workspace[0], ui, choice)),
            ("verify", lambda: _verify(workspace[0], ui)),
            ("test", lambda: _test(workspace[0], ui, choice)),
        ]
        for name, body in pipeline:
            if not step(name, body):
                break
    build: BuildResult | None = results.get("build-wheels")
    return DemoResult(folder=folder, kept=kept, backend=choice, steps=tuple(steps), applied=results.get("apply"),
                      moves=results.get("upstream moves") or (), rebase=results.get("rebase"), build=build,
                      verify=results.get("verify"), test=results.get("test"), lock=build.lock if build else None,
                      wheels=tuple(build.lock.parent / w.filename for w in build.wheels) if build else (),
                      seconds=round(time.monotonic() - started, 2))


def _apply(ws: Workspace, ui: UI) -> tuple[ApplyResult, bool, str]:
    result = apply(ws, ui, {}, discard=False)
    applied = sum(s.applied for s in result.stacks)
    return result, result.conflict is None, f"{applied} patches applied, kernels first, in {ws.workdir}"


def _moves(example: ExampleProject) -> tuple[tuple[UpstreamMove, ...], bool, str]:
    moves = move_upstreams(example)
    return moves, True, "new upstream commits: " + ", ".join(f"{m.upstream} +1" for m in moves)


def _rebase(ws: Workspace, ui: UI) -> tuple[RebaseResult, bool, str]:
    result = rebase(ws, ui, {}, force=False, discard=False)
    classes: dict[str, int] = {}
    for patch in (p for s in result.stacks for p in s.patches):
        classes[patch.klass] = classes.get(patch.klass, 0) + 1
    recorded = sum("recorded resolution" in p.why for s in result.stacks for p in s.patches)
    named = {"upstream": "dropped as merged upstream"}
    summary = ", ".join(f"{n} {named.get(k, k)}" for k, n in classes.items()) + \
        f"; {recorded} conflict resolved by a recorded resolution"
    return result, result.conflict is None and result.committed, summary


def _build(ws: Workspace, ui: UI, choice: BackendChoice) -> tuple[BuildResult, bool, str]:
    with ws.writer("build-wheels") as notes:
        ui.notes(notes)
        result = build_wheels(ws, ui, backend=choice.backend.value, image=None, base_image=choice.base_image,
                              out=ws.stack.root / "dist")
    where = f"in {result.image}" if choice.backend is Backend.DOCKER else "on this host"
    return result, True, f"{len(result.wheels)} wheels built {where}; lock {result.lock.name}"


def _verify(ws: Workspace, ui: UI) -> tuple[VerifyResult, bool, str]:
    result = verify(ws, ui, lock_path=None, installed=False)
    failed = [c for c in result.checks if c.status is Status.FAIL]
    return result, result.ok, f"{len(result.checks)} checks, {len(failed)} failed (the pair, its lock, the op contract)"


def _test(ws: Workspace, ui: UI, choice: BackendChoice) -> tuple[TestRun, bool, str]:
    result = test(ws, ui, names=(), devices=(), timeout=None, lock=None, reports=None, backend=choice.backend.value)
    parts = []
    for suite in result.suites:
        counts = suite.counts
        parts.append(f"{suite.upstream} {suite.outcome.value}" + (f" ({counts.passed} passed)" if counts else ""))
    return result, result.exit_code is ExitCode.OK, "; ".join(parts)


@contextmanager
def _offline() -> Iterator[None]:
    """The demo asks no one on the network about Upstream-PR states (GitHub): KPATCH_OFFLINE for its run."""
    before = os.environ.get("KPATCH_OFFLINE")
    os.environ["KPATCH_OFFLINE"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("KPATCH_OFFLINE", None)
        else:
            os.environ["KPATCH_OFFLINE"] = before
