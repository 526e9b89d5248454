"""`kpatch build-wheels`: the kernels wheel first, then vLLM built against exactly it, and the pair's lock."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kpatch import __version__, lock
from kpatch.build import wheels
from kpatch.build.container import DockerBackend, Engine, Image
from kpatch.build.local import LocalBackend
from kpatch.config import Upstream
from kpatch.engine.plan import load_all_series
from kpatch.errors import BuildError, ConfigError, WorktreeError
from kpatch.gitx import Repository
from kpatch.ui import UI, activity
from kpatch.workspace import Workspace

SOURCE_ROOT = Path(__file__).resolve().parents[2]  # docker/ and scripts/ of the kpatch checkout
DEFAULT_BASE_IMAGE = "intel/deep-learning-essentials:2026.0.0-devel-ubuntu24.04"


@dataclass(frozen=True)
class BuiltWheel:
    upstream: str
    filename: str
    version: str
    sha256: str
    cached: bool  # reused from the cache: no container was started for it


@dataclass(frozen=True)
class BuildResult:
    wheels: tuple[BuiltWheel, ...]
    lock: Path
    image: str
    image_digest: str
    containers: int  # build containers the engine created during this run


def build_wheels(ws: Workspace, ui: UI, *, backend: str, image: str | None, base_image: str | None,
                 out: Path) -> BuildResult:
    started = time.time()
    inputs = _check_inputs(ws)
    script = (SOURCE_ROOT / "scripts" / "build-wheel.sh").read_bytes()
    cache = ws.cache_dir / "wheels"
    wheels.sweep(cache)
    engine: Engine | None = None
    runner: DockerBackend | LocalBackend
    if backend == "local":
        runner = LocalBackend()
    else:
        engine = Engine()
        if engine.remove_leftovers():
            ui.warn("removed build containers left by an interrupted run")
        runner = DockerBackend(engine, engine.image(image) if image else
                               _image(engine, ui, base_image or DEFAULT_BASE_IMAGE))
    built: dict[str, wheels.Wheel] = {}
    labels: dict[str, str] = {}
    results, locked = [], []
    for upstream, worktree, base, commit, stack_hash in inputs:
        assert upstream.build is not None
        deps = [built[d] for d in upstream.requires]
        key = wheels.cache_key({
            "base": base, "commit": commit, "stack": stack_hash, "image": runner.digest,
            "script": hashlib.sha256(script).hexdigest(), "command": upstream.build.command,
            "env": upstream.build.env, "pin-files": upstream.build.pin_files, "deps": [d.sha256 for d in deps]})
        labels[upstream.name] = wheels.label(key, [labels[d] for d in upstream.requires])
        version = f"{wheels.public_version(worktree, base)}+{labels[upstream.name]}"
        wheel = wheels.cached(cache, upstream.name, key)
        if wheel is not None:
            ui.note(f"{upstream.name}: cached {wheel.path.name}")
        built[upstream.name] = wheel or _build_one(runner, ui, upstream, worktree, commit, version, deps, script,
                                                   cache, key)
        results.append(BuiltWheel(upstream=upstream.name, filename=built[upstream.name].path.name,
                                  version=built[upstream.name].version, sha256=built[upstream.name].sha256,
                                  cached=wheel is not None))
        locked.append(lock.LockedUpstream(name=upstream.name, url=upstream.display_url, base=base, commit=commit,
                                          stack_hash=stack_hash, build_key=key, command=upstream.build.command,
                                          env=dict(upstream.build.env)))
    path = _publish(out, built, lock.Lock(
        wheels=tuple(lock.LockedWheel(upstream=n, package=w.package, version=w.version, filename=w.path.name,
                                      sha256=w.sha256, size=w.path.stat().st_size) for n, w in built.items()),
        upstreams=tuple(locked), image=runner.reference, image_digest=runner.digest,
        base_image=runner.base, base_image_digest=runner.base_digest, kpatch_version=__version__))
    return BuildResult(wheels=tuple(results), lock=path, image=runner.reference, image_digest=runner.digest,
                       containers=engine.created_since(started) if engine else 0)


def _check_inputs(ws: Workspace) -> list[tuple[Upstream, Path, str, str, str]]:
    """Every upstream applied, clean and buildable: (upstream, worktree, base, patched commit, stack hash)."""
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
        inputs.append((upstream, worktree, settled.base, tree.head(), series[upstream.name].stack_hash()))
    return inputs


def _image(engine: Engine, ui: UI, base_image: str) -> Image:
    """The build image for `base_image`: reused when already built from the same Dockerfile, base and labels."""
    dockerfile = (SOURCE_ROOT / "docker" / "Dockerfile").read_bytes()
    base_digest = engine.image(base_image).digest if engine.has_image(base_image) else ""
    args = {"BASE_IMAGE": base_image}
    labels = {"kpatch.base-image": base_image, "kpatch.base-image-digest": base_digest}
    recipe = dockerfile + json.dumps([args, labels], sort_keys=True).encode()
    tag = "kpatch-build:" + hashlib.sha256(recipe).hexdigest()[:16]
    if engine.has_image(tag):
        return engine.image(tag)
    with tempfile.TemporaryDirectory(prefix="kpatch-image-") as context, activity(ui, f"building image {tag}") as on:
        shutil.copy(SOURCE_ROOT / "docker" / "Dockerfile", Path(context) / "Dockerfile")
        return engine.build_image(Path(context), tag, args, labels, on)


def _build_one(runner: DockerBackend | LocalBackend, ui: UI, upstream: Upstream, worktree: Path, commit: str,
               version: str, deps: list[wheels.Wheel], script: bytes, cache: Path, key: str) -> wheels.Wheel:
    assert upstream.build is not None
    env = {**dict(upstream.build.env), "KPATCH_VERSION": version, "KPATCH_BUILD_COMMAND": upstream.build.command,
           "KPATCH_PIN_FILES": " ".join(upstream.build.pin_files),
           "KPATCH_PINS": " ".join(f"{d.package}=={d.version}" for d in deps)}
    with activity(ui, f"building {upstream.name} {version}") as on:
        made = runner.build(upstream.name, env, Repository(worktree).archive(commit, "src/"), [d.path for d in deps],
                            script, on)
    made = {n: d for n, d in made.items() if n.endswith(".whl")}
    if len(made) != 1:
        raise BuildError(f"{upstream.name}: the build wrote {len(made)} wheels, expected one: {sorted(made)}")
    (filename, data), = made.items()
    return wheels.store(cache, upstream.name, key, filename, data)


def _publish(out: Path, built: dict[str, wheels.Wheel], content: lock.Lock) -> Path:
    """Stage every wheel in `out`, then rename them in and write the lock last. On any failure nothing new is
    left behind: a lock on disk always names wheels that are there, and no wheel appears without its lock."""
    staged: dict[Path, Path] = {}
    new: list[Path] = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for wheel in built.values():
            staging = out / f".{wheel.path.name}.kpatch-new"
            staged[staging] = out / wheel.path.name
            shutil.copyfile(wheel.path, staging)
        for staging, target in staged.items():
            if not target.exists():
                new.append(target)
            os.replace(staging, target)
        return lock.write(out, content)
    except (OSError, BuildError) as err:
        for target in new:
            target.unlink(missing_ok=True)
        if isinstance(err, BuildError):
            raise
        raise BuildError(f"cannot write the wheels to {out}: {err.strerror}") from None
    finally:
        for staging in staged:
            staging.unlink(missing_ok=True)
