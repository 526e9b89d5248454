"""kpatch build-wheels --backend local: the same build script on this host, with a private HOME."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from kpatch.examples.upstreams import PEP517_BUILD, make_example_project
from kpatch.wheels.lock import read as read_lock
from tests.support.cli import run_kpatch
from tests.support.example_toml import with_build_command, with_build_key
from tests.support.upstream_env import SECRETS, SEEN
from tests.support.upstream_env import seen as read_seen


def test_local_backend_builds_the_pair_and_caches(tmp_path: Path) -> None:
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    user_site_before = sorted(Path(site.getusersitepackages()).glob("*"))
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    first = run_kpatch(root, "build-wheels", "--backend", "local", "--json", *cache)
    assert first.exit_code == 0, first.output
    payload = json.loads(first.stdout)["result"]
    assert payload["image"] == "local" and payload["containers"] == 0
    kernels, app = payload["wheels"]
    with zipfile.ZipFile(root / "dist" / app["filename"]) as archive:
        meta = archive.read(next(n for n in archive.namelist() if n.endswith("METADATA"))).decode()
    assert "vllm-xpu-kernels==" in meta.replace(" (", "").replace(")", "")
    assert kernels["version"] in meta
    again = json.loads(run_kpatch(root, "build-wheels", "--backend", "local", "--json", *cache).stdout)["result"]
    assert all(w["cached"] for w in again["wheels"])
    assert sorted(Path(site.getusersitepackages()).glob("*")) == user_site_before  # the host's Python untouched


def test_local_backend_failing_step(tmp_path: Path) -> None:
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    toml = root / "kpatch.toml"
    toml.write_text(with_build_command(toml.read_text(), "kernels", PEP517_BUILD + " && exit 7"))
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    result = run_kpatch(root, "build-wheels", "--backend", "local", *cache)
    assert result.exit_code == ExitCode.BUILD and "kernels: build step failed (exit 7)" in result.stderr
    assert not (root / "dist").exists()
    usage = run_kpatch(root, "build-wheels", "--backend", "local", "--image", "x", *cache)
    assert usage.exit_code == ExitCode.BAD_INPUT


def test_uv_installs_exactly_the_locked_pair_offline_from_the_dist_folder(tmp_path: Path) -> None:
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    built = run_kpatch(root, "build-wheels", "--backend", "local", "--json", *cache)
    assert built.exit_code == 0, built.output
    dist = root / "dist"
    venv = tmp_path / "venv"
    uv = [sys.executable, "-m", "uv"]
    env = {**os.environ, "UV_NO_CACHE": "1", "UV_OFFLINE": "1", "UV_NO_CONFIG": "1"}
    subprocess.run([*uv, "venv", "--quiet", str(venv)], check=True, env=env)
    install = subprocess.run([*uv, "pip", "install", "--offline", "--python", str(venv / "bin" / "python"),
                              "-r", "pylock.toml"], cwd=dist, capture_output=True, text=True, env=env)
    assert install.returncode == 0, install.stderr
    listed = subprocess.run([*uv, "pip", "list", "--format", "json", "--python", str(venv / "bin" / "python")],
                            capture_output=True, text=True, check=True, env=env)
    installed = {p["name"]: p["version"] for p in json.loads(listed.stdout)}
    lock = read_lock(dist / "pylock.toml")
    assert installed == {w.package: w.version for w in lock.wheels}
    assert sorted(installed) == ["app", "vllm-xpu-kernels"]


def test_a_projects_own_build_script_is_used_and_must_report_what_it_built_against(tmp_path: Path) -> None:
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    packaged = (Path(__file__).resolve().parents[2] / "kpatch" / "wheels" / "data" / "build-wheel.sh").read_text()
    own = root / "scripts" / "build-wheel.sh"
    own.parent.mkdir()
    own.write_text(packaged.replace('echo "kpatch: building version', 'echo "project script: building version'))
    result = run_kpatch(root, "build-wheels", "--backend", "local", *cache)
    assert result.exit_code == 0, result.output
    assert f"using the project's {own}" in result.stderr
    log = max((tmp_path / "cache" / "logs").glob("kpatch-*-build*wheels.log"), key=lambda p: p.stat().st_mtime)
    assert "project script: building version" in log.read_text()

    own.write_text(packaged[:packaged.index("# What the build was built against")])
    dist_before = {p.name: p.read_bytes() for p in (root / "dist").iterdir()}
    broken = run_kpatch(root, "build-wheels", "--backend", "local", *cache)
    assert broken.exit_code == ExitCode.BUILD
    assert "error: kernels: the build script wrote no kpatch-build-info.json" in broken.stderr
    assert {p.name: p.read_bytes() for p in (root / "dist").iterdir()} == dist_before


def test_a_build_that_writes_a_wheel_without_metadata_is_one_error_line(tmp_path: Path) -> None:
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    toml = root / "kpatch.toml"
    script = ("import os, zipfile; zipfile.ZipFile(os.environ['KPATCH_OUT'] + "
              "'/vllm_xpu_kernels-1.0-py3-none-any.whl', 'w').writestr('x.py', '')")
    toml.write_text(with_build_command(toml.read_text(), "kernels", f'python3 -c "{script}"'))
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    result = run_kpatch(root, "build-wheels", "--backend", "local", *cache)
    assert result.exit_code == ExitCode.BUILD, result.output
    assert result.stderr.splitlines()[-2:] == [
        "error: vllm_xpu_kernels-1.0-py3-none-any.whl: no .dist-info/METADATA in the wheel (expected one)",
        f"log: {next((tmp_path / 'cache' / 'logs').glob('kpatch-*-build*wheels.log'))}"]
    assert not (root / "dist").exists() and not list((tmp_path / "cache" / "wheels").glob("*/*"))


def test_a_broken_op_contract_stops_the_build_before_any_wheel_and_writes_no_lock(tmp_path: Path) -> None:
    """A PR #592-style registration (the `=None` defaults dropped) committed in the kernels worktree: build-wheels
    fails with the one contract error (exit 1), builds nothing and writes no lock."""
    from tests.support.gitrepos import git

    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    kernels = root / "work" / "kernels"
    bindings = kernels / "csrc" / "torch_bindings.cpp"
    text = bindings.read_text()
    assert "Tensor? positions=None, Tensor? cos_sin_cache=None" in text
    bindings.write_text(text.replace("Tensor? positions=None, Tensor? cos_sin_cache=None",
                                     "Tensor? positions, Tensor? cos_sin_cache"))
    git(kernels, "commit", "-q", "-am", "Register the op like PR #592")
    result = run_kpatch(root, "build-wheels", "--backend", "local", *cache)
    assert result.exit_code == ExitCode.CONFLICT, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "op contract kernels -> app: _C.fused_kimi_mla_insert schema differs" in errors[0]
    assert not (root / "dist").exists() and not (tmp_path / "cache" / "wheels").exists()


def test_a_local_build_runs_in_a_venv_of_its_own_with_wheel_and_no_credential(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build's python3 is a fresh venv (setuptools and wheel importable, whatever kpatch's own Python has),
    kpatch's site-packages are not on its path, and no secret-named variable reaches it or any output."""
    secrets = SECRETS
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    toml = root / "kpatch.toml"
    toml.write_text(with_build_command(toml.read_text(), "kernels", SEEN + " && env && exit 3"))
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    result = run_kpatch(root, "build-wheels", "--backend", "local", *cache)
    assert result.exit_code == ExitCode.BUILD, result.output
    log = next((tmp_path / "cache" / "logs").glob("kpatch-*-build*wheels.log"))
    seen = read_seen(log)
    assert seen["prefix"] != seen["base"] and not Path(str(seen["prefix"])).is_relative_to(Path(sys.prefix))
    ours = Path(sysconfig.get_path("purelib")).resolve()
    assert not any(Path(p).resolve() == ours for p in seen["path"] if p), "kpatch's site-packages reached the build"
    env = seen["env"]
    assert isinstance(env, dict) and not set(secrets) & set(env), sorted(env)
    assert Path(env["PATH"].split(os.pathsep)[0]) == Path(str(seen["prefix"])) / "bin"
    shown = result.output + log.read_text()
    assert not [name for name, value in secrets.items() if value in shown]


