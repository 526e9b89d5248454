"""`kpatch demo`: the whole pipeline, offline, on example upstreams kpatch builds itself.

apply -> the upstreams move (one patch merged upstream, one conflict with a recorded resolution) -> rebase ->
build-wheels -> verify -> test -> the lock -> release -> a release line (a branch cut from an older commit, a fix
on main backported onto it). Each step is the real command's code on real git repositories, the real
Docker engine (or this host with the local backend); the demo stops at the first step that fails and says which.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from kpatch import config, forge
from kpatch.container.docker import probe_engine
from kpatch.dashboard.night import StageStatus
from kpatch.demo.lines import ReleaseLine, release_line
from kpatch.engine.apply import ApplyResult, apply
from kpatch.engine.rebase import rebase
from kpatch.engine.reports import RebaseResult
from kpatch.errors import BuildError, ExitCode, KpatchError, UsageError
from kpatch.examples.moves import UpstreamMove, move_upstreams, ship_resolution
from kpatch.examples.upstreams import ExampleProject, make_example_project
from kpatch.output.ui import UI
from kpatch.project.state import PatchClass
from kpatch.project.workspace import Workspace
from kpatch.testing.run import TestRun
from kpatch.testing.suites import run_suites
from kpatch.verify.gate import gate
from kpatch.verify.model import tally
from kpatch.verify.releasing import publish_verified
from kpatch.verify.run import VerifyResult
from kpatch.verify.run import verify as run_verify
from kpatch.wheels.build import BuildResult, build_wheels
from kpatch.wheels.release import Published

# Images the demo may build on, in this order, when they are already on the engine: it never pulls (a oneAPI
# image is many GB). kpatch-test-base:bookworm is the small Debian image scripts/docker-test-image builds.
DEMO_BASE_IMAGES = ("kpatch-test-base:bookworm", "intel/deep-learning-essentials:2026.0.0-devel-ubuntu24.04")


class Backend(Enum):
    DOCKER = "docker"
    LOCAL = "local"


log = logging.getLogger("kpatch")
R = TypeVar("R")


@dataclass(frozen=True)
class BackendChoice:
    backend: Backend
    base_image: str | None  # the image the wheels are built on (docker only)
    why: str


@dataclass(frozen=True)
class Step:
    name: str
    seconds: float
    status: StageStatus  # passed or failed (a verdict is `status` in every command's JSON)
    summary: str  # one line: what happened
    exit_code: int = 0  # of the error that stopped the demo at this step
    detail: tuple[str, ...] = ()  # the lines that error gave after its first (a failed build's last lines)

    @property
    def ok(self) -> bool:
        return self.status is StageStatus.PASSED


class StepsOutcome:
    """A demo made of steps: ok when every step is, else the exit code of the first that failed (`failed` when
    it carries none)."""

    steps: tuple[Step, ...]
    failed: ClassVar[int] = 1

    @property
    def ok(self) -> bool:
        return all(step.ok for step in self.steps)

    @property
    def exit_code(self) -> int:
        return next((step.exit_code or self.failed for step in self.steps if not step.ok), 0)


@dataclass(frozen=True)
class DemoResult(StepsOutcome):
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
    release: Published | None  # the set released into the project's site/ (the last step)
    lock: Path | None
    wheels: tuple[Path, ...]
    seconds: float
    line: ReleaseLine | None = None  # the release line step's (the last)

    failed: ClassVar[int] = int(ExitCode.CONFLICT)  # a step that failed without an error of its own


OnStep = Callable[[Step, Any], None]  # the step, and its result for printing


def choose_backend(requested: str, base_image: str | None) -> BackendChoice:
    """docker when an engine answers and has a base image (the demo never pulls), else this host; say why."""
    if requested == Backend.LOCAL.value and base_image:
        raise UsageError("--base-image goes with the docker backend, not --backend local")
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
        raise BuildError(f"--backend docker: {missing}")
    return BackendChoice(Backend.LOCAL, None, f"local backend, because {missing}")


def demo(folder: Path | None, ui: UI, choice: BackendChoice, *, keep: bool, on_step: OnStep) -> DemoResult:
    """Run the demo in `folder` (empty or new; kept) or in a temp folder that is removed unless `keep`."""
    return in_folder(folder, ui, keep=keep,
                     body=lambda where, kept: run_demo(where, ui, choice, kept=kept, on_step=on_step))


def in_folder(folder: Path | None, ui: UI, *, keep: bool, body: Callable[[Path, bool], R]) -> R:
    """`body(folder, kept)` in `folder` (empty or new; kept) or in a temp folder that is removed unless `keep`."""
    if folder is not None:
        folder = folder.resolve()
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise UsageError(f"demo folder {folder} is not empty: give a new or empty --dir")
        folder.mkdir(parents=True, exist_ok=True)
        kept = True
    else:
        folder, kept = Path(tempfile.mkdtemp(prefix="kpatch-demo-")).resolve(), keep
    ui.note(f"building example upstreams and stacks in {folder}")
    try:
        return body(folder, kept)
    finally:
        if not kept:
            shutil.rmtree(folder, ignore_errors=True)


def run_demo(folder: Path, ui: UI, choice: BackendChoice, *, kept: bool, on_step: OnStep) -> DemoResult:
    """Build the example in `folder` (empty) and run the pipeline on it; `on_step` sees each step as it ends."""
    started = time.monotonic()
    run = _Run(folder, ui, choice, on_step)
    with forge.offline("the demo runs offline"):
        for name, body in (("example", run.example), ("apply", run.apply), ("upstream moves", run.moves),
                           ("rebase", run.rebase), ("build-wheels", run.build), ("verify", run.verify),
                           ("test", run.test), ("release", run.release), ("release line", run.release_line)):
            if not run.step(name, body):
                break
    build: BuildResult | None = run.results.get("build-wheels")
    return DemoResult(folder=folder, kept=kept, backend=choice, steps=tuple(run.steps),
                      applied=run.results.get("apply"), moves=run.results.get("upstream moves") or (),
                      rebase=run.results.get("rebase"), build=build, verify=run.results.get("verify"),
                      test=run.results.get("test"), release=run.results.get("release"),
                      lock=build.lock if build else None,
                      wheels=tuple(build.lock.parent / w.filename for w in build.wheels) if build else (),
                      seconds=round(time.monotonic() - started, 2), line=run.results.get("release line"))


Outcome = tuple[Any, bool, str]  # a step's result, whether it passed, and its one-line summary


class Steps:
    """A demo's steps in order: each one's result, and its Step (name, time, verdict, one-line summary)."""

    def __init__(self, folder: Path, ui: UI, on_step: OnStep) -> None:
        self.folder, self.ui, self.on_step = folder, ui, on_step
        self.steps: list[Step] = []
        self.results: dict[str, Any] = {}

    def step(self, name: str, body: Callable[[], Outcome]) -> bool:
        """Run one step; a kpatch error ends it (and the demo) with that error's exit code."""
        begun = time.monotonic()
        detail: tuple[str, ...] = ()
        try:
            result, ok, summary = body()
            code = 0 if ok else int(ExitCode.CONFLICT)
        except KpatchError as err:
            first, *rest = str(err).splitlines() or ["(no message)"]
            log.error("demo step %s failed (exit %d): %s", name, int(err.exit_code), err)
            result, ok, summary, code, detail = None, False, first, int(err.exit_code), tuple(rest)
        done = Step(name=name, seconds=round(time.monotonic() - begun, 2),
                    status=StageStatus.PASSED if ok else StageStatus.FAILED, summary=summary, exit_code=code,
                    detail=detail)
        self.steps.append(done)
        self.results[name] = result
        self.on_step(done, result)
        return ok


