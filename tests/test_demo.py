"""`kpatch demo` runs apply, status and the export round trip on upstreams it builds itself."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kpatch.cli import main
from kpatch.errors import ExitCode


def test_demo_runs_offline_and_round_trips(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["demo", "--dir", str(tmp_path / "d"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [s["upstream"] for s in report["applied"]["stacks"]] == ["kernels", "app"]
    assert all(f["change"] == "unchanged" for f in report["export_check"]["files"])
    assert all(p["state"] == "applied" for u in report["status"]["upstreams"] for p in u["patches"])
    assert (tmp_path / "d" / "project" / "work" / "app" / "app" / "models" / "k3" / "xpu" / "model.py").exists()


def test_demo_refuses_a_folder_in_use(tmp_path: Path) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "keep.txt").write_text("mine")
    result = CliRunner().invoke(main, ["demo", "--dir", str(used)])
    assert result.exit_code == ExitCode.BAD_INPUT and "is not empty" in result.stderr
    assert [p.name for p in used.iterdir()] == ["keep.txt"]
