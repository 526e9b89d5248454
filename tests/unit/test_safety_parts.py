"""The small parts behind the safety promises: orphaned git found by its kpatch's pid, a full disk told from
other git failures, the writer lock's holder. Real processes and files, no git repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kpatch.errors import WorktreeError
from kpatch.gitx.orphans import orphans, stop_orphans
from kpatch.gitx.runner import ORPHAN_MARKER as MARKER
from kpatch.gitx.storage import _verb, storage_problem
from kpatch.project.exclusive import exclusive


def _sleeper(cwd: Path, parent: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"], cwd=cwd, env={**os.environ, MARKER: str(parent)})


def test_a_process_whose_kpatch_is_gone_is_an_orphan_and_is_stopped(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = _sleeper(tmp_path, int(dead.stdout))
    ours = _sleeper(tmp_path, os.getpid())  # started by a live kpatch (this process): not an orphan
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.mkdir()
    outside = _sleeper(elsewhere, int(dead.stdout))  # an orphan, but not in the folders looked at
    try:
        assert [o.pid for o in orphans([tmp_path])] == [orphan.pid]
        assert [o.pid for o in stop_orphans([tmp_path])] == [orphan.pid]
        assert orphan.wait(timeout=5) == -9
        assert ours.poll() is None and outside.poll() is None
    finally:
        for proc in (orphan, ours, outside):
            proc.kill()
            proc.wait()


def test_a_git_write_failure_on_a_full_disk_is_named_with_its_place() -> None:
    said = "fatal: unable to write new index file: No space left on device '/usr/share/git-core/templates/x'"
    problem = storage_problem(["init", "--quiet", "--bare", "--"], said, None)
    assert problem is not None and problem.startswith("no space left on device: git init could not write")
    assert "/usr/" not in problem  # git's template source is not where it could not write
    # A conflict is not a storage problem, even with a write-sounding word, while the disk has room.
    assert storage_problem(["am"], "error: patch failed: a.txt:3\nCould not build fake ancestor", Path("/")) is None
    assert storage_problem(["am"], "fatal: could not write index", Path("/")) is None  # room on /: not a full disk


@pytest.mark.parametrize(("args", "verb"), [(["-c", "protocol.allow=never", "fetch", "--", "url"], "fetch"),
                                            (["worktree", "add", "--quiet", "/x"], "worktree add"),
                                            (["am", "-3", "--", "/p/0001.patch"], "am"), ([], "git")])
def test_the_git_command_named_in_a_storage_error(args: list[str], verb: str) -> None:
    assert _verb(args) == verb


def test_the_second_writer_is_refused_naming_the_first(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    with exclusive([lock], "apply") as notes:
        assert notes == []
        code = f"from pathlib import Path\nfrom kpatch.project.exclusive import exclusive\n" \
               f"with exclusive([Path({str(lock)!r})], 'rebase'):\n    pass\n"
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert child.returncode != 0 and f"pid {os.getpid()}: kpatch apply" in child.stderr
        assert WorktreeError.__name__ in child.stderr
    assert lock.read_text() == ""  # released: no holder named any more


def test_every_kpatch_temp_folder_is_made_by_scratch_so_a_killed_ones_is_swept() -> None:
    """A temp folder named `kpatch-...` but made by tempfile directly carries no pid: a kill leaves it (and the
    patch text in it) for good. Only scratch.py makes them (scratch.folder / scratch.make)."""
    import re

    made_elsewhere = []
    for source in sorted((Path(__file__).resolve().parents[2] / "kpatch").rglob("*.py")):
        # demo/pipeline.py: `demo --keep` leaves its folder for the person
        if source.name == "scratch.py" or source.parts[-2:] == ("demo", "pipeline.py"):
            continue
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"(TemporaryDirectory|mkdtemp)\(prefix=f?\"kpatch-", line):
                made_elsewhere.append(f"{source.name}:{number}")
    assert made_elsewhere == []


def _held_naming_a_dead_kpatch(lock: Path, seconds: float) -> subprocess.Popen[bytes]:
    """A process that holds `lock` for `seconds` while the file names a kpatch that has ended: what a killed
    kpatch's forked child, still ending, leaves for a moment."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    holder = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, json, os, sys, time
fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.pwrite(fd, json.dumps({{"pid": {int(dead.stdout)}, "command": "rebase", "since": 0}}).encode(), 0)
print("held", flush=True)
time.sleep({seconds})
"""], stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    return holder


def test_a_lock_naming_a_dead_kpatch_but_still_held_is_taken_once_the_holder_ends(tmp_path: Path) -> None:
    """Seen in CI: the next command right after a SIGKILL failed with "another kpatch is writing here (pid N)"
    although pid N was dead: a child it had forked was still ending, and held the lock until it had."""
    lock = tmp_path / "lock"
    holder = _held_naming_a_dead_kpatch(lock, 1.0)
    try:
        with exclusive([lock], "rebase") as notes:
            assert holder.poll() is not None  # taken only once the holder had ended
            assert any("ended without releasing it" in note for note in notes), notes
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_naming_a_dead_kpatch_held_on_and_on_is_reported_as_held_by_what_it_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kpatch.project.exclusive as module

    monkeypatch.setattr(module, "_DYING", 0.3)
    lock = tmp_path / "lock"
    holder = _held_naming_a_dead_kpatch(lock, 60)
    try:
        with pytest.raises(WorktreeError, match="which has ended: a process it started holds the lock still"), \
                exclusive([lock], "rebase"):
            pass
    finally:
        holder.kill()
        holder.wait()
