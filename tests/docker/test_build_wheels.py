"""kpatch build-wheels on a real Docker engine, with the example pair (a kernels-like and an app package)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import time
import tomllib
import zipfile
from pathlib import Path

import pytest
from click.testing import Result

from kpatch.errors import ExitCode
from kpatch.examples.upstreams import PEP517_BUILD, ExampleProject, make_example_project
from kpatch.wheels.lock import check as check_lock
from tests.support.cli import run_kpatch, start
from tests.support.example_toml import with_build_command
from tests.support.gitrepos import mirror_dir


class Pair:
    def __init__(self, tmp: Path, base_image: str) -> None:
        self.example: ExampleProject = make_example_project(tmp)
        self.root = self.example.root
        self.base_image = base_image
        self.cache = tmp / "cache"
        assert self.run("apply").exit_code == 0

    def run(self, *args: str) -> Result:
        return run_kpatch(self.root, *args, "--cache-dir", str(self.cache))

    def build(self, *extra: str) -> Result:
        return self.run("build-wheels", "--base-image", self.base_image, "--json", *extra)

    def dist(self) -> dict[str, bytes]:
        folder = self.root / "dist"
        return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else {}


@pytest.fixture
def pair(tmp_path: Path, base_image: str) -> Pair:
    return Pair(tmp_path, base_image)


def metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(next(n for n in archive.namelist() if n.endswith("METADATA"))).decode()


def _our_build_containers() -> str:
    """The build containers this test process started (kpatch runs in-process) and left: not another run's."""
    return subprocess.run(["docker", "ps", "-aq", "--filter", "label=kpatch.build", "--filter",
                           f"label=kpatch.owner={socket.gethostname()}:{os.getpid()}"], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_pair_is_built_in_order_pinned_and_locked(pair: Pair) -> None:
    result = pair.build()
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)["result"]
    assert [w["upstream"] for w in payload["wheels"]] == ["kernels", "app"]
    assert payload["containers"] == 2 and not any(w["cached"] for w in payload["wheels"])
    kernels, app = payload["wheels"]
    assert kernels["version"].startswith("1.0+kpatch.") and app["version"].startswith(kernels["version"] + ".")
    assert f"Requires-Dist: vllm-xpu-kernels (=={kernels['version']})" in metadata(pair.root / "dist" / app["filename"])
    lock_path = pair.root / "dist" / "pylock.toml"
    lock = tomllib.loads(lock_path.read_text())
    assert lock["lock-version"] == "1.0"
    for package in lock["packages"]:
        wheel = pair.root / "dist" / package["wheels"][0]["path"]
        assert package["wheels"][0]["size"] == wheel.stat().st_size
        assert package["wheels"][0]["hashes"]["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    upstreams = lock["tool"]["kpatch"]["upstreams"]
    assert upstreams["kernels"]["base"] == pair.example.kernels_base
    assert lock["tool"]["kpatch"]["image-digest"] == payload["image_digest"]
    base_id = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", pair.base_image], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert lock["tool"]["kpatch"]["base-image"] == pair.base_image
    assert lock["tool"]["kpatch"]["base-image-digest"] == base_id
    # The wheel holds the patched tree: the app stack's first patch adds app/models/k3/xpu/model.py.
    with zipfile.ZipFile(pair.root / "dist" / app["filename"]) as archive:
        assert "app/models/k3/xpu/model.py" in archive.namelist()
    first_lock = lock_path.read_bytes()
    assert check_lock(lock_path) == []
    tampered = pair.root / "dist" / kernels["filename"]
    original = tampered.read_bytes()
    tampered.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    assert check_lock(lock_path) == [f"{kernels['filename']}: sha256 differs"]
    tampered.write_bytes(original)

    again = pair.build()
    assert again.exit_code == 0, again.output
    payload = json.loads(again.stdout)["result"]
    assert payload["containers"] == 0 and all(w["cached"] for w in payload["wheels"])
    assert lock_path.read_bytes() == first_lock  # deterministic: no clock in the lock


def test_an_app_patch_change_rebuilds_only_the_app(pair: Pair) -> None:
    first = json.loads(pair.build().stdout)["result"]
    patch = pair.root / "patches" / "app" / "0001-Route-k3-to-the-XPU-path.patch"
    patch.write_text(patch.read_text().replace("# ops come from the kernels", "# ops come from the kernels!"))
    assert pair.run("apply").exit_code == 0
    second = pair.build()
    assert second.exit_code == 0, second.output
    payload = json.loads(second.stdout)["result"]
    assert payload["containers"] == 1
    assert [w["cached"] for w in payload["wheels"]] == [True, False]
    assert payload["wheels"][0]["sha256"] == first["wheels"][0]["sha256"]
    assert payload["wheels"][1]["version"] != first["wheels"][1]["version"]


def test_a_failing_build_step_leaves_no_lock(pair: Pair) -> None:
    toml = pair.root / "kpatch.toml"
    toml.write_text(with_build_command(toml.read_text(), "app", "echo compiling; exit 3"))
    result = pair.build()
    assert result.exit_code == ExitCode.BUILD
    assert "app: build step failed (exit 3); last lines:" in result.stderr and "compiling" in result.stderr
    assert pair.dist() == {}
    assert not _our_build_containers()


def test_a_build_that_hangs_is_killed_with_its_container_at_the_timeout_and_nothing_is_kept(pair: Pair) -> None:
    """build-wheels --timeout S: the kernels build sleeps in its container; at S seconds the container is killed and
    removed, the error is one line naming the step's last words (an unfinished line), then the last lines; exit 6;
    nothing is cached and no dist/ or lock is written."""
    toml = pair.root / "kpatch.toml"
    hang = "echo 'running build_ext' && printf 'compiling csrc/cache.cpp' && sleep 600"
    toml.write_text(with_build_command(toml.read_text(), "kernels", hang))
    result = pair.build("--timeout", "3")
    assert result.exit_code == ExitCode.BUILD, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: upstream kernels: build timed out after 3 s while running: compiling csrc/cache.cpp"]
    assert "running build_ext" in result.stderr.split(errors[0], 1)[1]  # the last lines follow it
    assert not _our_build_containers()
    assert pair.dist() == {} and not list((pair.cache / "wheels").glob("*/*"))


def test_missing_worktree_unknown_image_and_no_engine(pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    unknown = pair.run("build-wheels", "--image", "kpatch-no-such-image:1")
    assert unknown.exit_code == ExitCode.BUILD and "image kpatch-no-such-image:1 not found" in unknown.stderr
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    none = pair.run("build-wheels", "--backend", "docker")  # asked for the engine (auto would build on this host)
    assert none.exit_code == ExitCode.BUILD
    assert "no Docker engine at unix:///nonexistent/docker.sock" in none.stderr and "dockerd" in none.stderr
    monkeypatch.delenv("DOCKER_HOST")
    subprocess.run(["git", "worktree", "remove", "--force", str(pair.root / "work" / "app")],
                   cwd=mirror_dir(pair.cache, "app"), check=True)
    missing = pair.build()
    assert missing.exit_code == ExitCode.WORKTREE and "run 'kpatch apply' first" in missing.stderr
    assert pair.dist() == {}


def test_a_base_image_no_registry_gives_is_one_line_naming_it_and_the_way_round(pair: Pair) -> None:
    result = pair.run("build-wheels", "--base-image", "kpatch-no-such-base:1")
    assert result.exit_code == ExitCode.BUILD
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "cannot pull base image kpatch-no-such-base:1" in error and "--base-image REF" in error
    assert pair.dist() == {}


def test_unwritable_out_dir(pair: Pair, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = pair.build("--out", str(blocker / "dist"))
    assert result.exit_code == ExitCode.BUILD and f"cannot write the wheels to {blocker / 'dist'}" in result.stderr


def test_full_disk(pair: Pair, tmp_path: Path) -> None:
    """A real full file system (a 64 KiB tmpfs): a clear error and no half-written lock or wheel."""
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)]).returncode != 0:
        pytest.fail("cannot mount a tmpfs (the tests run as root in CI)")
    try:
        (small / "filler").write_bytes(b"x" * 60 * 1024)
        result = pair.build("--out", str(small / "dist"))
        assert result.exit_code == ExitCode.BUILD, result.output
        assert "No space left on device" in result.stderr
        assert not (small / "dist" / "pylock.toml").exists()
        assert not (small / "dist").exists() or not list((small / "dist").iterdir())
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_kill_midway_then_the_next_run_starts_clean(pair: Pair) -> None:
    """SIGKILL kpatch while its first build container runs; the rerun removes the leftover and builds."""
    toml = pair.root / "kpatch.toml"
    original = toml.read_text()
    toml.write_text(with_build_command(original, "kernels", f"sleep 30; {PEP517_BUILD}"))
    proc = start(pair.root, "build-wheels", "--base-image", pair.base_image, "--cache-dir", str(pair.cache),
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    running = ""
    while not running:  # the kernels build sleeps in its container: a window that cannot be missed
        assert proc.poll() is None and time.monotonic() < deadline, "the build container never ran"
        running = subprocess.run(["docker", "ps", "-q", "--filter", "label=kpatch.build"], capture_output=True,
                                 text=True).stdout.strip()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    toml.write_text(original)
    assert pair.dist() == {}  # nothing published by the killed run
    result = pair.build()
    assert result.exit_code == 0, result.output
    assert "removed build containers left by an interrupted run" in result.stderr
    assert not list((pair.cache / "wheels").glob("*/.*-*"))
    assert len([n for n in pair.dist() if n.endswith(".whl")]) == 2


def _build_log(pair: Pair) -> str:
    return max((pair.cache / "logs").glob("kpatch-*-build*wheels.log"), key=lambda p: p.stat().st_mtime).read_text()


def test_the_hosts_ca_bundle_is_copied_in_read_only_and_pip_cert_points_at_it(
        pair: Pair, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What kpatch controls for pip in the container (the real builds pip install -r from an index): the host's
    bundle (PIP_CERT, else REQUESTS_CA_BUNDLE / SSL_CERT_FILE) goes in root-owned and read-only, and PIP_CERT and
    SSL_CERT_FILE name it. Without one on the host, nothing goes in and neither is set."""
    bundle = tmp_path / "corporate-ca.pem"
    bundle.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot a real certificate, only bytes to compare\n")
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    toml = pair.root / "kpatch.toml"
    original = toml.read_text()
    probe = ('echo "ca: PIP_CERT=$PIP_CERT SSL_CERT_FILE=$SSL_CERT_FILE $(stat -c %U:%a "$PIP_CERT") '
             '$(sha256sum < "$PIP_CERT" | cut -c1-64)" && ')
    toml.write_text(with_build_command(original, "app", probe + PEP517_BUILD))
    result = pair.build()
    assert result.exit_code == 0, result.output
    digest = hashlib.sha256(bundle.read_bytes()).hexdigest()
    assert f"ca: PIP_CERT=/kpatch/ca.pem SSL_CERT_FILE=/kpatch/ca.pem root:444 {digest}" in _build_log(pair)

    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    absent = 'echo "ca: none=$(test -e /kpatch/ca.pem || echo absent) PIP_CERT=${PIP_CERT:-unset}" && '
    toml.write_text(with_build_command(original, "app", absent + PEP517_BUILD))
    again = pair.build()
    assert again.exit_code == 0, again.output
    assert "ca: none=absent PIP_CERT=unset" in _build_log(pair)
