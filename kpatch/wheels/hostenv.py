"""Python environments kpatch owns on this host, for `--backend local` builds and test runs.

Upstream code never runs in the user's interpreter or its site-packages. kpatch keeps one *seed* per base
interpreter in its cache: a venv with pip, setuptools and wheel from the package index, made once by a pip that
fills it from outside (`pip --python`, so no `ensurepip` is needed: Debian's python3 has none without
python3-venv). kpatch does not depend on pip: the pip used is the one beside kpatch if its environment has one, else
the `python3 -m pip` on PATH (as the README's install line uses), else the seed's own `ensurepip`. Each build
or test run gets a fresh venv of its own that sees the seed's packages through a `.pth` file: what the run
installs goes into its own venv and goes away with it; pip never removes the seed's files (they lie outside the
run's environment). `python3`, `python` and `pip` on the run's PATH are the run's venv.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import venv
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kpatch import procs
from kpatch.errors import BuildError
from kpatch.files import sha256

SEED_PACKAGES = ("pip", "setuptools", "wheel")
RECIPE = 1  # a change to how a seed is made: a new seed, and new toolchain digests for the build cache
_READY = "kpatch-seed.json"
_PIP_FOR_PYTHON = (22, 3)  # `pip --python` (22.3) fills a venv from outside it
_PIP_SCRIPT = "#!{python}\nimport sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n"
_PROBE = ("import importlib.metadata as m, json, platform, sys\n"
          "print(json.dumps({'python': platform.python_version(), 'implementation': sys.implementation.name,\n"
          "                  'packages': {p: m.version(p) for p in sys.argv[1:]}}))\n")


@dataclass(frozen=True)
class Seed:
    """A made seed: where it is, the interpreter it is a venv of, and what it holds."""

    folder: Path
    python: str  # the base interpreter's version
    packages: Mapping[str, str]  # package -> version

    @property
    def site_packages(self) -> Path:
        return _site_packages(self.folder)

    @property
    def digest(self) -> str:
        """What identifies this environment in the build cache's keys (the docker backend uses the image ID)."""
        text = json.dumps({"recipe": RECIPE, "base": _base_interpreter(), "python": self.python,
                           "packages": dict(self.packages)}, sort_keys=True)
        return sha256(text.encode())

    def describe(self) -> str:
        held = ", ".join(f"{name} {version}" for name, version in sorted(self.packages.items()))
        return f"Python {self.python} ({_base_interpreter()}) with {held}"


def _base_interpreter() -> str:
    return str(Path(getattr(sys, "_base_executable", sys.executable)).resolve())


def _site_packages(prefix: Path) -> Path:
    scheme = sysconfig.get_preferred_scheme("prefix")
    return Path(sysconfig.get_path("purelib", scheme, vars={"base": str(prefix), "platbase": str(prefix)}))


def _seed_folder(cache_dir: Path) -> Path:
    """Where the seed lives: KPATCH_PYTHON_ENVS (one folder for every cache: the tests share one), else the cache."""
    key = sha256(f"{RECIPE}\0{_base_interpreter()}\0{sys.version}".encode())[:16]
    home = os.environ.get("KPATCH_PYTHON_ENVS")
    return (Path(home) if home else cache_dir / "python-envs") / f"seed-{key}"


def cached(cache_dir: Path) -> Seed | None:
    """The seed for kpatch's base interpreter if the cache has it."""
    return _read(_seed_folder(cache_dir))