class _Run(Steps):
    """One demo run: the example it built, the workspace on it, and each step's result."""

    def __init__(self, folder: Path, ui: UI, choice: BackendChoice, on_step: OnStep) -> None:
        super().__init__(folder, ui, on_step)
        self.choice = choice
        self.project: ExampleProject | None = None

    @property
    def ws(self) -> Workspace:
        assert self.project is not None, "the example step runs first"
        return Workspace.create(config.load(self.project.root / config.CONFIG_NAME), self.folder / "cache", None)

    def example(self) -> Outcome:
        self.project = make_example_project(self.folder)
        ship_resolution(self.project)
        return self.project, True, (f"two upstreams with history ({self.project.kernels.name}, "
                                    f"{self.project.app.name}), a project with a stack of 2 patches for each, and "
                                    "one recorded conflict resolution")

    def apply(self) -> Outcome:
        return _apply(self.ws, self.ui)

    def moves(self) -> Outcome:
        assert self.project is not None
        return _moves(self.project)

    def rebase(self) -> Outcome:
        return _rebase(self.ws, self.ui)

    def build(self) -> Outcome:
        return _build(self.ws, self.ui, self.choice)

    def verify(self) -> Outcome:
        return _verify(self.ws, self.ui)

    def test(self) -> Outcome:
        return _test(self.ws, self.ui, self.choice)

    def release(self) -> Outcome:
        return _release(self.ws, self.ui)

    def release_line(self) -> Outcome:
        assert self.project is not None
        return release_line(self.project, self.ui, self.folder / "cache")


