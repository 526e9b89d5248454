"""`kpatch doctor`: is this machine ready for the configured stacks? Each line OK, or what to do about it.

A check FAILs only when something the configured stacks need is missing (a readable kpatch.toml and git with its
features always; the Docker engine when a stack builds or tests and the backend is docker; kpatch's build
environment with --backend local; a mirror `git fsck` finds broken; too little disk for the wheels). Everything else
that could bite later (no GPU, no token, a base image not pulled yet) is a WARN with the next step. Nothing is
changed, pulled or built, except that with --backend local the build environment is made as the first build would
make it (so "ok" means a build starts).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from kpatch import scratch
from kpatch.config import CONFIG_NAME, Stack
from kpatch.errors import BuildError, ConfigError
from kpatch.forge import github
from kpatch.gitx.health import capabilities, fsck
from kpatch.testing.devices import DRI_ENV, find_devices

GIB = 1024**3
DISK_FAIL = GIB // 2  # below this a wheel build cannot finish (the real vLLM wheel alone is hundreds of MB)
DISK_WARN = 5 * GIB

PROBE_TIMEOUT = 300  # seconds for a fresh venv to import the build tools; a hung one must still end


class Level(Enum):
    """A finding's verdict, in the words every command's JSON uses (verify's checks, the nightly's stages)."""

    OK = "passed"
    WARN = "warning"
    FAIL = "failed"  # something the configured stacks need is missing: doctor exits 1
    SKIP = "skipped"  # not asked for, or nothing to check

    @property
    def word(self) -> str:
        """The short word doctor's table shows (ok, warn, fail, skip)."""
        return {"passed": "ok", "warning": "warn", "failed": "fail", "skipped": "skip"}[self.value]


@dataclass(frozen=True)
class Finding:
    area: str
    level: Level = field(metadata={"json": "status"})
    detail: str
    fix: str = ""  # the next step (a command to run) when not OK


@dataclass(frozen=True)
class DoctorOptions:
    backend: str  # "docker" or "local": the one build-wheels and test will use
    backend_why: str  # how it was chosen: "--backend docker", or what `auto` found (the engine, or none)
    base_image: str  # the base the build image is made from
    fsck: bool
    cache_dir: Path
    dist: Path  # where the wheels go
    root: Path  # the project (kpatch.toml's folder; its docker/Dockerfile overrides kpatch's)


@dataclass(frozen=True)
class DoctorReport:
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return all(f.level is not Level.FAIL for f in self.findings)


def diagnose(stack: Stack | None, config_error: ConfigError | None, options: DoctorOptions) -> DoctorReport:
    """Every check, in the order a newcomer meets them; `config_error` is why there is no `stack`."""
    builds = stack is not None and any(u.build is not None or u.test is not None for u in stack.upstreams)
    findings = [_config(stack, config_error), _backend(options), *_git(),
                *_engine(options, needed=builds and options.backend == "docker"),
                _gpu(stack), *_local(options), *_mirrors(options), _token(), *_disks(options)]
    return DoctorReport(findings=tuple(findings))


def _config(stack: Stack | None, error: ConfigError | None) -> Finding:
    if stack is not None:
        names = ", ".join(u.name for u in stack.upstreams)
        return Finding("config", Level.OK, f"{stack.path}: {len(stack.upstreams)} upstreams ({names})")
    if error is not None and str(error).startswith(f"no {CONFIG_NAME} in"):
        return Finding("config", Level.FAIL, f"{error}: every command needs one; the project's needs were not checked",
                       "run kpatch doctor in a project, give --config FILE, make one with 'kpatch init' "
                       "(or try 'kpatch demo --keep')")
    return Finding("config", Level.FAIL, str(error or "no stack"), "fix kpatch.toml at the line named")


def _backend(options: DoctorOptions) -> Finding:
    """Which backend build-wheels, test and the nightly take here, and why (the same choice as theirs)."""
    where = "the Docker engine" if options.backend == "docker" else "this host, in venvs of kpatch's own"
    return Finding("backend", Level.OK, f"{options.backend}: {where} ({options.backend_why}); its needs are checked "
                   "below")