def seed(cache_dir: Path, environ: Mapping[str, str]) -> Seed:
    """The seed for kpatch's base interpreter, made now (from the package index) if the cache has none."""
    folder = _seed_folder(cache_dir)
    home = folder.parent
    found = _read(folder)
    if found is not None:
        return found
    home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".new-seed-", dir=home) as scratch:
        new = Path(scratch) / "env"
        pip = _outside_pip(environ)
        try:
            venv.EnvBuilder(with_pip=pip is None, symlinks=os.name != "nt").create(new)
        except (OSError, subprocess.CalledProcessError, SystemExit):  # Debian's venv exits without python3-venv
            raise BuildError(f"cannot make the local build environment in {home}: no pip to fill it (none beside "
                             "kpatch, no `python3 -m pip` on PATH, and this Python's ensurepip does not work): "
                             "install pip beside kpatch, or put a python3 with pip 22.3 or newer on PATH") from None
        pip = [*pip, "--python", str(new / "bin" / "python")] if pip else [str(new / "bin" / "python"), "-m", "pip"]
        command = [*pip, "install", "--quiet", "--upgrade", "--disable-pip-version-check", "--no-input",
                   "--no-warn-script-location", *SEED_PACKAGES]
        done = procs.run(command, env=procs.upstream_env(environ, {}))
        if done.status != 0:
            raise BuildError(_failed(f"cannot make the local build environment in {home}: pip could not install "
                                     f"{', '.join(SEED_PACKAGES)} from the package index", done.output))
        probe = procs.run([str(new / "bin" / "python"), "-I", "-c", _PROBE, *SEED_PACKAGES], env={"PATH": os.defpath})
        try:
            facts = json.loads(probe.output.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise BuildError(_failed(f"the local build environment made in {home} does not start", probe.output)) \
                from None
        (new / _READY).write_text(json.dumps(facts), encoding="utf-8")
        try:
            new.rename(folder)
        except OSError:  # another kpatch made it first: use that one
            if _read(folder) is None:
                raise
    made = _read(folder)
    assert made is not None, folder
    return made


def _outside_pip(environ: Mapping[str, str]) -> list[str] | None:
    """A pip that can fill a venv from outside (`--python`): kpatch's own environment's, else `python3 -m pip` on
    PATH; None when neither has one (the seed then gets pip from its own `ensurepip`)."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    python3 = shutil.which("python3", path=environ.get("PATH") or os.defpath)
    if python3 is None:  # (the same binary as kpatch's may still have pip: a venv's python is a link to its base)
        return None
    probe = procs.run([python3, "-c", "import pip; print(pip.__version__)"], env=procs.upstream_env(environ, {}))
    try:
        version = tuple(int(part) for part in probe.output.strip().splitlines()[-1].split(".")[:2])
    except (ValueError, IndexError):
        return None
    return [python3, "-m", "pip"] if probe.status == 0 and version >= _PIP_FOR_PYTHON else None


def _read(folder: Path) -> Seed | None:
    try:
        facts = json.loads((folder / _READY).read_text(encoding="utf-8"))
        return Seed(folder=folder, python=str(facts["python"]), packages=dict(facts["packages"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def fresh(made: Seed, prefix: Path) -> Path:
    """A new venv at `prefix` that sees the seed's packages; returns its bin folder (first on the run's PATH)."""
    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(prefix)
    site = _site_packages(prefix)
    (site / "kpatch-seed.pth").write_text(f"{made.site_packages}\n", encoding="utf-8")
    bin_dir = prefix / "bin"
    for name in ("pip", "pip3"):
        script = bin_dir / name
        script.write_text(_PIP_SCRIPT.format(python=bin_dir / "python"), encoding="utf-8")
        script.chmod(0o755)
    return bin_dir


def run_env(bin_dir: Path, environ: Mapping[str, str], given: Mapping[str, str]) -> dict[str, str]:
    """The environment of upstream code run in the venv of `bin_dir`: allowlisted, that venv first on PATH."""
    env = procs.upstream_env(environ, given)
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH") or os.defpath])
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    for name in ("PYTHONHOME", "PYTHONPATH", "PYTHONUSERBASE", "PYTHONNOUSERSITE", "PYTHONSTARTUP"):
        env.pop(name, None)
    return env




def _failed(what: str, output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()][-8:]
    return f"{what}; last lines:\n" + "\n".join(lines or ["(no output)"])
