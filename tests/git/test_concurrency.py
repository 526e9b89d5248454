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
from tests.support.gitrepos import Project, forget_held_files, git, make_project, mirror_dir, mirror_of

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
    forget_held_files(project.root)  # else an apply takes its commits: no git am to hold
    hook_gate(mirror_dir(cache, "kernels"), gate)
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
    forget_held_files(project.root)  # else an apply takes its commits: no git am to hold
    hook_gate(mirror_dir(cache, "kernels"), gate)
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


def test_two_projects_and_a_third_made_by_init_share_one_cache_and_work_at_once(project: Project,
                                                                                tmp_path: Path,
                                                                                example_template: Path) -> None:
    """The cache is every project's: while one project's rebase holds its own lock (stopped inside its git am),
    another project's apply and a third's (made by init on the first one's URLs: they share its mirrors) succeed.
    Before, the writer lock covered the whole cache: exit 3, "another kpatch is writing here"."""
    cache = tmp_path / "shared-cache"
    second = make_project(tmp_path / "second", example_template)
    for each in (project, second):
        assert kpatch(each.root, "apply", "--cache-dir", str(cache), timeout=300).exit_code == 0
    third = tmp_path / "third"
    third.mkdir()
    made = kpatch(third, "init", "--cache-dir", str(cache), "--upstream", f"kernels={project.kernels}@"
                  f"{project.kernels_base}", "--upstream", f"app={project.app}@v1.0", "--requires", "app:kernels",
                  timeout=300)
    assert made.exit_code == 0, made.stderr
    # One mirror per URL: the second project's upstreams are other repositories (of the same names), the third's
    # are the first's.
    assert sorted(p.name for p in (cache / "mirrors").glob("*.git")) == sorted(
        mirror_of(cache, url).name for url in (project.kernels, project.app, second.kernels, second.app))
    gate = Gate(tmp_path / "gate")
    hook_gate(mirror_of(cache, project.kernels), gate)
    forget_held_files(project.root)  # else the rebase picks the commits without a worktree: no git am to hold
    holder = start(project, "rebase", "--cache-dir", str(cache))
    gate.wait_reached([holder])
    assert json.loads((project.root / ".kpatch" / "lock").read_text())["pid"] == holder.pid
    other = kpatch(second.root, "apply", "--cache-dir", str(cache), timeout=300)
    assert other.exit_code == 0, other.stderr
    new = kpatch(third, "apply", "--cache-dir", str(cache), timeout=300)
    assert new.exit_code == 0, new.stderr
    assert (third / "work" / "app").is_dir() and (second.workdir / "app").is_dir()
    assert holder.poll() is None  # still in its git am, holding its project's lock all along
    code, err = finish(holder, gate)
    assert code == 0, err
    assert not (cache / "lock").exists()  # no lock over the whole cache any more


def test_wait_waits_for_the_projects_lock_then_does_its_work(project: Project, tmp_path: Path) -> None:
    assert project.run("apply").exit_code == 0
    gate = Gate(tmp_path / "gate")
    forget_held_files(project.root)  # else an apply takes its commits: no git am to hold
    hook_gate(mirror_dir(Path(project.root).parent / "home" / ".cache" / "kpatch", "kernels"), gate)
    holder = start(project, "apply")
    gate.wait_reached([holder])
    waiter = start(project, "apply", "--wait")
    assert waiter.stderr is not None
    first = ""  # what it says until it says it waits (or ends): read as it comes, no fixed sleep
    while "waiting for another kpatch" not in first and (line := waiter.stderr.readline()):
        first += line
    assert waiter.poll() is None, first  # waiting, not refused
    code, err = finish(holder, gate)
    assert code == 0, err
    _, rest = waiter.communicate(timeout=300)
    said = first + rest
    assert waiter.returncode == 0, said
    assert f"waiting for another kpatch to finish (pid {holder.pid}: kpatch apply" in said
    assert "another kpatch is writing here" not in said


def test_wait_with_seconds_gives_up_after_them_with_exit_3_naming_the_holder(project: Project,
                                                                             tmp_path: Path) -> None:
    assert project.run("apply").exit_code == 0
    gate = Gate(tmp_path / "gate")
    forget_held_files(project.root)  # else an apply takes its commits: no git am to hold
    hook_gate(mirror_dir(Path(project.root).parent / "home" / ".cache" / "kpatch", "kernels"), gate)
    holder = start(project, "apply")
    gate.wait_reached([holder])
    began = time.monotonic()
    late = kpatch(project.root, "rebase", "--wait=1", timeout=120)
    took = time.monotonic() - began
    code, err = finish(holder, gate)
    assert code == 0, err
    assert late.exit_code == ExitCode.WORKTREE, late.stderr
    assert f"another kpatch is writing here (pid {holder.pid}: kpatch apply" in late.stderr
    assert "waited 1 s" in late.stderr and took >= 1
    bad = kpatch(project.root, "apply", "--wait=soon", timeout=120)
    assert bad.exit_code == ExitCode.BAD_INPUT and "--wait takes a number of seconds" in bad.stderr


def test_a_lock_left_by_a_killed_holder_is_taken_over_with_a_note(project: Project, tmp_path: Path) -> None:
    assert project.run("apply").exit_code == 0
    cache = Path(project.root).parent / "home" / ".cache" / "kpatch"
    gate = Gate(tmp_path / "gate")
    forget_held_files(project.root)  # else an apply takes its commits: no git am to hold
    hook_gate(mirror_dir(cache, "kernels"), gate)
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