def _git() -> Iterator[Finding]:
    git = capabilities()
    if git.version is None:
        yield Finding("git", Level.FAIL, f"no usable git ({git.problem})", "install git 2.39 or newer")
        return
    missing = [name for name, ok in (("am --keep-cr", git.keep_cr), ("worktree", git.worktree),
                                      ("patch-id --verbatim", git.patch_id_verbatim)) if not ok]
    if missing:
        yield Finding("git", Level.FAIL, f"git {git.version} lacks {', '.join(missing)}", "install git 2.39 or newer")
    else:
        yield Finding("git", Level.OK, f"git {git.version}: am --keep-cr, worktree, patch-id --verbatim")


def _engine(options: DoctorOptions, *, needed: bool) -> Iterator[Finding]:
    # imported where used: each check loads what it asks (the Docker SDK, the build's image plan) when it runs
    from kpatch.container.docker import probe_engine
    from kpatch.wheels.pipeline import planned_image

    probe = probe_engine()
    if probe.problem is not None:
        level = Level.FAIL if needed else Level.WARN
        why = "build-wheels and test need it" if needed else "needed by build-wheels and test with --backend docker"
        start = ("start one: as root 'dockerd &' (or 'systemctl start docker'), then add yourself to the docker "
                 "group; or point DOCKER_HOST at one, e.g. DOCKER_HOST=ssh://xpu-build-host")
        yield Finding("docker", level, f"no Docker engine at {probe.where} ({why})", start)
        yield Finding("image", Level.SKIP, "the build image was not checked (no engine)")
        return
    yield Finding("docker", Level.OK, f"Docker engine {probe.version} at {probe.where}")
    image = planned_image(options.root, options.base_image)
    if not image.base_present:
        yield Finding("image", Level.WARN, f"base image {image.base} is not on the engine: the first build-wheels "
                      "pulls it (the oneAPI image is many GB)",
                      f"docker pull {image.base}, or 'kpatch build-wheels --base-image REF' with a local one")
        return
    state = f"built as {image.tag}" if image.built else f"not built yet ({image.tag}): the next build-wheels builds it"
    yield Finding("image", Level.OK, f"base {image.base} is on the engine; build image {state} from "
                  f"{image.dockerfile}")


def _gpu(stack: Stack | None) -> Finding:
    found = find_devices((), Path(os.environ.get(DRI_ENV, "/dev/dri")))
    needing = [u.name for u in (stack.upstreams if stack else ()) if u.test is not None and "xpu" in u.test.devices]
    if found.paths:
        return Finding("gpu", Level.OK, f"Intel GPU render node(s) under {found.paths[0]}: passed to kpatch test")
    if needing:
        return Finding("gpu", Level.WARN, f"{found.none_because}: kpatch test will not run {', '.join(needing)} "
                       "(exit 7)", "run kpatch test on a host with an Intel GPU, or give --device PATH")
    return Finding("gpu", Level.OK, f"{found.none_because}; no configured suite needs an XPU")


def _local(options: DoctorOptions) -> Iterator[Finding]:
    """kpatch's own build environment and oneAPI: needed for --backend local only."""
    needed = options.backend == "local"
    yield _build_env(options.cache_dir, needed)
    compiler = os.environ.get("CMPLR_ROOT")
    icpx = shutil.which("icpx")
    if compiler and icpx:
        yield Finding("oneapi", Level.OK, f"oneAPI at {compiler} (icpx {icpx}) for --backend local")
    else:
        yield Finding("oneapi", Level.WARN if needed else Level.SKIP,
                      "no oneAPI on this host (CMPLR_ROOT unset or no icpx on PATH): the real kernels cannot build "
                      "with --backend local", "source /opt/intel/oneapi/setvars.sh, or use the docker backend")


