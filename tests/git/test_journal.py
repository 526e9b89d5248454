"""Every journaled write resumable and abortable through one path: kpatch is SIGKILLed after EACH step of the
journal (KPATCH_TEST_KILL_AT=journal:N, N = 0 once staged, before the commit point), for export and for rebase;
from each killed state (copied first) `--continue` and `--abort` are run separately. kpatch.toml and patches/
end byte-identical to the old files or to an uninterrupted run's, never mixed, and the worktrees agree.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kpatch.errors import ExitCode
from tests.support.gitrepos import Project, git
from tests.support.killing import copy_tree, tracked_files
from tests.support.rebase_repos import FILES, make_rebase_project, replace_line


@dataclass
class Saved:
    """Folders copied aside and put back at the same paths (worktrees link to their mirror by absolute path)."""

    folders: list[Path]
    store: Path

    def save(self, name: str) -> None:
        for index, folder in enumerate(self.folders):
            copy_tree(folder, self.store / name / str(index))

    def restore(self, name: str) -> None:
        for index, folder in enumerate(self.folders):
            copy_tree(self.store / name / str(index), folder)


def kpatch(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kpatch", *args], cwd=root, text=True, capture_output=True,
                          env={**os.environ, **(env or {})}, timeout=300)


def heads(root: Path, names: tuple[str, ...]) -> dict[str, str]:
    return {n: git(root / "work" / n, "rev-parse", "HEAD") for n in names}


@dataclass(frozen=True)
class End:
    """What a recovery must leave: kpatch.toml and patches/ (hashes), the worktrees' heads, the run state."""

    files: dict[str, str]
    heads: dict[str, str]
    state: bytes

    @classmethod
    def of(cls, root: Path, names: tuple[str, ...]) -> End:
        return cls(tracked_files(root), heads(root, names), (root / ".kpatch" / "state.json").read_bytes())

    def describe(self, old: End, new: End) -> str:
        files = "old" if self.files == old.files else "new" if self.files == new.files else "MIXED"
        moved = "old" if self.heads == old.heads else "new" if self.heads == new.heads else "mixed"
        state = "old" if self.state == old.state else "new" if self.state == new.state else "other"
        return f"{files} files, {moved} heads, {state} run state"


def kill_at_each_step(root: Path, saved: Saved, command: list[str], operation: str, old: End, new: End,
                      names: tuple[str, ...], extra_check: Callable[[str], None]) -> int:
    """Kill `command` after each journal step, then just before the journal is dropped; check --continue and
    --abort from each killed state. Returns the number of steps."""
    steps: list[int | str] = list(range(1000))
    for index, step in enumerate(steps):
        saved.restore("before")
        killed = kpatch(root, *command, env={"KPATCH_TEST_KILL_AT": f"journal:{step}"})
        if killed.returncode != -signal.SIGKILL:
            assert killed.returncode == 0, killed.stderr
            assert index > 1, "the journal had no step to kill at"
            check_killed_at_close(root, saved, command, operation, old, new, names, extra_check)
            return index  # past the last step: the run finished
        state = json.loads(kpatch(root, "status", "--json").stdout)["result"]
        assert state["journal"] == operation, f"step {step}: status does not show the interrupted {operation}"
        if index == 0:  # (the same refusal at every step: once is enough)
            refused = kpatch(root, "apply")
            assert refused.returncode == ExitCode.WORKTREE and f"kpatch {operation} --continue" in refused.stderr
        recover_both_ways(root, saved, operation, old, new, names, extra_check, step)
    raise AssertionError("the journal never ended")


def recover_both_ways(root: Path, saved: Saved, operation: str, old: End, new: End, names: tuple[str, ...],
                      extra_check: Callable[[str], None], step: int | str) -> None:
    saved.save("killed")
    for verb, expected in (("continue", new), ("abort", old)):
        saved.restore("killed")
        done = kpatch(root, operation, f"--{verb}")
        assert done.returncode == 0, f"step {step} --{verb}: {done.stderr}"
        end = End.of(root, names)
        assert end == expected, f"step {step} --{verb}: {end.describe(old, new)}"
        after = json.loads(kpatch(root, "status", "--json").stdout)["result"]
        assert after["journal"] is None and after["operation"] is None
        assert not (root / ".kpatch" / "journal").exists()
        extra_check(verb)


def check_killed_at_close(root: Path, saved: Saved, command: list[str], operation: str, old: End, new: End,
                          names: tuple[str, ...], extra_check: Callable[[str], None]) -> None:
    """Killed once finished, just before dropping the journal: a run whose last write (the run state) was
    made is finished; otherwise --continue and --abort still work from there."""
    saved.restore("before")
    killed = kpatch(root, *command, env={"KPATCH_TEST_KILL_AT": "journal:close"})
    assert killed.returncode == -signal.SIGKILL
    status = json.loads(kpatch(root, "status", "--json").stdout)["result"]
    if status["journal"] is None:  # finished: nothing to recover, everything new
        assert status["operation"] is None and End.of(root, names) == new
        nothing = kpatch(root, operation, "--continue")
        assert nothing.returncode == ExitCode.WORKTREE and "nothing to continue" in nothing.stderr
        assert not (root / ".kpatch" / "journal").exists()  # the next writer drops the finished run's journal
        assert End.of(root, names) == new
        extra_check("continue")
    else:
        recover_both_ways(root, saved, operation, old, new, names, extra_check, "close")


