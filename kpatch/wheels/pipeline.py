"""Building the set in dependency order on one backend: keys, versions, pins, the build, torch, the cache."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from kpatch import scratch
from kpatch.config import Upstream
from kpatch.container.docker import Engine, host_ca_bundle
from kpatch.container.image import Toolchain
from kpatch.errors import BuildError
from kpatch.files import sha256
from kpatch.gitx import Repository
from kpatch.output.ui import UI, activity
from kpatch.wheels import cache as wheel_cache
from kpatch.wheels import compiler_cache, hostenv, resources, versions
from kpatch.wheels.backend import Backend, BuildJob
from kpatch.wheels.docker import DockerBackend
from kpatch.wheels.local import LocalBackend
from kpatch.wheels.metadata import is_pure, require_exactly
from kpatch.wheels.pins import Pin, pin_source
from kpatch.wheels.record import Wheel

DEFAULT_BASE_IMAGE = "intel/deep-learning-essentials:2026.0.0-devel-ubuntu24.04"
SRC = "src/"  # where the source sits in the archive a build gets


@dataclass(frozen=True)
class BuildInput:
    """One applied, clean upstream ready to build."""

    upstream: Upstream
    worktree: Path
    base: str
    commit: str
    stack_hash: str


@dataclass(frozen=True)
class SetMember:
    """One built (or cached) wheel of the set, where the cache keeps it, and what it was built from."""

    input: BuildInput
    wheel: Wheel
    path: Path  # its file in the cache
    key: str
    cached: bool  # reused from the cache: nothing was started for it
    compiler_cache: compiler_cache.CacheStats | None = None  # what the compiler cache did in its build


def make_backend(kind: str, ui: UI, root: Path, cache_dir: Path, *, image: str | None,
                 base_image: str | None) -> Backend:
    """The local backend, or the Docker one on `image` (or on the image built from the Dockerfile)."""
    if kind == "local":
        local = local_backend(ui, cache_dir)
        ui.note(f"local backend: each build in a fresh venv of {local.environment}")
        return local
    engine = Engine()
    if engine.remove_leftovers():
        ui.warn("removed build containers left by an interrupted run")
    toolchain = engine.image(image) if image else _image(engine, ui, root, base_image or DEFAULT_BASE_IMAGE)
    cache = compiler_cache.from_environment(os.environ)
    ui.note(f"compiler cache: {'sccache, ' + cache.where if cache.enabled else 'off (KPATCH_SCCACHE=0)'}")
    return DockerBackend(engine, toolchain, cache)


def local_backend(ui: UI, cache_dir: Path) -> LocalBackend:
    """The local backend; its seed environment is made first if the cache has none (from the package index)."""
    if hostenv.cached(cache_dir) is None:
        ui.note("making the local build environment: a venv with pip, setuptools and wheel from the package index "
                f"(once, kept in {cache_dir / 'python-envs'})")
    return LocalBackend(cache_dir)


def _image(engine: Engine, ui: UI, root: Path, base_image: str) -> Toolchain:
    """The build image for `base_image`: reused when already built from the same Dockerfile, base and labels."""
    dockerfile = resources.load(root, resources.DOCKERFILE)
    if dockerfile.overridden:
        ui.note(f"using the project's {dockerfile.origin}")
    base_digest = engine.image(base_image).digest if engine.has_image(base_image) else ""
    tag, args, labels = image_recipe(dockerfile.data, base_image, base_digest)
    if engine.has_image(tag):
        return engine.image(tag)
    with scratch.folder("image") as context, activity(ui, f"building image {tag}") as on:
        (Path(context) / "Dockerfile").write_bytes(dockerfile.data)
        # The host's CA bundle, for a build stage that installs from the package index behind a TLS-intercepting
        # proxy (kpatch's Dockerfile uses it in a stage of its own: it never reaches the build image).
        ca = host_ca_bundle()
        (Path(context) / "ca.pem").write_bytes(ca.read_bytes() if ca else b"")
        return engine.build_image(Path(context), tag, args, labels, on)


def image_recipe(dockerfile: bytes, base_image: str, base_digest: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """The build image's tag (what it is built from, hashed), build args and labels (also for `kpatch doctor`)."""
    args = {"BASE_IMAGE": base_image}
    labels = {"kpatch.base-image": base_image, "kpatch.base-image-digest": base_digest}
    recipe = dockerfile + json.dumps([args, labels], sort_keys=True).encode()
    return "kpatch-build:" + sha256(recipe)[:16], args, labels


@dataclass(frozen=True)
class PlannedImage:
    """The build image build-wheels would use for `base`: whether its base is on the engine, its tag, whether built."""

    base: str
    base_present: bool
    tag: str
    built: bool
    dockerfile: str  # where the Dockerfile comes from (kpatch's own, or the project's)


def planned_image(root: Path, base_image: str) -> PlannedImage:
    """Ask the engine (it must answer) about the build image for `base_image`; nothing is built or pulled."""
    engine = Engine()
    dockerfile = resources.load(root, resources.DOCKERFILE)
    present = engine.has_image(base_image)
    tag, _, _ = image_recipe(dockerfile.data, base_image, engine.image(base_image).digest if present else "")
    return PlannedImage(base=base_image, base_present=present, tag=tag, built=engine.has_image(tag),
                        dockerfile=dockerfile.origin)


