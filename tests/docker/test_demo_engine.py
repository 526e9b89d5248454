"""`kpatch demo` and `kpatch doctor` with the real Docker engine and the local base image."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from tests.support.cli import run_kpatch
from tests.support.json_envelope import checked


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
    assert [s["name"] for s in report["steps"] if s["status"] == "passed"] == [
        "example", "apply", "upstream moves", "rebase", "build-wheels", "verify", "test", "release", "release line"]
    assert report["build"]["image"].startswith("kpatch-build:") and report["build"]["containers"] == 2
    assert [s["outcome"] for s in report["test"]["suites"]] == ["passed", "passed"]
    assert list(temp.iterdir()) == []


def test_doctor_sees_the_engine_and_the_base_image(tmp_path: Path, base_image: str) -> None:
    result = run_kpatch(tmp_path, "doctor", "--base-image", base_image, "--json")
    found = {f["area"]: f for f in json.loads(result.stdout)["result"]["findings"]}
    assert found["docker"]["status"] == "passed" and found["docker"]["detail"].startswith("Docker engine ")
    assert found["image"]["status"] == "passed" and f"base {base_image} is on the engine" in found["image"]["detail"]
    missing = run_kpatch(tmp_path, "doctor", "--base-image", "kpatch-no-such-image:1", "--json")
    image = {f["area"]: f for f in json.loads(missing.stdout)["result"]["findings"]}["image"]
    assert image["status"] == "warning" and image["fix"].startswith("docker pull kpatch-no-such-image:1")


def test_doctor_auto_takes_the_engine_that_answers_and_keeps_its_checks(tmp_path: Path, base_image: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPATCH_BASE_IMAGE", base_image)  # from the environment: auto still chooses by the engine
    result = run_kpatch(tmp_path, "doctor", "--json")
    found = {f["area"]: f for f in json.loads(result.stdout)["result"]["findings"]}
    assert found["backend"]["detail"].startswith("docker: the Docker engine (auto: the Docker engine at ")
    assert found["docker"]["status"] == "passed" and found["image"]["status"] == "passed"
    assert found["python"]["status"] in ("skipped", "passed", "warning")  # this host's environment is not needed


def test_demo_scroll_bisects_past_the_planted_break_to_the_last_green_commit_and_names_the_culprit(
        tmp_path: Path, base_image: str) -> None:
    """The demo's scrolling night on the engine (the scrolling itself on this host's backend:
    tests/git/test_nightly_scroll.py)."""
    result = run_kpatch(None, "demo", "--scroll", "--dir", str(tmp_path / "d"), "--base-image", base_image, "--json")
    assert result.exit_code == 0, result.output
    report = checked(result.stdout, "demo")["result"]
    assert [s["name"] for s in report["steps"]] == ["example", "apply", "upstream moves", "nightly"]
    moves = [m["commit"] for m in report["moves"]]
    assert [m["subject"] for m in report["moves"]] == ["News 0", "News 1", "Tighten the sampler", "News 2", "News 3"]
    scroll = report["scroll"]
    assert report["outcome"] == "failed" and scroll["complete"] and scroll["advanced"]
    # two steps from the red head: the second commit green, the third (the break) red
    assert [(s["commit"], s["result"]) for s in scroll["steps"]] == [(moves[1], "green"), (moves[2], "red")]
    assert scroll["culprit"]["commit"] == moves[2] and scroll["culprit"]["subject"] == "Tighten the sampler"
    assert {p["upstream"]: p["commit"] for p in scroll["last_green"]}["app"] == moves[1]
    nightly = report["steps"][-1]["summary"]
    assert nightly.startswith(f"heads red at test; scrolled app to the last green commit {moves[1][:12]} \"News 1\", "
                              f"culprit {moves[2][:12]} \"Tighten the sampler\" (2 steps, ")
    assert "## Scrolling: the last green upstream commits" in Path(report["report"]).read_text()
