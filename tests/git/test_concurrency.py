"""One writer at a time: two kpatch processes started together, real timing, never both at work.

The first one to take the lock is held inside its work by a git hook in the mirror (apply, rebase) or by a
`git` on PATH that waits before `format-patch` (export, which runs no hook) and then runs the real git: the
other one must fail at once, exit 3, naming the holder; `status` keeps working meanwhile.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from tests.support.cli import kpatch
from tests.support.cli import start as start_kpatch
from tests.support.gitrepos import Project, git

WAIT = "i=0; while [ ! -e '{release}' ] && [ $i -lt 900 ]; do sleep 0.05; i=$((i+1)); done\n"


class Gate:
    """A place where the lock holder stops until the test opens the gate: marker says it got there."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.marker, self.release = folder / "reached", folder / "release"

    def script(self) -> str:
        return f"touch '{self.marker}'\n" + WAIT.format(release=self.release)

    def wait_reached(self, procs: list[subprocess.Popen[str]], timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not self.marker.exists():
            if all(p.poll() is not None for p in procs):
                pytest.fail("every process ended before one reached the gate: " +
                            " | ".join((p.stderr.read() if p.stderr else "") for p in procs))
            assert time.monotonic() < deadline, "no process reached the gate"
            time.sleep(0.02)

    def open(self) -> None:
        self.release.touch()


def hook_gate(mirror: Path, gate: Gate) -> None:
    """Every `git am` (its applypatch-msg hook) and every `git rebase` (pre-rebase: a rebase's picks, see
    kpatch/engine/fastpath.py) in a worktree of `mirror` stops until the gate opens."""
    for name in ("applypatch-msg", "pre-rebase"):
        hook = mirror / "hooks" / name
        hook.parent.mkdir(exist_ok=True)
        hook.write_text("#!/bin/sh\n" + gate.script())
        hook.chmod(0o755)


def git_gate(folder: Path, gate: Gate, command: str) -> dict[str, str]:
    """PATH with a `git` that waits at the gate before `git <command>`, then runs the real git."""
    real = shutil.which("git")
    assert real
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "git"
    wrapper.write_text(f"#!/bin/sh\nfor a in \"$@\"; do if [ \"$a\" = {command} ]; then\n{gate.script()}break; fi; "
                       f"done\nexec '{real}' \"$@\"\n")
    wrapper.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def start(project: Project, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return start_kpatch(project.root, *args, env=env, start_new_session=True)


def race(project: Project, first: list[str], second: list[str], gate: Gate,
         env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], subprocess.Popen[str], float]:
    """Start both together; return (the one holding the lock, the refused one, seconds the refused one took)."""
    started = time.monotonic()
    procs = [start(project, *first, env=env), start(project, *second, env=env)]
    gate.wait_reached(procs)
    ended = [p for p in procs if p.poll() is not None]
    deadline = time.monotonic() + 60
    while not ended and time.monotonic() < deadline:
        time.sleep(0.02)
        ended = [p for p in procs if p.poll() is not None]
    assert len(ended) == 1, "the second writer neither failed nor finished while the first held the lock"
    refused = ended[0]
    holder = procs[1] if refused is procs[0] else procs[0]
    return holder, refused, time.monotonic() - started


def assert_refused_naming(refused: subprocess.Popen[str], holder: subprocess.Popen[str], what: str) -> None:
    assert refused.returncode == ExitCode.WORKTREE
    stderr = refused.stderr.read() if refused.stderr else ""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error: another kpatch is writing here"), stderr
    assert f"pid {holder.pid}: kpatch {what}" in lines[0], stderr
    assert "Traceback" not in stderr


def finish(holder: subprocess.Popen[str], gate: Gate) -> tuple[int, str]:
    gate.open()
    _, err = holder.communicate(timeout=300)
    return holder.returncode, err


def test_two_applies_started_together_one_works_one_fails_at_once(project: Project, tmp_path: Path) -> None:
    assert project.run("apply").exit_code == 0
    heads = {n: git(project.workdir / n, "rev-parse", "HEAD") for n in ("kernels", "app")}
    cache = Path(project.root).parent / "home" / ".cache" / "kpatch"
    gate = Gate(tmp_path / "gate")
    hook_gate(cache / "mirrors" / "kernels.git", gate)
    holder, refused, _ = race(project, ["apply"], ["apply"], gate)
    assert_refused_naming(refused, holder, "apply")
    # Readers do not block: status works (and says an apply is in progress) while the holder is in git am.
    status = subprocess.run([sys.executable, "-m", "kpatch", "status", "--json"], cwd=project.root, text=True,
                            capture_output=True, timeout=120)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["result"]["operation"] == "apply"
    code, err = finish(holder, gate)
    assert code == 0, err
    assert {n: git(project.workdir / n, "rev-parse", "HEAD") for n in ("kernels", "app")} == heads
    assert (project.root / ".kpatch" / "lock").read_text() == ""  # released, no holder named


def test_apply_and_rebase_started_together_never_both(project: Project, tmp_path: Path) -> None:
    assert project.run("apply").exit_code == 0
    cache = Path(project.root).parent / "home" / ".cache" / "kpatch"
    gate = Gate(tmp_path / "gate")
    hook_gate(cache / "mirrors" / "kernels.git", gate)
    holder, refused, _ = race(project, ["apply"], ["rebase"], gate)
    what = "rebase" if holder.args[3] == "rebase" else "apply"  # type: ignore[index]
    assert_refused_naming(refused, holder, what)
    code, err = finish(holder, gate)
    assert code == 0, err
    assert json.loads(project.run("status", "--json").stdout)["result"]["operation"] is None


def test_two_exports_started_together_never_both(project: Project, tmp_path: Path) -> None:
    assert project.run("apply").exit_code == 0
    tree = project.workdir / "app"
    (tree / "NEWS").write_text("one more change\n")
    git(tree, "add", "NEWS")
    git(tree, "commit", "-qm", "Add NEWS\n\nUpstream-Status: pending")
    gate = Gate(tmp_path / "gate")
    env = git_gate(tmp_path / "bin", gate, "format-patch")
    holder, refused, _ = race(project, ["export"], ["export"], gate, env=env)
    assert_refused_naming(refused, holder, "export")
    code, err = finish(holder, gate)
    assert code == 0, err
    assert project.run("export", "--check").exit_code == 0
    assert "0003-Add-NEWS.patch" in (project.root / "patches" / "app" / "series").read_text()


def test_two_projects_sharing_a_cache_take_turns(project: Project, tmp_path: Path) -> None:
    """The cache (mirrors) is shared between projects: its own lock keeps a second project's apply out."""
    cache = tmp_path / "shared-cache"
    assert project.run("apply", "--cache-dir", str(cache)).exit_code == 0
    other = tmp_path / "other"
    shutil.copytree(project.root, other, ignore=shutil.ignore_patterns("work", ".kpatch"))
    gate = Gate(tmp_path / "gate")
    hook_gate(cache / "mirrors" / "kernels.git", gate)
    first = start(project, "apply", "--cache-dir", str(cache))
    gate.wait_reached([first])
    second = kpatch(other, "apply", "--cache-dir", str(cache), timeout=120)
    assert second.exit_code == ExitCode.WORKTREE
    assert f"pid {first.pid}: kpatch apply" in second.stderr and f"lock {cache / 'lock'}" in second.stderr
    assert not (other / "work").exists()
    code, err = finish(first, gate)
    assert code == 0, err


def test_a_lock_left_by_a_killed_holder_is_taken_over_with_a_note(project: Project, tmp_path: Path) -> None:
    assert project.run("apply").exit_code == 0
    cache = Path(project.root).parent / "home" / ".cache" / "kpatch"
    gate = Gate(tmp_path / "gate")
    hook_gate(cache / "mirrors" / "kernels.git", gate)
    holder = start(project, "apply")
    gate.wait_reached([holder])
    os.kill(holder.pid, signal.SIGKILL)  # only kpatch: its git am dies with it (parent-death signal)
    holder.wait()
    gate.open()
    assert json.loads((project.root / ".kpatch" / "lock").read_text())["pid"] == holder.pid
    after = kpatch(project.root, "apply", "--continue", timeout=300)
    assert after.exit_code == 0, after.stderr
    assert f"took over the lock {project.root / '.kpatch' / 'lock'} from kpatch pid {holder.pid} (apply)" \
        in after.stderr
    assert (project.root / ".kpatch" / "lock").read_text() == ""


def test_a_holder_that_has_not_written_its_name_yet_is_still_named(tmp_path: Path) -> None:
    """A holder writes its pid just after it takes the lock; a second writer that looks in between (a loaded
    machine stretches that gap) waits for the name instead of saying "another process"."""
    import fcntl
    import threading

    from kpatch.errors import WorktreeError
    from kpatch.project.exclusive import exclusive

    lock = tmp_path / "lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        name = json.dumps({"pid": 4242, "command": "export", "since": 0}).encode()
        late = threading.Timer(0.3, lambda: os.pwrite(fd, name, 0))
        late.start()
        with pytest.raises(WorktreeError, match="pid 4242: kpatch export"), exclusive([lock], "apply"):
            pass
        late.join()
    finally:
        os.close(fd)
