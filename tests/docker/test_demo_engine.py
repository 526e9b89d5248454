"""`kpatch demo` and `kpatch doctor` with the real Docker engine and the local base image."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from tests.support.cli import run_kpatch


def test_demo_runs_the_whole_pipeline_on_the_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    base_image: str) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    result = run_kpatch(None, "demo", "--base-image", base_image, "--json")  # its time: scripts/bench_demo
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)["result"]
    assert report["backend"]["backend"] == "docker" and report["backend"]["base_image"] == base_image
    assert f"has {base_image} to build on" in report["backend"]["why"]
    assert [s["name"] for s in report["steps"] if s["ok"]] == ["example", "apply", "upstream moves", "rebase",
                                                               "build-wheels", "verify", "test"]
    assert report["build"]["image"].startswith("kpatch-build:") and report["build"]["containers"] == 2
    assert [s["outcome"] for s in report["test"]["suites"]] == ["passed", "passed"]
    assert list(temp.iterdir()) == []


def test_doctor_sees_the_engine_and_the_base_image(tmp_path: Path, base_image: str) -> None:
    result = run_kpatch(tmp_path, "doctor", "--base-image", base_image, "--json")
    found = {f["area"]: f for f in json.loads(result.stdout)["result"]["findings"]}
    assert found["docker"]["status"] == "ok" and found["docker"]["detail"].startswith("Docker engine ")
    assert found["image"]["status"] == "ok" and f"base {base_image} is on the engine" in found["image"]["detail"]
    missing = run_kpatch(tmp_path, "doctor", "--base-image", "kpatch-no-such-image:1", "--json")
    image = {f["area"]: f for f in json.loads(missing.stdout)["result"]["findings"]}["image"]
    assert image["status"] == "warn" and image["fix"].startswith("docker pull kpatch-no-such-image:1")
