"""Many files changed as one step (rebase, export, anything later): all of them or none, whatever kills kpatch.

1. Stage: every new content goes to `<journal>/new/<n>`, every file it replaces is copied to `<journal>/old/<n>`.
2. Commit point: `<journal>/journal.json` is written (atomically, durably); it lists the steps.
3. Forward: each staged file is renamed over its target, each deleted file removed. A step whose staged file
   is gone is done, so going forward again after a kill finishes the job.
4. Close: the command finishes what depends on the files (e.g. moving worktrees), then drops the journal.
Going back puts every target as it was from the copies. Without `journal.json` nothing was touched yet: both
ways only drop the staging folder. `--continue` goes forward and `--abort` goes back, for every command.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import stat
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from kpatch.errors import WorktreeError
from kpatch.files import new_file_mode, sync_files, write_atomic

JOURNAL = "journal.json"
KILL_HOOK = "KPATCH_TEST_KILL_AT"  # test seam: "journal:N" SIGKILLs kpatch after N steps (0 = once staged),
# "journal:close" once the command is finished, just before the journal is dropped


@dataclass(frozen=True)
class Step:
    target: str
    new: str | None  # staged file name (None: the target is deleted)
    old: str | None  # copy of the target as it was (None: it did not exist)


def pending(folder: Path) -> str | None:
    """The operation whose journaled write was interrupted ("rebase", "export"...), or None."""
    if not folder.is_dir():
        return None
    try:
        return str(json.loads((folder / JOURNAL).read_text(encoding="utf-8"))["operation"])
    except (OSError, ValueError, KeyError, TypeError):
        marker = folder / "operation"
        return marker.read_text(encoding="utf-8").strip() if marker.is_file() else "unknown"


def committed(folder: Path) -> bool:
    """True once the journal is written: the change must then be finished (forward) or undone (back)."""
    return (folder / JOURNAL).is_file()


def write(folder: Path, operation: str, writes: Mapping[Path, bytes], deletes: Iterable[Path]) -> int:
    """Change every file in `writes` and delete every one in `deletes` as one step; return how many changed."""
    if folder.exists():
        raise WorktreeError(f"{folder}: an interrupted write is pending: run 'kpatch {pending(folder)} --continue' "
                            "or '--abort' first")
    (folder / "new").mkdir(parents=True)
    (folder / "old").mkdir()
    (folder / "operation").write_text(operation, encoding="utf-8")
    steps: list[Step] = []
    try:
        for index, (path, data) in enumerate(sorted(writes.items())):
            if path.is_file() and not path.is_symlink() and path.read_bytes() == data:
                continue
            mode = stat.S_IMODE(path.stat().st_mode) if path.is_file() else new_file_mode()
            write_atomic(folder / "new" / str(index), data, mode=mode, durable=False)  # made durable below
            steps.append(Step(target=str(path), new=str(index), old=_keep(folder, path, f"w{index}")))
        for index, path in enumerate(sorted(set(deletes))):
            if path.exists() or path.is_symlink():
                steps.append(Step(target=str(path), new=None, old=_keep(folder, path, f"d{index}")))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    sync_files(folder / "new", [folder / "new" / s.new for s in steps if s.new is not None])
    _hook(0)
    write_atomic(folder / JOURNAL, json.dumps({"operation": operation, "steps": [asdict(s) for s in steps]},
                                              indent=1).encode())
    forward(folder)
    return len(steps)


def forward(folder: Path) -> None:
    """Carry out (the rest of) a committed journal; the caller closes it once its command is finished."""
    for number, step in enumerate(_steps(folder), start=1):
        target = Path(step.target)
        if step.new is None:
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
        else:
            staged = folder / "new" / step.new
            if staged.exists():
                _move(staged, target)
        _hook(number)


def close(folder: Path) -> None:
    """The command is finished: drop the journal (its copies of the old files with it)."""
    _hook("close")
    shutil.rmtree(folder, ignore_errors=True)


def back(folder: Path) -> None:
    """Undo a committed journal (every target as it was), then drop it; without one, only drop the staging."""
    for step in _steps(folder):
        target = Path(step.target)
        if step.old is None:
            target.unlink(missing_ok=True)
        else:
            kept = folder / "old" / step.old
            write_atomic(target, kept.read_bytes(), mode=stat.S_IMODE(kept.stat().st_mode))
    shutil.rmtree(folder)


def _steps(folder: Path) -> list[Step]:
    if not (folder / JOURNAL).is_file():
        return []
    raw = json.loads((folder / JOURNAL).read_text(encoding="utf-8"))
    return [Step(**item) for item in raw["steps"]]


def _keep(folder: Path, path: Path, name: str) -> str | None:
    """Copy the file `path` into the journal (mode included) so that going back can restore it."""
    if not path.is_file() or path.is_symlink():
        return None
    shutil.copy2(path, folder / "old" / name)
    return name


def _move(staged: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(staged, target)
    except OSError as err:
        if err.errno != errno.EXDEV:
            raise
        write_atomic(target, staged.read_bytes(), mode=stat.S_IMODE(staged.stat().st_mode))
        staged.unlink()


def _hook(step: int | str) -> None:
    if os.environ.get(KILL_HOOK) == f"journal:{step}":
        os.kill(os.getpid(), signal.SIGKILL)
