"""kpatch installed from its own wheel (not editable, fresh venv, real dependencies) runs build-wheels."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_kpatch_installed_from_its_wheel_builds_the_example_pair(base_image: str, tmp_path: Path) -> None:
    env = {**os.environ, "KPATCH_TEST_BASE_IMAGE": base_image, "TMPDIR": str(tmp_path)}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    # The script builds with the system's python3, not the test venv's: put the venv's bin dir off PATH.
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv_bin)
    proc = subprocess.run([str(ROOT / "scripts" / "wheel-smoke")], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "installed from its wheel at " + str(tmp_path) in proc.stdout
    assert "wheel-smoke: ok: " in proc.stdout and "built 2 wheels and pylock.toml" in proc.stdout
