"""kpatch build-wheels --backend local: the same build script on this host, with a private HOME."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import zipfile
from pathlib import Path

from gitrepos import run_kpatch

from kpatch.errors import ExitCode
from kpatch.examples import make_example_project
from kpatch.lock import read as read_lock


def test_local_backend_builds_the_pair_and_caches(tmp_path: Path) -> None:
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    user_site_before = sorted(Path(site.getusersitepackages()).glob("*"))
    assert run_kpatch(root, "apply", *cache).exit_code == 0
    first = run_kpatch(root, "build-wheels", "--backend", "local", "--json", *cache)
    assert first.exit_code == 0, first.output
    payload = json.loads(first.stdout)
    assert payload["image"] == "local" and payload["containers"] == 0
    kernels, app = payload["wheels"]
    with zipfile.ZipFile(root / "dist" / app["filename"]) as archive:
        meta = archive.read(next(n for n in archive.namelist() if n.endswith("METADATA"))).decode()
    assert "vllm-xpu-kernels==" in meta.replace(" (", "").replace(")", "")
    assert kernels["version"] in meta
    again = json.loads(run_kpatch(root, "build-wheels", "--backend", "local", "--json", *cache).stdout)
    assert all(w["cached"] for w in again["wheels"])
    assert sorted(Path(site.getusersitepackages()).glob("*")) == user_site_before  # the host's Python untouched


def test_local_backend_failing_step(tmp_path: Path) -> None:
    root = make_example_project(tmp_path).root
    cache = ["--cache-dir", str(tmp_path / "cache")]
    toml = root / "kpatch.toml"
    toml.write_text(toml.read_text().replace("--py-limited-api=cp38", "--py-limited-api=cp38 && exit 7"))
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
    packaged = (Path(__file__).resolve().parents[1] / "kpatch" / "wheels" / "data" / "build-wheel.sh").read_text()
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
    fake = "command = " + json.dumps(f'python3 -c "{script}"')  # a JSON string is a TOML basic string
    toml.write_text(toml.read_text().replace(
        'command = "python3 setup.py -q bdist_wheel --dist-dir=$KPATCH_OUT --py-limited-api=cp38"', fake))
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
    from gitrepos import git

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
