"""Fixtures shared by all tests: isolation from the real home, cache and network; the example project."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.support import ci_groups
from tests.support.gitrepos import Project, build_template, make_project
from tests.support.rebase_repos import RebaseProject, copy_rebase_project, make_rebase_project

HERE = Path(__file__).parent
# Hypothesis: CI (scripts/test) runs the fuzz tests with 10,000 examples; a local run takes a quick sample.
settings.register_profile("ci", max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
# The folder is the tier: tests/unit (no git, Docker or torch), tests/git (real git repositories, local builds),
# tests/docker (a Docker engine), tests/sycl (torch and a SYCL device). Each test gets its folder's marker, so
# `pytest -m "not docker"` works as `pytest tests/unit tests/git tests/sycl` does.
TIERS = ("unit", "git", "docker", "sycl")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--ci-groups", action="store_true",
                     help="CI's schedule (scripts/test): on xdist's workers by group, long files cut in chunks, the "
                          "longest first (tests/support/ci_groups.py)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test carries its tier's marker (its folder under tests/). With --ci-groups (scripts/test) the files are
    collected longest first (ci/test-durations.json), which is the order xdist hands their groups out in."""
    for item in items:
        folder = item.path.relative_to(HERE).parts[0] if item.path.is_relative_to(HERE) else ""
        if folder in TIERS:
            item.add_marker(getattr(pytest.mark, folder))
    if config.getoption("ci_groups"):
        files = [ci_groups.test_file(item.nodeid) for item in items]
        rank = {g: n for n, g in enumerate(ci_groups.longest_first(ci_groups.groups(files),
                                                                    ci_groups.load_durations()))}
        first = {f: min(rank[g] for g in rank if g.split("#")[0] == f) for f in set(files)}
        order = sorted(range(len(items)), key=lambda n: (first[files[n]], n))
        items[:] = [items[n] for n in order]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With --ci-groups, xdist hands out tests/support/ci_groups.py's groups (whole files, chunks of the long ones)."""
    return ci_groups.scheduler(config, log) if config.getoption("ci_groups") else None


def _run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This pytest run's base temp folder, the one xdist's workers share (each worker's own is a folder in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def _python_envs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The local backend's seed venv (pip, setuptools, wheel from the package index), made once per test run: one
    folder for xdist's workers too (the first to finish its seed renames it into place; the other takes that one)."""
    folder = _run_folder(tmp_path_factory) / "python-envs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def _compiler_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The compiler cache local builds get, as a person's would: sccache (the test dependency group's) on PATH, so the
    example kernels' setup.py puts it in front of g++ (as real upstreams do), its cache in one folder for the whole
    run (xdist's workers share it) and its server on a port of this run's own, stopped at the end. Every local
    build still runs its whole build; only the 24 identical C++ units are not compiled again by every test."""
    sccache = Path(sys.executable).parent / "sccache"
    if not sccache.is_file():
        yield {}
        return
    shared = _run_folder(tmp_path_factory)
    tools = shared / "compiler-cache" / "bin"
    tools.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # the other worker made it
        (tools / "sccache").symlink_to(sccache)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the workers share one server: a port both derive from the folder
        port = 20000 + shared.stat().st_ino % 20000
    else:
        with socket.socket() as probe:  # a free port of this run's own: never a person's sccache server
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    env = {"PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
           "SCCACHE_DIR": str(shared / "compiler-cache" / "store"), "SCCACHE_SERVER_PORT": str(port),
           "SCCACHE_IDLE_TIMEOUT": "120"}
    yield env
    subprocess.run([str(sccache), "--stop-server"], env={**os.environ, **env}, capture_output=True, check=False)


@pytest.fixture(scope="session")
def build_env(_python_envs: Path, _compiler_cache: dict[str, str]) -> dict[str, str]:
    """What every local build and test run of this pytest run shares: the seed venv, the compiler cache and pip's
    download cache. Each test gets it (`_isolated`); a module or session fixture that builds runs before that
    per-test fixture, so it sets these itself (`pytest.MonkeyPatch.context`), or it would make a seed from the
    package index and compile every C++ unit again."""
    return {"KPATCH_PYTHON_ENVS": str(_python_envs), **_compiler_cache,
            "PIP_CACHE_DIR": str(_python_envs / "pip-cache")}  # local builds' and test runs' downloads


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest,
              build_env: dict[str, str]) -> Iterator[None]:
    """No test reads or writes the real home, cache or network (tests marked `registry` may reach the package
    index, as CI can; so does the local backend's pip, once per run, for its seed venv)."""
    for name, value in build_env.items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.delenv("KPATCH_CACHE_DIR", raising=False)
    for key in [k for k in os.environ if k.startswith("KPATCH_URL_")]:
        monkeypatch.delenv(key)
    # GitHub is never reached from tests: a closed loopback port, unless a test starts its fake server.
    monkeypatch.setenv("KPATCH_GITHUB_API", "http://127.0.0.1:9")
    monkeypatch.delenv("KPATCH_OFFLINE", raising=False)
    monkeypatch.setenv("KPATCH_BLOBLESS", "0")  # full mirrors, as a person gets them (blobless: opt-in)
    monkeypatch.setenv("KPATCH_FETCH_RETRY_DELAY", "0")  # failed fetches are retried without sleeping
    for key in ("GITHUB_TOKEN", "GITHUB_REPOSITORY"):  # a CI runner's real token must never reach a test
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    (home / ".gitconfig").write_text("[user]\n\tname = Test User\n\temail = test@example.invalid\n"
                                     "[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n")
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> None:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and self.family != socket.AF_UNIX:
            raise AssertionError(f"test tried to reach the network: {address}")
        real_connect(self, address)  # type: ignore[arg-type]

    if request.node.get_closest_marker("registry") is None:
        monkeypatch.setattr(socket.socket, "connect", guarded)
    yield


@pytest.fixture(scope="session")
def nightly_wheel_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `--cache-dir` for the local-backend nights of tests/git/test_nightly_scroll.py and test_nightly_matrix.py,
    per worker for the whole run: the example's upstream histories have the same SHAs in every test, so a wheel
    built once is not built again by the next test, the next chunk of a split file (tests/support/ci_groups.py) or
    the other file. Each test works from a cold cache too (a `-k` run of one test)."""
    return tmp_path_factory.mktemp("nightly-wheel-cache")


@pytest.fixture(scope="session")
def example_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example upstreams and project, built once per test run; each test gets its own copy."""
    return build_template(tmp_path_factory.mktemp("example-template"))


@pytest.fixture
def project(tmp_path: Path, example_template: Path) -> Project:
    return make_project(tmp_path, example_template)


@pytest.fixture(scope="session")
def rebase_template(tmp_path_factory: pytest.TempPathFactory) -> RebaseProject:
    """The rebase upstreams and project (70 upstream commits), built once per test run."""
    return make_rebase_project(tmp_path_factory.mktemp("rebase-template"))


@pytest.fixture
def rp(tmp_path: Path, rebase_template: RebaseProject) -> RebaseProject:
    return copy_rebase_project(rebase_template, tmp_path)
