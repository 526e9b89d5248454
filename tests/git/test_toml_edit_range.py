"""kpatch.toml's edit (tests/unit/test_toml_edit.py) holds on every tomlkit kpatch's range admits, not only on the
one the test lock pins: the lowest release of the range and the newest one are fetched from the package index and
the edit's tests run against each (tomlkit 0.15 changed what an assignment keeps of a string's quotes)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.registry


def _tomlkit_range() -> Requirement:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return next(r for r in map(Requirement, deps) if r.name == "tomlkit")


def _lowest(requirement: Requirement) -> str:
    return next(spec.version for spec in requirement.specifier if spec.operator == ">=")


@pytest.mark.parametrize("end", ["lowest", "newest"])
def test_the_kpatch_toml_edit_keeps_the_persons_layout_on_both_ends_of_the_tomlkit_range(
        tmp_path: Path, end: str) -> None:
    requirement = _tomlkit_range()
    wanted = f"tomlkit=={_lowest(requirement)}" if end == "lowest" else str(requirement)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--dest", str(tmp_path / "wheel"), wanted], check=True, capture_output=True)
    (wheel,) = (tmp_path / "wheel").glob("tomlkit-*.whl")
    assert wheel.name.split("-")[1] in requirement.specifier
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         f"--basetemp={tmp_path / 'inner'}", "tests/unit/test_toml_edit.py"],
        cwd=ROOT, env={**_environ(), "PYTHONPATH": f"{wheel}:{ROOT}"}, capture_output=True, text=True, check=False)
    assert run.returncode == 0, f"{wheel.name}:\n{run.stdout[-3000:]}{run.stderr[-2000:]}"
    check = subprocess.run([sys.executable, "-c", "import tomlkit; print(tomlkit.__file__)"],
                           env={**_environ(), "PYTHONPATH": str(wheel)}, capture_output=True, text=True, check=True)
    assert str(wheel) in check.stdout  # the inner run imported the fetched release, not the venv's


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
