"""The test lock (ci/test-requirements.txt) is the environment scripts/test installs: it must pin every requirement
pyproject.toml names for the tests (kpatch's dependencies, the [sycl] extra, the `test` dependency group, the build
backend) at a version the range admits, each with a hash; and scripts/lock_drift.py says what moved away from it."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "ci" / "test-requirements.txt"


def _lock_drift() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lock_drift", ROOT / "scripts" / "lock_drift.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wanted() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    texts = [*project["project"]["dependencies"], *project["project"]["optional-dependencies"]["sycl"],
             *project["dependency-groups"]["test"]]
    texts += [line for line in (ROOT / "ci" / "build-system.in").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    return [Requirement(text) for text in texts]


def test_the_test_lock_pins_every_requirement_of_pyproject_at_a_version_its_range_admits() -> None:
    pins = _lock_drift().locked(LOCK.read_text())
    for requirement in _wanted():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement} is not in {LOCK.name}: run scripts/lock-tests"
        assert requirement.specifier.contains(Version(pins[name]), prereleases=True), \
            f"{LOCK.name} pins {name}=={pins[name]}, outside {requirement}: run scripts/lock-tests"


def test_every_pin_of_the_test_lock_carries_a_hash() -> None:
    text = LOCK.read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    assert len(blocks) == len(_lock_drift().locked(text)) > 50
    assert all("--hash=sha256:" in block for block in blocks), [b.split()[0] for b in blocks if "--hash" not in b]


def test_torch_in_the_test_lock_is_the_cpu_build() -> None:
    assert _lock_drift().locked(LOCK.read_text())["torch"].endswith("+cpu")


@pytest.mark.parametrize(("lock", "env", "said"), [
    ({"click": "8.1.7"}, {"click": "8.1.7"}, []),
    ({"click": "8.1.7"}, {"click": "8.2.0"}, ["drift: click 8.1.7 (locked) -> 8.2.0"]),
    ({"click": "8.1.7"}, {}, ["drift: click 8.1.7 is locked but no longer installed"]),
    ({}, {"rich": "15.0.0"}, ["drift: rich 15.0.0 is new (the lock has no rich)"]),
])
def test_lock_drift_names_each_package_whose_version_moved(lock: dict[str, str], env: dict[str, str],
                                                            said: list[str]) -> None:
    assert _lock_drift().drift(lock, env) == said


def test_lock_drift_reads_names_as_the_installer_does() -> None:
    text = "Foo_Bar==1.0 \\\n    --hash=sha256:00\n    # via x\nrich==15.0.0 ; python_version >= '3'\n"
    pins = _lock_drift().locked(text)
    assert pins == {"foo-bar": "1.0", "rich": "15.0.0"}
