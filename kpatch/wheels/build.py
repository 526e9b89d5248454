"""Build the set: the kernels wheel first, then vLLM built against exactly it, and the set's lock (pylock.toml)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kpatch import __version__
from kpatch.engine.plan import load_all_series
from kpatch.errors import ConfigError, WorktreeError
from kpatch.gitx import Repository
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace, writes
from kpatch.wheels import lock, pipeline
from kpatch.wheels.publish import publish
from kpatch.wheels.record import BuiltWheel


@dataclass(frozen=True)
class BuildResult:
    wheels: tuple[BuiltWheel, ...]
    lock: Path
    image: str
    image_digest: str
    containers: int  # build containers the engine created during this run
    torch: str | None  # kpatch.toml's [set] torch


@writes("build-wheels")
def build_wheels(ws: Workspace, ui: UI, *, backend: str, image: str | None, base_image: str | None,
                 out: Path, gate: Callable[[Workspace], object] | None = None,
                 timeout: float | None = None) -> BuildResult:
    """Build the set and write its lock. `gate` (verify's op-contract check) runs first: a pair that breaks it is
    never built and no lock is written (the nightly runs verify as a stage of its own instead). A build running
    longer than `timeout` seconds (default: its [upstream.build] timeout) is killed: nothing is cached or
    written."""
    started = time.time()
    inputs = _check_inputs(ws)
    if gate is not None:
        gate(ws)
    runner = pipeline.make_backend(backend, ui, ws.stack.root, ws.cache_dir, image=image, base_image=base_image)
    members = pipeline.build_set(inputs, runner, ui, ws.cache_dir / "wheels", ws.stack.root, ws.stack.torch,
                                 timeout)
    tool = runner.toolchain
    content = lock.Lock(
        wheels=tuple(m.wheel for m in members),
        upstreams=tuple(_locked(m) for m in members), image=tool.reference, image_digest=tool.digest,
        base_image=tool.base, base_image_digest=tool.base_digest, kpatch_version=__version__,
        set_torch=ws.stack.torch)
    path = publish(out, [m.path for m in members], content)
    wheels = tuple(BuiltWheel.of(m.wheel, cached=m.cached, compiler_cache=m.compiler_cache) for m in members)
    return BuildResult(wheels=wheels, lock=path, image=tool.reference, image_digest=tool.digest,
                       containers=runner.started_since(started), torch=ws.stack.torch)


def _locked(member: pipeline.SetMember) -> lock.LockedUpstream:
    item, build = member.input, member.input.upstream.build
    assert build is not None
    return lock.LockedUpstream(name=item.upstream.name, url=item.upstream.display_url, base=item.base,
                               commit=item.commit, stack_hash=item.stack_hash, build_key=member.key,
                               command=build.command, env=dict(build.env), torch=member.wheel.torch)


def _check_inputs(ws: Workspace) -> list[pipeline.BuildInput]:
    """Every upstream applied, clean and buildable."""
    series = load_all_series(ws.stack)
    run = ws.refuse_if_busy()
    inputs = []
    for upstream in ws.stack.upstreams:
        worktree = ws.worktree(upstream.name)
        settled = run.settled.get(upstream.name)
        if not worktree.exists() or settled is None:
            raise WorktreeError(f"no applied worktree for {upstream.name} at {worktree}: run 'kpatch apply' first")
        tree = Repository(worktree)
        if tree.operation():
            raise WorktreeError(f"{upstream.name} is not cleanly applied in {worktree}: finish 'kpatch apply' first")
        if tree.dirty():
            raise WorktreeError(f"worktree {worktree} has uncommitted changes: commit or discard them before building")
        if upstream.build is None:
            raise ConfigError(f"{ws.stack.path}:{upstream.line}: upstream {upstream.name} has no [upstream.build]")
        inputs.append(pipeline.BuildInput(upstream=upstream, worktree=worktree, base=settled.base,
                                          commit=tree.head(), stack_hash=series[upstream.name].stack_hash()))
    return inputs
