"""The folder is the tier: every test file lives in one, and the unit tier imports no torch (it runs without the
[sycl] extra)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
TIERS = ("unit", "git", "docker", "sycl")


def test_every_test_file_is_in_a_tier_folder() -> None:
    files = sorted(TESTS.rglob("test_*.py"))
    assert files
    assert [str(f.relative_to(TESTS)) for f in files if f.relative_to(TESTS).parts[0] not in TIERS] == []


def test_the_unit_tier_imports_no_torch() -> None:
    modules = [f"tests.unit.{f.stem}" for f in sorted((TESTS / "unit").glob("test_*.py"))]
    assert "tests.unit.test_tiers" in modules
    code = ("import importlib, sys\n"
            f"for name in {modules!r}:\n    importlib.import_module(name)\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=TESTS.parent, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
