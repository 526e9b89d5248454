"""torch, the third member of the set, on a real Docker engine: pinned by [set] torch in both upstreams' pin
files, recorded per wheel in the lock, required exactly by the compiled (kernels) wheel.

No real torch here: the example upstreams carry a TEST STAND-IN wheel named torch (versions 2.13.0+standin and
2.14.0+standin, built by tests/wheelfiles.py, no PyTorch inside) in a wheelhouse/ their requirement files
install from (--no-index), the way the real upstreams install torch from an index before they build.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from packaging.metadata import Metadata
from packaging.requirements import Requirement

from kpatch.errors import ExitCode
from kpatch.examples.upstreams import make_example_project
from kpatch.wheels.lock import read as read_lock
from tests.support.cli import run_kpatch
from tests.support.wheelfiles import torch_standin


def _project(tmp_path: Path) -> Path:
    return make_example_project(tmp_path, wheelhouse=dict([torch_standin("2.13.0"), torch_standin("2.14.0")])).root


def _set_torch(root: Path, version: str) -> None:
    toml = root / "kpatch.toml"
    toml.write_text(toml.read_text().replace("version = 1\n", f'version = 1\n\n[set]\ntorch = "{version}"\n', 1))


def _requires(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    return [r for r in Metadata.from_email(text).requires_dist or [] if r.name == "torch"]


def test_set_torch_pins_both_halves_and_is_recorded_and_required(tmp_path: Path, base_image: str) -> None:
    root = _project(tmp_path)
    args = ["--cache-dir", str(tmp_path / "cache")]
    build = ["build-wheels", "--base-image", base_image, "--json", *args]
    assert run_kpatch(root, "apply", *args).exit_code == 0
    # As pinned upstream the halves disagree (kernels torch==2.13.0, app torch==2.14.0): the kernels wheel now
    # requires the torch it was built against, so the app's build cannot install it beside its own torch.
    split = run_kpatch(root, *build)
    assert split.exit_code == ExitCode.BUILD and "app: build step failed" in split.stderr, split.output
    assert "hint: kernels was built against torch 2.13.0+standin" in split.stderr and "[set] torch" in split.stderr
    assert not (root / "dist").exists()

    _set_torch(root, "2.14.0")
    result = run_kpatch(root, *build)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)["result"]
    assert payload["torch"] == "2.14.0"
    assert [(w["upstream"], w["torch"]) for w in payload["wheels"]] == [("kernels", "2.14.0+standin"),
                                                                         ("app", "2.14.0+standin")]
    lock = read_lock(root / "dist" / "pylock.toml")
    assert lock.set_torch == "2.14.0" and lock.torches() == {"kernels": "2.14.0+standin", "app": "2.14.0+standin"}
    kernels, app = (root / "dist" / w["filename"] for w in payload["wheels"])
    assert _requires(kernels) == [Requirement("torch==2.14.0+standin")]  # compiled: exactly the torch it saw
    assert _requires(app) == [Requirement("torch==2.14.0")]  # pure: its own requirement, as pinned by [set]


def test_a_build_that_gets_another_torch_than_the_set_fails_naming_both(tmp_path: Path, base_image: str) -> None:
    root = _project(tmp_path)
    toml = root / "kpatch.toml"
    toml.write_text(toml.read_text().replace('pin-files = ["requirements.txt"]\n', ""))  # kernels: pins not covered
    _set_torch(root, "2.14.0")
    args = ["--cache-dir", str(tmp_path / "cache")]
    assert run_kpatch(root, "apply", *args).exit_code == 0
    result = run_kpatch(root, "build-wheels", "--base-image", base_image, *args)
    assert result.exit_code == ExitCode.BUILD
    assert ("error: kernels: built against torch 2.13.0+standin, but kpatch.toml [set] torch is 2.14.0"
            in result.stderr.replace("\n", " "))
    assert not (root / "dist").exists()


def test_a_set_without_torch_records_none(tmp_path: Path, base_image: str) -> None:
    root = make_example_project(tmp_path).root
    args = ["--cache-dir", str(tmp_path / "cache")]
    assert run_kpatch(root, "apply", *args).exit_code == 0
    result = run_kpatch(root, "build-wheels", "--base-image", base_image, *args)
    assert result.exit_code == 0, result.output
    lock = read_lock(root / "dist" / "pylock.toml")
    assert lock.torches() == {"kernels": None, "app": None}
    assert 'torch = "none"' in (root / "dist" / "pylock.toml").read_text()
    wheels = sorted((root / "dist").glob("*.whl"))
    assert len(wheels) == 2 and all(not _requires(p) for p in wheels)