def test_the_readme_main_command_builds_where_the_interpreter_has_no_wheel_package(tmp_path: Path) -> None:
    """kpatch in a venv made as the README makes it (no pip of its own, no `wheel`): the local build still has
    setuptools and wheel, from kpatch's own build environment, and pip's --user is never asked for."""
    venv_dir = tmp_path / "kp"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv_dir)], check=True)
    python = venv_dir / "bin" / "python"
    site_dir = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    # kpatch and its dependencies from this test run's environment, without `wheel`
    (site_dir / "kpatch-deps.pth").write_text(str(Path(__file__).resolve().parents[2]) + "\n" +
                                               sysconfig.get_path("purelib") + "\n")
    hidden = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('wheel') is None)"],
                            capture_output=True, text=True, check=True)
    root = make_example_project(tmp_path / "example").root
    cache = str(tmp_path / "cache")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    for args in (["apply"], ["build-wheels", "--backend", "local", "--json"]):
        done = subprocess.run([str(python), "-m", "kpatch", *args, "--cache-dir", cache], cwd=root, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
    assert [w["upstream"] for w in json.loads(done.stdout)["result"]["wheels"]] == ["kernels", "app"]
    assert hidden.stdout.strip() == "True", "kpatch's interpreter here must lack `wheel`, as a fresh machine's does"


def test_a_long_quiet_build_off_a_terminal_prints_a_heartbeat_with_the_step_and_its_last_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPATCH_HEARTBEAT", "1")
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    toml = root / "kpatch.toml"
    toml.write_text(with_build_command(toml.read_text(), "kernels", "echo compiling unit 7 && sleep 4 && exit 3"))
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    result = run_kpatch(root, "build-wheels", "--backend", "local", *cache)
    assert result.exit_code == ExitCode.BUILD, result.output
    beats = [line for line in result.stderr.splitlines() if "still running after" in line]
    assert beats and all(line.startswith("building kernels ") for line in beats), result.stderr
    assert beats[-1].endswith("last line: compiling unit 7"), beats


def _alive(pid: int) -> bool:
    """Whether process `pid` still runs (a killed process that nobody has reaped yet does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _left_running(pids: list[int]) -> list[int]:
    """Those of `pids` still running after a while for SIGKILL to land (no timing is asserted)."""
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def test_a_build_that_hangs_is_killed_with_its_process_group_at_the_timeout_and_nothing_is_kept(
        tmp_path: Path) -> None:
    """[upstream.build] timeout: a build step that sleeps (with a child of its own in the background) is killed
    with its whole process group; the error is one line naming the step's last words (an unfinished line), then
    the last lines; exit 6; dist/ (lock and wheels), the wheel cache and the worktree are as they were."""
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    assert run_kpatch(root, "build-wheels", "--backend", "local", *cache).exit_code == 0
    dist_before = {p.name: p.read_bytes() for p in (root / "dist").iterdir()}
    cached_before = sorted((tmp_path / "cache" / "wheels").rglob("*"))
    pids = tmp_path / "pids"
    pids.mkdir()
    hang = (f"echo $$ > {pids}/step && (sleep 600; echo woke) & echo $! > {pids}/child && "
            "echo 'running build_ext' && printf 'compiling csrc/cache.cpp' && sleep 600")
    toml = root / "kpatch.toml"
    toml.write_text(with_build_key(with_build_command(toml.read_text(), "kernels", hang), "kernels", "timeout = 3"))
    result = run_kpatch(root, "build-wheels", "--backend", "local", *cache)
    assert result.exit_code == ExitCode.BUILD, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: upstream kernels: build timed out after 3 s while running: compiling csrc/cache.cpp"]
    after = result.stderr.split(errors[0], 1)[1]
    assert "running build_ext" in after and "compiling csrc/cache.cpp" in after  # the last lines follow it
    assert _left_running([int((pids / name).read_text()) for name in ("step", "child")]) == []
    assert {p.name: p.read_bytes() for p in (root / "dist").iterdir()} == dist_before
    assert sorted((tmp_path / "cache" / "wheels").rglob("*")) == cached_before


@pytest.mark.parametrize("value", ["0", "-5", '"4h"', "true", "inf", "nan"])
def test_a_build_timeout_that_is_no_positive_number_of_seconds_names_its_line(tmp_path: Path, value: str) -> None:
    root = make_example_project(tmp_path).root
    toml = root / "kpatch.toml"
    toml.write_text(with_build_key(toml.read_text(), "kernels", f"timeout = {value}"))
    before = toml.read_bytes()
    result = run_kpatch(root, "build-wheels", "--backend", "local", "--cache-dir", str(tmp_path / "cache"))
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    line = toml.read_text().splitlines().index(f"timeout = {value}") + 1
    assert f"kpatch.toml:{line}: [upstream.build] 'timeout' must be a positive number of seconds" in result.stderr
    assert toml.read_bytes() == before and not (root / "dist").exists() and not (tmp_path / "cache").exists()


def test_without_an_engine_build_wheels_and_test_default_to_this_host_and_say_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/workflow.md's `kpatch build-wheels` and `kpatch test`, as shown (no --backend), on a machine without a
    Docker engine: `auto` (the demo's default too) builds and tests on this host and says which it took."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    built = run_kpatch(root, "build-wheels", *cache)
    assert built.exit_code == 0, built.output
    assert "backend: local, on this host (no Docker engine at unix:///nonexistent/docker.sock" in built.stderr
    assert "--backend docker insists on one" in built.stderr
    lock_line = built.stdout.splitlines()[-1]
    assert "built on this host" in lock_line and "image local" not in lock_line  # no image, no container
    tested = run_kpatch(root, "test", *cache)
    assert tested.exit_code == 0, tested.output
    assert "backend: local, on this host (the pair in pylock.toml was built on this host)" in tested.stderr
    insisted = run_kpatch(root, "build-wheels", "--backend", "docker", *cache)
    assert insisted.exit_code == ExitCode.BUILD  # --backend docker still means the engine
