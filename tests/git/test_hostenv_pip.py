"""kpatch does not depend on pip: the local backend's build environment (the seed) is made by the pip beside kpatch
when its environment has one, else by the `python3 -m pip` on PATH (as the README's install line), else by the
seed's own ensurepip. Each way is taken here from a kpatch whose venv has no pip, and the seed made holds pip,
setuptools and wheel from the package index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.registry  # the seed's packages come from the package index, as a person's do

_MAKE_SEED = ("import json, sys; from pathlib import Path; from kpatch.wheels import hostenv\n"
              "import importlib.util; assert importlib.util.find_spec('pip') is None, 'pip is beside kpatch'\n"
              "made = hostenv.seed(Path(sys.argv[1]), __import__('os').environ)\n"
              "print(json.dumps({'packages': dict(made.packages), 'folder': str(made.folder)}))\n")


def _kpatch_without_pip(tmp_path: Path) -> Path:
    """A venv with no pip in which kpatch (this checkout, by PYTHONPATH: hostenv needs no third-party package) runs."""
    venv.EnvBuilder(with_pip=False).create(tmp_path / "kpatch-venv")
    return tmp_path / "kpatch-venv" / "bin" / "python"


def _seed(python: Path, tmp_path: Path, path: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": path, "KPATCH_PYTHON_ENVS": str(tmp_path / "envs")}
    run = subprocess.run([str(python), "-c", _MAKE_SEED, str(tmp_path / "cache")], env=env, capture_output=True,
                         text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    made: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return made


def test_the_seed_is_made_by_the_python3_on_path_when_kpatch_has_no_pip_beside_it(tmp_path: Path) -> None:
    python = _kpatch_without_pip(tmp_path)
    host = tmp_path / "host-bin"  # a python3 with pip on PATH, as on a fresh machine (it says when it runs pip)
    host.mkdir()
    (host / "python3").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "ran"}\nexec {sys.executable} "$@"\n')
    (host / "python3").chmod(0o755)
    made = _seed(python, tmp_path, f"{host}{os.pathsep}{os.defpath}")
    assert set(made["packages"]) == {"pip", "setuptools", "wheel"}
    assert (Path(str(made["folder"])) / "bin" / "python").exists()
    ran = (tmp_path / "ran").read_text()
    assert "-m pip --python" in ran and "install" in ran, ran


def test_the_seed_fills_itself_with_ensurepip_when_no_pip_is_beside_kpatch_or_on_path(tmp_path: Path) -> None:
    python = _kpatch_without_pip(tmp_path)
    made = _seed(python, tmp_path, str(tmp_path / "empty-path"))
    assert set(made["packages"]) == {"pip", "setuptools", "wheel"}