def build_set(inputs: list[BuildInput], backend: Backend, ui: UI, cache: Path, root: Path,
              set_torch: str | None, timeout: float | None = None) -> list[SetMember]:
    """Every upstream's wheel, each after the wheels it requires and built against exactly them; each build is
    killed after `timeout` seconds (default: its [upstream.build] timeout)."""
    script = resources.load(root, resources.BUILD_SCRIPT)
    if script.overridden:
        ui.note(f"using the project's {script.origin}")
    wheel_cache.sweep(cache)
    built: dict[str, SetMember] = {}
    labels: dict[str, str] = {}
    for item in inputs:
        upstream, build = item.upstream, item.upstream.build
        assert build is not None
        deps = [built[d] for d in upstream.requires]
        key = wheel_cache.cache_key({
            "base": item.base, "commit": item.commit, "stack": item.stack_hash, "image": backend.toolchain.digest,
            "script": sha256(script.data), "command": build.command, "env": build.env,
            "pin-files": build.pin_files, "deps": [d.wheel.sha256 for d in deps], "torch": set_torch})
        labels[upstream.name] = versions.label(key, [labels[d] for d in upstream.requires])
        found = versions.upstream_version(item.worktree, item.base)
        if found.tag is None:
            ui.warn(f"{upstream.name}: no PEP 440 version tag reaches {item.base[:12]}; its version starts at "
                    f"{found.public}")
        version = versions.with_label(found.public, labels[upstream.name])
        hit = wheel_cache.cached(cache, upstream.name, key, item.commit)
        if hit is not None:
            ui.note(f"{upstream.name}: cached {hit.filename}")
        pins = tuple(Pin(d.wheel.package, d.wheel.version, append=True) for d in deps)
        if set_torch:
            pins += (Pin("torch", set_torch, append=False),)
        wheel, stats = hit, None
        if wheel is None:
            try:
                wheel, stats = _build_one(backend, ui, item, str(version), pins, deps, script.data, cache, key,
                                          set_torch, build.timeout if timeout is None else timeout)
            except BuildError as err:
                raise _with_torch_hint(err, deps, set_torch) from None
        built[upstream.name] = SetMember(input=item, key=key, cached=hit is not None, wheel=wheel,
                                         path=wheel_cache.path(cache, wheel, key), compiler_cache=stats)
    return list(built.values())


def _with_torch_hint(err: BuildError, deps: list[SetMember], set_torch: str | None) -> BuildError:
    """A failed build whose required wheels pin a torch: say so, since the usual cause is two torches."""
    torches = [f"{d.input.upstream.name} was built against torch {d.wheel.torch}" for d in deps if d.wheel.torch]
    if set_torch or not torches:
        return err
    return BuildError(f"{err}\nhint: {'; '.join(torches)} and requires exactly it: if this build pins another "
                      'torch, name one for the whole set in kpatch.toml ([set] torch = "<version>")')


def _build_one(backend: Backend, ui: UI, item: BuildInput, version: str, pins: tuple[Pin, ...],
               deps: list[SetMember], script: bytes, cache: Path, key: str, set_torch: str | None,
               timeout: float) -> tuple[Wheel, compiler_cache.CacheStats | None]:
    upstream, build = item.upstream, item.upstream.build
    assert build is not None
    tree = Repository(item.worktree)
    source = pin_source(upstream.name, tree.archive(item.commit, SRC), SRC, build.pin_files, pins)
    # SOURCE_DATE_EPOCH (the commit's time) makes the wheel's file dates those of the source, not of the build:
    # the same commit builds to the same bytes, whether the compiler cache was warm or cold.
    epoch = tree.out(["log", "-1", "--format=%ct", "--end-of-options", item.commit])
    env = {"SOURCE_DATE_EPOCH": epoch, **dict(build.env), "KPATCH_VERSION": version,
           "KPATCH_BUILD_COMMAND": build.command}
    job = BuildJob(name=upstream.name, env=env, source_tar=source, deps=tuple(d.path for d in deps), script=script,
                   timeout=timeout)
    with activity(ui, f"building {upstream.name} {version}") as on:
        made = backend.build(job, on)
    if made.compiler_cache is not None:
        ui.note(f"{upstream.name}: {compiler_cache.describe(made.compiler_cache)} ({made.compiler_cache.location})")
    if set_torch and made.torch and not versions.satisfies(made.torch, set_torch):
        raise BuildError(f"{upstream.name}: built against torch {made.torch}, but kpatch.toml [set] torch is "
                         f"{set_torch}: its build installs torch from somewhere the pin files do not cover")
    data = made.data
    if made.torch and not is_pure(made.filename):  # compiled code is bound to the torch it was built against
        data = require_exactly(data, made.filename, versions.exact("torch", made.torch))
    try:
        return wheel_cache.store(cache, upstream.name, key, made.filename, data, made.torch,
                                 item.commit), made.compiler_cache
    except OSError as err:
        raise BuildError(f"cannot write the wheel cache {cache}: {err.strerror}") from None
