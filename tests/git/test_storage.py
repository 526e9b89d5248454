"""Full and read-only file systems: a clear one-line error naming the path, exit 5, nothing changed, no traceback.

Real mounts (tests run as root, here and in CI): a read-only bind mount of a folder onto itself, and small
tmpfs mounts filled up. A full or read-only log folder costs the log, never the command.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from tests.support.gitrepos import Project


class Mounts:
    """Mounts made by one test, all undone at its end (lazily, so a busy one never blocks the cleanup)."""

    def __init__(self) -> None:
        self.points: list[Path] = []

    def read_only(self, folder: Path) -> None:
        """`folder` becomes read-only in place (a read-only bind mount onto itself)."""
        self._mount(["--bind", str(folder), str(folder)], folder)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)

    def tmpfs(self, folder: Path, kib: int, free_kib: int | None = None) -> None:
        """A `kib` KiB tmpfs at `folder`; with `free_kib`, filled up until only that much is left."""
        folder.mkdir(parents=True, exist_ok=True)
        self._mount(["-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(folder)], folder)
        if free_kib is not None:
            filler = folder / ".filler"
            with filler.open("wb") as handle, contextlib.suppress(OSError):
                handle.write(b"\0" * ((kib - free_kib) * 1024))
            while self.free_kib(folder) > free_kib:
                with filler.open("ab") as handle:
                    try:
                        handle.write(b"\0" * 4096)
                    except OSError:
                        break

    def fill(self, folder: Path) -> None:
        """Fill the file system of `folder` (a tmpfs made here) until nothing is left."""
        with (folder / ".filler").open("ab", buffering=0) as handle, contextlib.suppress(OSError):
            while True:
                handle.write(b"\0" * 4096)

    @staticmethod
    def free_kib(folder: Path) -> int:
        probe = os.statvfs(folder)
        return probe.f_bavail * probe.f_frsize // 1024

    def _mount(self, args: list[str], point: Path) -> None:
        subprocess.run(["mount", *args], check=True)
        self.points.append(point)

    def undo(self) -> None:
        for point in reversed(self.points):
            subprocess.run(["umount", "-l", str(point)], check=False)
        self.points.clear()


@pytest.fixture
def mounts() -> Iterator[Mounts]:
    if os.geteuid() != 0:
        pytest.fail("the storage tests mount file systems: they run as root (as in CI)")
    made = Mounts()
    try:
        yield made
    finally:
        made.undo()


def kpatch(project: Project, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kpatch", *args], cwd=project.root, text=True, capture_output=True,
                          env={**os.environ, **(env or {})}, timeout=300)


def assert_storage_error(result: subprocess.CompletedProcess[str], *names: str) -> str:
    """Exit 5 and one `error:` line naming the path (and what it is), no traceback, nothing misleading."""
    assert result.returncode == ExitCode.GIT, (result.returncode, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr and "crashed" not in result.stderr
    assert "does not apply" not in result.stderr and "cannot fetch" not in result.stderr
    assert "read-only" in errors[0].lower() or "no space left" in errors[0].lower(), errors[0]
    for name in names:
        assert name in errors[0], errors[0]
    return errors[0]


def default_cache(project: Project) -> Path:
    return project.root.parent / "home" / ".cache" / "kpatch"


@pytest.mark.parametrize("command", [["apply"], ["rebase"], ["export"], ["apply", "--continue"]])
def test_read_only_project(project: Project, mounts: Mounts, command: list[str]) -> None:
    """kpatch.toml, patches/ and .kpatch/ on a read-only mount: writers refuse, readers still work."""
    assert kpatch(project, "apply").returncode == 0
    before = project.snapshot()
    mounts.read_only(project.root)
    assert_storage_error(kpatch(project, *command), str(project.root))
    status = kpatch(project, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert kpatch(project, "export", "--check").returncode == 0
    mounts.undo()
    assert project.snapshot() == before


def test_read_only_project_never_applied(project: Project, mounts: Mounts) -> None:
    mounts.read_only(project.root)
    assert_storage_error(kpatch(project, "apply"), str(project.root))
    mounts.undo()
    assert not (project.root / ".kpatch").exists() and not project.workdir.exists()


@pytest.mark.parametrize("command", [["apply"], ["rebase"]])
def test_read_only_worktree(project: Project, mounts: Mounts, command: list[str]) -> None:
    """A worktree kpatch would move is read-only: refused before anything changes (git checkout would exit 0
    while failing to write)."""
    assert kpatch(project, "apply").returncode == 0
    before = project.snapshot()
    state = (project.root / ".kpatch" / "state.json").read_bytes()
    mounts.read_only(project.workdir / "app")
    assert_storage_error(kpatch(project, *command), str(project.workdir / "app"))
    assert (project.root / ".kpatch" / "state.json").read_bytes() == state
    export = kpatch(project, "export", "--check")  # reading a read-only worktree is fine
    assert export.returncode == 0, export.stderr
    mounts.undo()
    assert project.snapshot() == before
    assert not (project.workdir / ".rebase").exists()


def test_full_workdir_on_the_first_apply(project: Project, mounts: Mounts, tmp_path: Path) -> None:
    work = tmp_path / "small-work"
    mounts.tmpfs(work, 64, free_kib=8)
    before = project.snapshot()
    result = kpatch(project, "apply", "--workdir", str(work))
    assert_storage_error(result, str(work))
    assert project.snapshot() == before  # no run state left behind: nothing to continue or abort
    assert sorted(p.name for p in work.iterdir()) == [".filler"]
    assert kpatch(project, "status").returncode == 0


def test_full_workdir_in_the_middle_of_git_am(project: Project, mounts: Mounts, tmp_path: Path) -> None:
    """Room for the checkouts but not for the last new file a patch adds: a full disk, not "patch does not
    apply", and the stacks already applied by this run are undone too."""
    probe_project = tmp_path / "probe-project"
    shutil.copytree(project.root, probe_project)
    probe = tmp_path / "probe"
    mounts.tmpfs(probe, 1024)
    assert subprocess.run([sys.executable, "-m", "kpatch", "apply", "--workdir", str(probe), "--cache-dir",
                           str(tmp_path / "probe-cache")], cwd=probe_project, capture_output=True).returncode == 0
    used = 1024 - Mounts.free_kib(probe)
    work = tmp_path / "small-work"
    mounts.tmpfs(work, 1024, free_kib=used - 4)
    before = project.snapshot()
    result = kpatch(project, "apply", "--workdir", str(work))
    assert_storage_error(result, str(work))
    assert project.snapshot() == before
    assert sorted(p.name for p in work.iterdir()) == [".filler"]
    assert kpatch(project, "status").returncode == 0