def test_export_killed_at_each_journal_step_continues_or_aborts(project: Project, tmp_path: Path) -> None:
    assert project.run("apply").exit_code == 0
    kernels, app = project.workdir / "kernels", project.workdir / "app"
    git(kernels, "commit", "-q", "--amend", "-m", "Test the kimi op\n\nWith a longer message.\n\n"
        "Upstream-Status: pending")
    (kernels / "csrc" / "more.cpp").write_text("// more\n")
    git(kernels, "add", "csrc/more.cpp")
    git(kernels, "commit", "-qm", "Add more\n\nUpstream-Status: pending")
    git(app, "reset", "-q", "--hard", "HEAD~1")  # the app's second patch goes away
    names = ("kernels", "app")
    cache = project.root.parent / "home" / ".cache" / "kpatch"
    saved = Saved([project.root, cache], tmp_path / "saved")
    saved.save("before")
    old = End.of(project.root, names)
    assert kpatch(project.root, "export").returncode == 0
    new = End.of(project.root, names)
    assert new.state != old.state  # the worktrees' commits are now exported
    changed = {k for k in set(old.files) | set(new.files) if old.files.get(k) != new.files.get(k)}
    assert len(changed) == 5, changed  # kernels: a reworded and an added patch + series; app: a removed one + series

    def check(verb: str) -> None:
        result = kpatch(project.root, "export", "--check")
        assert result.returncode == (0 if verb == "continue" else ExitCode.CONFLICT), result.stderr

    steps = kill_at_each_step(project.root, saved, ["export"], "export", old, new, names, check)
    assert steps == len(changed) + 2  # killed once staged (0) and after each step: the 5 files and the run state


def test_rebase_killed_at_each_journal_step_continues_or_aborts(tmp_path: Path) -> None:
    rp = make_rebase_project(tmp_path / "rp")
    names = ("kernels", "app")
    assert rp.run("apply").exit_code == 0
    old = End.of(rp.root, names)
    assert rp.run("rebase").exit_code == ExitCode.CONFLICT
    tree = rp.root / "work" / ".rebase" / "kernels"
    (tree / "c.txt").write_text(replace_line(FILES["c"], 15, "c line 15 rewritten upstream, fixed by us"))
    git(tree, "add", "c.txt")
    cache = rp.root.parent.parent / "home" / ".cache" / "kpatch"
    saved = Saved([rp.root, cache], tmp_path / "saved")
    saved.save("before")
    assert kpatch(rp.root, "rebase", "--continue").returncode == 0
    new = End.of(rp.root, names)
    assert new.files != old.files and new.heads != old.heads
    assert any(k.startswith("patches/.rerere/kernels/") for k in new.files)  # the resolution is recorded

    def check(_verb: str) -> None:
        assert not (rp.root / "work" / ".rebase").exists()
        assert kpatch(rp.root, "export", "--check").returncode == 0  # the worktrees match the files

    steps = kill_at_each_step(rp.root, saved, ["rebase", "--continue"], "rebase", old, new, names, check)
    changed = {k for k in set(old.files) | set(new.files) if old.files.get(k) != new.files.get(k)}
    assert steps == len(changed) + 1


def test_a_kill_while_the_journal_is_staged_or_dropped_leaves_no_half_journal(project: Project,
                                                                               tmp_path: Path) -> None:
    """The journal folder appears and goes by one rename each: killed while it is staged, or after it was renamed
    away but before it was removed (when a command finishes, or when --abort has put the files back), status shows
    nothing interrupted, the files are wholly old or new, and the next writer removes the leftover."""
    assert project.run("apply").exit_code == 0
    git(project.workdir / "kernels", "commit", "-q", "--amend", "-m", "Test the kimi op\n\nReworded.")
    names = ("kernels", "app")
    cache = project.root.parent / "home" / ".cache" / "kpatch"
    saved = Saved([project.root, cache], tmp_path / "saved")
    saved.save("before")
    old = End.of(project.root, names)
    assert kpatch(project.root, "export").returncode == 0
    new = End.of(project.root, names)
    assert new.files != old.files
    kpatch_dir = project.root / ".kpatch"

    def killed(point: str, *command: str) -> None:
        run = kpatch(project.root, *command, env={"KPATCH_TEST_KILL_AT": point})
        assert run.returncode == -signal.SIGKILL, f"{point}: {run.stderr}"
        status = json.loads(kpatch(project.root, "status", "--json").stdout)["result"]
        assert status["journal"] is None and status["operation"] is None, point

    for point, leftover, end in (("journal:staging", "journal.staging", old), ("journal:dropped", "journal.dropped",
                                                                                new)):
        saved.restore("before")
        killed(point, "export")
        assert (kpatch_dir / leftover).is_dir() and not (kpatch_dir / "journal").exists()
        assert End.of(project.root, names) == end, point
        assert kpatch(project.root, "export").returncode == 0  # a writer: it finishes the job and sweeps
        assert End.of(project.root, names) == new and not (kpatch_dir / leftover).exists()
    saved.restore("before")
    assert kpatch(project.root, "export", env={"KPATCH_TEST_KILL_AT": "journal:1"}).returncode == -signal.SIGKILL
    killed("journal:dropped", "export", "--abort")  # --abort put every file back, then was killed dropping
    assert End.of(project.root, names) == old