def _build_env(cache_dir: Path, needed: bool) -> Finding:
    """The probe a local build runs: the seed venv (made now if --backend local and the cache has none: the
    build would make it the same way), then a fresh venv from it with the build's environment, asked for the
    build tools."""
    from kpatch import procs
    from kpatch.wheels import hostenv

    try:
        made = hostenv.seed(cache_dir, os.environ) if needed else hostenv.cached(cache_dir)
    except BuildError as err:
        return Finding("python", Level.FAIL, str(err).splitlines()[0],
                       "check that pip reaches the package index (PIP_INDEX_URL, proxy settings), then run doctor "
                       "again")
    if made is None:
        return Finding("python", Level.SKIP, "no local build environment yet (--backend local makes one: a venv with "
                       "pip, setuptools and wheel from the package index)")
    with scratch.folder("doctor") as folder:
        bin_dir = hostenv.fresh(made, folder / "venv")
        env = hostenv.run_env(bin_dir, os.environ, {"HOME": str(folder)})
        probe = procs.run(["python3", "-c", "import setuptools.build_meta, wheel, pip"], env=env, cwd=folder,
                          timeout=PROBE_TIMEOUT)
    if probe.status != 0:
        last = f"no answer in {PROBE_TIMEOUT} s" if probe.timed_out else \
            (probe.output.strip().splitlines() or ["no output"])[-1]
        return Finding("python", Level.FAIL if needed else Level.WARN,
                       f"the local build environment {made.folder} does not start a build: {last}",
                       f"rm -r {made.folder} (kpatch makes it again)")
    return Finding("python", Level.OK, f"local build environment {made.folder}: {made.describe()} (--backend local)")


def _mirrors(options: DoctorOptions) -> Iterator[Finding]:
    folder = options.cache_dir / "mirrors"
    mirrors = sorted(p for p in folder.glob("*.git") if p.is_dir()) if folder.is_dir() else []
    if not mirrors:
        yield Finding("mirrors", Level.OK, f"no mirrors yet in {folder}: the first apply fetches them")
        return
    sizes = {m.name: _size(m) for m in mirrors}
    listing = ", ".join(f"{name} {size / 2**20:.0f} MiB" for name, size in sizes.items())
    broken = [m.name for m in mirrors if not (m / "HEAD").is_file() or not (m / "objects").is_dir()]
    if broken:
        yield Finding("mirrors", Level.FAIL, f"{', '.join(broken)} in {folder} is not a git repository",
                      "remove it; the next 'kpatch apply' fetches it again")
    else:
        yield Finding("mirrors", Level.OK, f"{len(mirrors)} in {folder}: {listing}")
    if not options.fsck:
        yield Finding("fsck", Level.SKIP, "mirrors not fsck'ed", "kpatch doctor --fsck")
        return
    for mirror in mirrors:
        problem = fsck(mirror)
        yield (Finding("fsck", Level.OK, f"{mirror.name}: git fsck clean") if problem is None else
               Finding("fsck", Level.FAIL, f"{mirror.name}: git fsck: {problem}",
                       f"remove {mirror}; the next 'kpatch apply' fetches it again"))


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _token() -> Finding:
    check = github.check_token(os.environ)
    if not check.present:
        return Finding("github", Level.WARN, "no GITHUB_TOKEN: rebase asks GitHub anonymously about Upstream-PR "
                       "states (60 requests an hour); nightly runs as --dry-run", "export GITHUB_TOKEN=...")
    if check.problem is not None:
        return Finding("github", Level.WARN, f"GITHUB_TOKEN is set; {check.problem}",
                       "check the token and KPATCH_GITHUB_API (GitHub Enterprise: https://HOST/api/v3)")
    if check.can_write is False:
        return Finding("github", Level.WARN, f"token of {check.login}: scopes {', '.join(check.scopes or ()) or 'none'}"
                       " cannot push the nightly branch or open its PR and issue", "give the token the repo scope")
    scopes = "fine-grained (GitHub lists no scopes)" if check.scopes is None else f"scopes {', '.join(check.scopes)}"
    return Finding("github", Level.OK, f"token of {check.login}, {scopes}")


def _disks(options: DoctorOptions) -> Iterator[Finding]:
    for what, path in (("the wheels", options.dist), ("the cache", options.cache_dir)):
        where = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
        free = shutil.disk_usage(where).free
        text = f"{free / GIB:.1f} GiB free for {what} ({path})"
        level = Level.FAIL if free < DISK_FAIL else Level.WARN if free < DISK_WARN else Level.OK
        yield Finding("disk", level, text, "" if level is Level.OK else f"free space on {where}")