def test_full_workdir_during_a_rebase(project: Project, mounts: Mounts, tmp_path: Path) -> None:
    """The scratch worktrees of a rebase do not fit: the rebase undoes itself; files, worktrees and run state
    as they were. (git am needs them: the run state has no stack hash, as an older kpatch wrote it, so nothing
    is picked without a worktree.)"""
    work = tmp_path / "small-work"
    mounts.tmpfs(work, 1024)
    assert kpatch(project, "apply", "--workdir", str(work)).returncode == 0
    state = project.root / ".kpatch" / "state.json"
    raw = json.loads(state.read_text())
    for settled in raw["settled"].values():
        settled["stack_hash"] = None
    state.write_text(json.dumps(raw))
    with (work / ".filler").open("wb") as handle:  # leave 8 KiB: not enough for a scratch worktree
        handle.write(b"\0" * ((Mounts.free_kib(work) - 8) * 1024))
    before = project.snapshot()
    heads = {n: subprocess.run(["git", "rev-parse", "HEAD"], cwd=work / n, capture_output=True, text=True).stdout
             for n in ("kernels", "app")}
    result = kpatch(project, "rebase")
    assert_storage_error(result, str(work / ".rebase"))
    assert project.snapshot() == before
    assert {n: subprocess.run(["git", "rev-parse", "HEAD"], cwd=work / n, capture_output=True, text=True).stdout
            for n in ("kernels", "app")} == heads
    assert not (work / ".rebase").exists()
    assert json.loads(kpatch(project, "status", "--json").stdout)["result"]["operation"] is None


@pytest.mark.parametrize(("kib", "free", "step"), [(256, 64, "git init"), (1024, 100, "git fetch")])
def test_full_cache(project: Project, mounts: Mounts, tmp_path: Path, kib: int, free: int, step: str) -> None:
    """The mirrors cannot be written: a full disk, not "cannot fetch" (and no three tries)."""
    cache = tmp_path / "small-cache"
    mounts.tmpfs(cache, kib, free_kib=free)
    before = project.snapshot()
    started = time.monotonic()
    result = kpatch(project, "apply", "--cache-dir", str(cache), env={"KPATCH_FETCH_RETRY_DELAY": "30"})
    assert time.monotonic() - started < 30  # not tried again: a full disk is not a flaky network
    error = assert_storage_error(result, str(cache / "mirrors"))
    assert step in error
    assert project.snapshot() == before


def test_read_only_cache(project: Project, mounts: Mounts) -> None:
    assert kpatch(project, "apply").returncode == 0
    before = project.snapshot()
    mounts.read_only(default_cache(project))
    assert_storage_error(kpatch(project, "apply"), str(default_cache(project)))
    assert kpatch(project, "status").returncode == 0  # a reader: no lock, no log needed
    mounts.undo()
    assert project.snapshot() == before


@pytest.mark.parametrize("kind", ["full", "read-only"])
def test_log_folder_full_or_read_only_costs_the_log_not_the_command(project: Project, mounts: Mounts,
                                                                    kind: str) -> None:
    logs = default_cache(project) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    if kind == "full":
        mounts.tmpfs(logs, 64, free_kib=0)
    else:
        mounts.read_only(logs)
    for command in (["apply"], ["status", "--json"], ["export", "--check"], ["apply", "--abort"]):
        result = kpatch(project, *command)
        assert "Traceback" not in result.stderr and "Logging error" not in result.stderr, result.stderr
        expected = ExitCode.WORKTREE if command == ["apply", "--abort"] else ExitCode.OK
        assert result.returncode == expected, (command, result.stderr)
    assert json.loads(kpatch(project, "status", "--json").stdout)["result"]["operation"] is None