def _apply(ws: Workspace, ui: UI) -> tuple[ApplyResult, bool, str]:
    result = apply(ws, ui, {}, discard=False)
    applied = sum(s.applied for s in result.stacks)
    return result, result.conflict is None, f"{applied} patches applied, kernels first, in {ws.workdir}"


def _moves(example: ExampleProject) -> tuple[tuple[UpstreamMove, ...], bool, str]:
    moves = move_upstreams(example)
    return moves, True, "new upstream commits: " + ", ".join(f"{m.upstream} +1" for m in moves)


def _rebase(ws: Workspace, ui: UI) -> tuple[RebaseResult, bool, str]:
    # imported where used: the carry history loads for the demo's rebase step only
    from kpatch.dashboard.record import record_rebase

    result = rebase(ws, ui, {}, force=False, discard=False)
    record_rebase(ui, ws, result)  # as `kpatch rebase` does: the project's carry history starts here
    classes: dict[PatchClass, int] = {}
    for patch in (p for s in result.stacks for p in s.patches):
        classes[patch.klass] = classes.get(patch.klass, 0) + 1
    recorded = sum("recorded resolution" in p.why for s in result.stacks for p in s.patches)
    named = {PatchClass.UPSTREAM: "dropped as merged upstream"}
    summary = ", ".join(f"{n} {named.get(k, k)}" for k, n in classes.items()) + \
        f"; {recorded} conflict resolved by a recorded resolution"
    return result, result.conflict is None and result.committed, summary


def _build(ws: Workspace, ui: UI, choice: BackendChoice) -> tuple[BuildResult, bool, str]:
    result = build_wheels(ws, ui, backend=choice.backend.value, image=None, base_image=choice.base_image,
                          out=ws.stack.root / "dist", gate=gate)
    where = f"in {result.image}" if choice.backend is Backend.DOCKER else "on this host"
    return result, True, f"{len(result.wheels)} wheels built {where}; lock {result.lock.name}"


def _verify(ws: Workspace, ui: UI) -> tuple[VerifyResult, bool, str]:
    result = run_verify(ws, ui, lock_path=None, installed=False)
    return result, result.ok, f"{tally(result.checks)} (the pair, its lock, the op contract)"


def _test(ws: Workspace, ui: UI, choice: BackendChoice) -> tuple[TestRun, bool, str]:
    result = run_suites(ws, ui, backend=choice.backend.value)
    parts = []
    for suite in result.suites:
        counts = suite.counts
        parts.append(f"{suite.upstream} {suite.outcome.value}" + (f" ({counts.passed} passed)" if counts else ""))
    return result, result.exit_code is ExitCode.OK, "; ".join(parts)


def _release(ws: Workspace, ui: UI) -> tuple[Published, bool, str]:
    site = ws.stack.root / "site"
    result = publish_verified(ws, ui, str(site), "stable", None, None, None)
    return result, True, f"{result.tag} into {site} ({result.index_url}); {result.pip_command}"
