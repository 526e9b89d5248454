"""`kpatch doctor`: each line OK or what to do; exit 1 only when something the configured stacks need is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from tests.support.cli import run_kpatch
from tests.support.fake_github import fake_github
from tests.support.gitrepos import Project, mirror_dir

NO_ENGINE = "unix:///nonexistent/docker.sock"
TOKEN = "ghp_DOCTORdoctor0123456789DOCTORdoctor"


def _findings(stdout: str) -> dict[str, list[dict[str, str]]]:
    found: dict[str, list[dict[str, str]]] = {}
    for finding in json.loads(stdout)["result"]["findings"]:
        found.setdefault(finding["area"], []).append(finding)
    return found


def test_doctor_docker_backend_without_an_engine_says_how_to_start_one_and_fails(
        project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    result = project.run("doctor", "--backend", "docker")
    assert result.exit_code == ExitCode.CONFLICT, result.output
    lines = result.stdout.splitlines()
    failing = [line for line in lines if line.startswith("fail")]
    assert failing == [f"fail docker   no Docker engine at {NO_ENGINE} (build-wheels and test need it)"]
    hint = lines[lines.index(failing[0]) + 1]
    assert "as root 'dockerd &'" in hint and "DOCKER_HOST=ssh://xpu-build-host" in hint
    assert lines[-1] == "doctor: 1 thing needed is missing"


def test_doctor_local_backend_does_not_need_the_engine(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    result = project.run("doctor", "--backend", "local", "--json")
    found = _findings(result.stdout)
    assert found["docker"][0]["status"] == "warning" and found["python"][0]["status"] in ("passed", "failed")
    assert result.exit_code == (0 if found["python"][0]["status"] == "passed" else ExitCode.CONFLICT)
    assert found["git"][0]["status"] == "passed" and "patch-id --verbatim" in found["git"][0]["detail"]


def test_doctor_auto_backend_without_an_engine_takes_this_host_says_so_and_checks_its_needs(
        project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    result = project.run("doctor", "--cache-dir", "cache", "--json")  # auto: build-wheels' and test's default
    found = _findings(result.stdout)
    backend = found["backend"][0]
    assert backend["status"] == "passed" and backend["detail"].startswith("local: this host")
    assert f"(auto: no Docker engine at {NO_ENGINE}" in backend["detail"]
    assert found["docker"][0]["status"] == "warning"  # not needed: auto builds on this host
    assert found["python"][0]["status"] in ("passed", "failed")  # checked (made as the first local build makes it)
    assert "local build environment" in found["python"][0]["detail"]
    assert result.exit_code == (0 if found["python"][0]["status"] == "passed" else ExitCode.CONFLICT), result.output
    human = project.run("doctor", "--cache-dir", "cache")
    assert any(line.startswith("ok   backend  local: this host") for line in human.stdout.splitlines())


def test_doctor_docker_backend_is_named_as_asked(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    found = _findings(project.run("doctor", "--backend", "docker", "--json").stdout)
    assert found["backend"][0]["detail"].startswith("docker: the Docker engine (--backend docker)")
    assert found["python"][0]["status"] in ("skipped", "passed", "warning")  # not needed for docker


def test_doctor_outside_a_project_checks_the_machine_and_is_not_ready(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    result = run_kpatch(tmp_path, "doctor", "--json")
    assert result.exit_code == ExitCode.CONFLICT, result.output  # every command needs a kpatch.toml
    found = _findings(result.stdout)
    assert found["config"][0]["status"] == "failed" and "kpatch demo --keep" in found["config"][0]["fix"]
    assert found["docker"][0]["status"] == "warning"  # nothing configured needs it


def test_doctor_a_broken_kpatch_toml_is_a_failure_with_its_line(project: Project,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    toml = project.root / "kpatch.toml"
    toml.write_text(toml.read_text().replace('branch = "main"', 'brnch = "main"', 1))
    result = project.run("doctor", "--json")
    assert result.exit_code == ExitCode.CONFLICT
    config = _findings(result.stdout)["config"][0]
    assert config["status"] == "failed" and "kpatch.toml:" in config["detail"] and "brnch" in config["detail"]


def test_doctor_fsck_names_a_broken_mirror(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    assert project.run("apply", "--cache-dir", "cache").exit_code == 0
    mirror, kernels = mirror_dir(project.root / "cache", "app"), mirror_dir(project.root / "cache", "kernels").name
    clean = [{"area": "fsck", "status": "passed", "detail": f"{name}: git fsck clean", "fix": ""}
             for name in sorted((mirror.name, kernels))]
    assert _findings(project.run("doctor", "--cache-dir", "cache", "--fsck", "--backend", "local", "--json").stdout
                     )["fsck"] == clean
    biggest = max((p for p in (mirror / "objects").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    data = bytearray(biggest.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 16] = bytes(b ^ 0xFF for b in data[middle:middle + 16])
    biggest.chmod(0o644)
    biggest.write_bytes(bytes(data))
    without = _findings(project.run("doctor", "--cache-dir", "cache", "--backend", "local", "--json").stdout)
    assert without["fsck"][0]["status"] == "skipped" and without["fsck"][0]["fix"] == "kpatch doctor --fsck"
    result = project.run("doctor", "--cache-dir", "cache", "--fsck", "--backend", "local", "--json")
    assert result.exit_code == ExitCode.CONFLICT
    fsck = {f["detail"].split(":")[0]: f for f in _findings(result.stdout)["fsck"]}
    assert fsck[mirror.name]["status"] == "failed" and fsck[mirror.name]["fix"].startswith(f"remove {mirror}")
    assert fsck[kernels]["status"] == "passed"


@pytest.mark.parametrize(("access", "level", "says"), [
    ("write", "passed", "token of kpatch-bot, scopes repo, workflow"),
    ("read", "warning", "token of kpatch-bot: scopes read:user cannot push the nightly branch"),
    (None, "warning", "GITHUB_TOKEN is set; GitHub refused it (401 Bad credentials)"),
])
def test_doctor_asks_github_who_the_token_is_without_showing_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                access: str | None, level: str, says: str) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    with fake_github() as fake:
        if access:
            fake.grant(TOKEN, access)
        monkeypatch.setenv("KPATCH_GITHUB_API", fake.url)
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        result = run_kpatch(tmp_path, "doctor")
        machine = run_kpatch(tmp_path, "doctor", "--json")
    github = _findings(machine.stdout)["github"][0]
    assert github["status"] == level and github["detail"].startswith(says)
    assert next(line for line in result.stdout.splitlines() if " github " in line).split(None, 2)[2].startswith(says)
    logs = list((tmp_path / "home" / ".cache" / "kpatch" / "logs").glob("*.log"))
    for text in [result.output, machine.output, *(p.read_text() for p in logs)]:
        assert TOKEN not in text
