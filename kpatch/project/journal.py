"""Many files changed as one step (rebase, export, anything later): all of them or none, whatever kills kpatch.

1. Stage: every new content goes to `<journal>/new/<n>`, every file it replaces is copied to `<journal>/old/<n>`.
2. Commit point: `<journal>/journal.json` is written (atomically, durably); it lists the steps.
3. Forward: each staged file is renamed over its target, each deleted file removed. A step whose staged file
   is gone is done, so going forward again after a kill finishes the job.
4. Close: the command finishes what depends on the files (e.g. moving worktrees), then drops the journal.
The journal folder appears and goes in one rename each: it is staged as `journal.staging` (renamed to `journal`
once its `operation` marker is written) and dropped by a rename to `journal.dropped` before it is removed, so a
kill never leaves a half-made or half-removed journal that names no operation; the next writer removes the
leftovers (`sweep`). A `Stager` puts new contents in `journal.staging/new/` (and fsyncs them) while the command
still makes the rest (import: as format-patch writes each patch); the step is the same from the rename on.
Going back puts every target as it was from the copies. Without `journal.json` nothing was touched yet: both
ways only drop the staging folder. `--continue` goes forward and `--abort` goes back, for every command.

The journal is `<project>/.kpatch/journal` (a release line's: `.kpatch/lines/<line>/journal`), and nothing in it is
trusted: a step's target must be a file of the project (kpatch.toml, patches/, the run state; resolved, so no
symlink leads out of it), its staged and kept copies names this module gives, each a regular file (a copy that is a
symlink is never moved into the project nor read through) in the journal's own `new/` and `old/` folders (no
symlink either). A journal that cannot be read (or breaks those rules) cannot go forward; going back sets it aside
(`.kpatch/journal-unreadable-<time>`), leaving the files as they are.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kpatch import killseam
from kpatch.errors import WorktreeError
from kpatch.files import fsync_file, new_file_mode, open_regular, removals_done, remove_later, sync_files, write_atomic

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

JOURNAL = "journal.json"
KILL_HOOK = killseam.KILL_AT  # test seam: "journal:N" SIGKILLs kpatch after N steps (0 = once staged),
# "journal:close" once the command is finished, just before the journal is dropped, "journal:dropped" once it is
# renamed away and before it is removed, "journal:staging" while a new journal is staged under its own name
_LEFTOVERS = (".staging", ".dropped")  # siblings of the journal folder a kill can leave: never a pending journal


@dataclass(frozen=True)
class Step:
    target: str
    new: str | None  # staged file name (None: the target is deleted)
    old: str | None  # copy of the target as it was (None: it did not exist)


OPERATIONS = ("rebase", "export", "import", "propose", "backport")  # the commands that write through a journal
_STAGED = re.compile(r"^[0-9]+$")  # the names `write` gives: new/<n>, old/w<n> and old/d<n>
_KEPT = re.compile(r"^[wd][0-9]+$")
_STATE = re.compile(r"^\.kpatch/(?:lines/[a-z0-9][a-z0-9._-]*/)?state\.json$")  # main's run state, or a line's


def pending(folder: Path) -> str | None:
    """The operation whose journaled write was interrupted (one of OPERATIONS), or None. One whose journal
    cannot be read is "export" unless its `operation` marker names another: `--abort` of either sets it aside."""
    if not folder.is_dir():
        return None
    try:
        named = json.loads((folder / JOURNAL).read_text(encoding="utf-8"))["operation"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        marker = folder / "operation"
        try:
            named = marker.read_text(encoding="utf-8").strip() if marker.is_file() else None
        except (OSError, ValueError):
            named = None
    return named if named in OPERATIONS else "export"


def problem(folder: Path) -> str | None:
    """Why the committed journal in `folder` cannot be carried out or undone (None: it can, or there is none)."""
    try:
        _steps(folder)
    except WorktreeError as err:
        return str(err)
    return None


def committed(folder: Path) -> bool:
    """True once the journal is written: the change must then be finished (forward) or undone (back)."""
    return (folder / JOURNAL).is_file()


class Stager:
    """The new contents of a journaled write, staged while the command still makes the rest (`put`): each file
    goes to the staging folder, which a kill leaves as a leftover the next writer sweeps (never a pending
    journal), and is fsynced in a thread as it comes. `write` then takes them as they are (the same bytes and
    mode), so what is left for it is the folder's rename, the entries' fsyncs and the commit point. Nothing is
    refused here: a file that could not be staged or made durable is written by `write` as always (and fails
    there, in its words); `abandon` removes the staging of a write that never came."""

    def __init__(self, folder: Path, operation: str) -> None:
        self.folder, self.operation = folder, operation
        self._staging = folder.with_name(folder.name + ".staging")
        self._ready: bool | None = None  # None: not made yet; False: not staging (a pending journal, an error)
        self._staged: dict[Path, tuple[str, bytes, int, Future[None]]] = {}  # target -> name in new/, bytes, mode
        self._count = 0
        self._pool: ThreadPoolExecutor | None = None

    def put(self, target: Path, data: bytes, holding: Path | None = None) -> None:
        """Stage `data` as the new content of `target`; `holding`: a file of the caller's that holds exactly
        `data`, moved here instead of written again (creating a file costs more than moving one)."""
        if self._ready is None:
            self._ready = self._make()
        if not self._ready:
            return
        name = str(self._count)
        self._count += 1
        staged = self._staging / "new" / name
        try:
            mode = stat.S_IMODE(target.stat().st_mode) if target.is_file() else new_file_mode()
            if not self._moved(holding, staged, mode):
                fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fchmod(handle.fileno(), mode)
        except OSError:
            self._ready = False  # write() writes them all, as it always did
            return
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kpatch-sync")
        self._staged[target] = (name, data, mode, self._pool.submit(fsync_file, self._staging / "new" / name))

    @staticmethod
    def _moved(holding: Path | None, staged: Path, mode: int) -> bool:
        """Whether `holding` (a regular file) is `staged` now, with `mode`."""
        if holding is None:
            return False
        try:
            if not stat.S_ISREG(os.lstat(holding).st_mode) or os.path.lexists(staged):
                return False
            holding.rename(staged)  # another file system (EXDEV): written instead
        except OSError:
            return False
        staged.chmod(mode)
        return True

    def _make(self) -> bool:
        if self.folder.exists():  # a pending journal: write() refuses
            return False
        try:
            shutil.rmtree(self._staging, ignore_errors=True)
            (self._staging / "new").mkdir(parents=True)
            (self._staging / "old").mkdir()
            (self._staging / "operation").write_text(self.operation, encoding="utf-8")
        except OSError:
            return False
        return True

    def take(self, operation: str) -> tuple[dict[Path, tuple[str, bytes, int]], int] | None:
        """The files staged and made durable ({target: (name in new/, bytes, mode)}) and how many names were
        given, once every fsync is done; None when nothing is staged (write() stages everything itself)."""
        if not self._ready or operation != self.operation:
            return None
        self._ready = False  # taken: the staging folder is write()'s now
        durable = {}
        for target, (name, data, mode, synced) in self._staged.items():
            if synced.exception() is None:
                durable[target] = (name, data, mode)
        self._close()
        return durable, self._count

    def abandon(self) -> None:
        """Remove what was staged, when write() did not take it."""
        self._close()
        if self._ready:
            self._ready = False
            shutil.rmtree(self._staging, ignore_errors=True)

    def _close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def write(folder: Path, operation: str, writes: Mapping[Path, bytes], deletes: Iterable[Path],
          staged: Stager | None = None) -> int:
    """Change every file in `writes` and delete every one in `deletes` as one step; return how many changed.
    `staged`: files of `writes` staged already (the same bytes are taken as they are)."""
    if folder.exists():
        raise WorktreeError(f"{folder}: an interrupted write is pending: run 'kpatch {pending(folder)} --continue' "
                            "or '--abort' first")
    staging = folder.with_name(folder.name + ".staging")
    taken = staged.take(operation) if staged is not None else None
    ready, given = taken if taken is not None else ({}, 0)
    if taken is None:
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "new").mkdir(parents=True)
        (staging / "old").mkdir()
        (staging / "operation").write_text(operation, encoding="utf-8")
    _hook("staging")
    try:
        staging.replace(folder)
    except BaseException:
        if taken is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    steps: list[Step] = []
    synced: set[str] = set()  # staged names already durable
    try:
        for index, (path, data) in enumerate(sorted(writes.items())):
            early = ready.pop(path, None)
            if path.is_file() and not path.is_symlink() and path.read_bytes() == data:
                continue
            mode = stat.S_IMODE(path.stat().st_mode) if path.is_file() else new_file_mode()
            if early is not None and early[1] == data and early[2] == mode:
                name = early[0]
                synced.add(name)
            else:
                name = str(given + index)
                write_atomic(folder / "new" / name, data, mode=mode, durable=False)  # made durable below
            steps.append(Step(target=str(path), new=name, old=_keep(folder, path, f"w{index}")))
        for index, path in enumerate(sorted(set(deletes))):
            if path.exists() or path.is_symlink():
                steps.append(Step(target=str(path), new=None, old=_keep(folder, path, f"d{index}")))
        for name, _data, _mode in ready.values():  # staged, but not written after all
            (folder / "new" / name).unlink(missing_ok=True)
    except BaseException:
        _drop(folder)
        raise
    # the staged files and the kept ones, and the entries naming them, durable before the commit point below
    sync_files([*(folder / "new" / s.new for s in steps if s.new is not None and s.new not in synced),
                *(folder / "old" / s.old for s in steps if s.old is not None),
                folder / "new", folder / "old", folder, folder.parent])
    _hook(0)
    write_atomic(folder / JOURNAL, json.dumps({"operation": operation, "steps": [asdict(s) for s in steps]},
                                              indent=1).encode())
    forward(folder)
    return len(steps)


# A file other writers share (kpatch.toml: every line's rebase writes its own bases in it): going forward or back,
# its copy is not put over it whole but merged into what it holds now, merge(now, copy) -> what to write.
Merge = Callable[[bytes, bytes], bytes]


def forward(folder: Path, merge: Mapping[Path, Merge] | None = None) -> None:
    """Carry out (the rest of) a committed journal; the caller closes it once its command is finished."""
    for number, step in enumerate(_steps(folder), start=1):
        target = Path(step.target)
        if step.new is None:
            target.unlink(missing_ok=True)
        else:
            staged = folder / "new" / step.new
            if staged.exists():
                if merge and target in merge and target.is_file() and not target.is_symlink() and \
                        not staged.is_symlink():
                    write_atomic(target, merge[target](target.read_bytes(), staged.read_bytes()),
                                 mode=stat.S_IMODE(staged.stat().st_mode))
                    staged.unlink()
                else:
                    _move(staged, target)
        _hook(number)


def close(folder: Path) -> None:
    """The command is finished: drop the journal (its copies of the old files with it)."""
    _hook("close")
    _drop(folder)


def sweep(folder: Path) -> None:
    """Remove what a kill left of a journal being staged or dropped (never a pending journal: see the module)."""
    removals_done()
    for suffix in _LEFTOVERS:
        shutil.rmtree(folder.with_name(folder.name + suffix), ignore_errors=True)


def _drop(folder: Path) -> None:
    """Remove the journal folder: renamed away first (one atomic step), then deleted beside the rest of the command
    (`files.remove_later`: its kept copies were fsynced, so each costs the file system a commit to remove)."""
    dropped = folder.with_name(folder.name + ".dropped")
    removals_done()  # a journal this process dropped before is gone (its name is used again here)
    shutil.rmtree(dropped, ignore_errors=True)
    try:
        folder.replace(dropped)
    except FileNotFoundError:
        return
    _hook("dropped")
    remove_later(dropped)


def resume(folder: Path) -> bool:
    """Finish an interrupted journaled write: True when it had committed (every file written now), False when it
    had not (every file put back: the operation can simply run again)."""
    if not committed(folder):
        back(folder)
        return False
    forward(folder)
    close(folder)
    return True


def back(folder: Path, merge: Mapping[Path, Merge] | None = None) -> Path | None:
    """Undo a committed journal (every target as it was; one in `merge`: its kept copy merged into what it holds
    now), then drop it; without one, only drop the staging. One that cannot be read is set aside instead, the files
    left as they are: return where it went (else None)."""
    if problem(folder):
        aside = folder.with_name(f"journal-unreadable-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}")
        folder.replace(aside)
        return aside
    for step in _steps(folder):
        target = Path(step.target)
        if step.old is None:
            target.unlink(missing_ok=True)
        else:
            with open_regular(folder / "old" / step.old) as kept:  # never through a link planted since
                content = kept.read()
                if merge and target in merge and target.is_file() and not target.is_symlink():
                    content = merge[target](target.read_bytes(), content)
                write_atomic(target, content, mode=stat.S_IMODE(os.fstat(kept.fileno()).st_mode))
    _drop(folder)
    return None


def _steps(folder: Path) -> list[Step]:
    """The journal's steps, each checked (see the module's docstring); a one-line WorktreeError when any is not."""
    path = folder / JOURNAL
    if not path.is_file():
        return []
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict) or raw.get("operation") not in OPERATIONS or \
                not isinstance(raw.get("steps"), list):
            raise ValueError("not a journal kpatch wrote")
        for part in (folder, folder / "new", folder / "old"):
            if part.is_symlink():
                raise ValueError(f"{part.name} is a symlink")
        real = functools.cache(os.path.realpath)  # the project and the targets' folders, each resolved once
        steps = [_step(folder, item, real) for item in raw["steps"]]
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        why = "nested too deeply" if isinstance(err, RecursionError) else \
            err.strerror if isinstance(err, OSError) and err.strerror else str(err).splitlines()[0][:200]
        raise WorktreeError(f"{path}: unreadable journal of an interrupted write ({why}): run 'kpatch "
                            f"{pending(folder)} --abort' to set it aside (kpatch.toml and patches/ stay as they "
                            "are: check them with 'git status')") from None
    return steps


def _step(folder: Path, item: object, real: Callable[[Path], str] = os.path.realpath) -> Step:
    """One step, checked: its target a file of the project (folder is <project>/.kpatch/journal); `real` resolves
    a path (os.path.realpath, or a cache of it)."""
    if not isinstance(item, dict) or set(item) != {"target", "new", "old"}:
        raise ValueError("a step is not {target, new, old}")
    target, new, old = item["target"], item["new"], item["old"]
    if not isinstance(target, str) or not target or "\0" in target:
        raise ValueError(f"step target {target!r} is not a path")
    if not (new is None or (isinstance(new, str) and _STAGED.match(new))) or \
            not (old is None or (isinstance(old, str) and _KEPT.match(old))):
        raise ValueError(f"step of {target!r} names copies the journal does not make")
    root = Path(real(_project(folder)))
    path = Path(target)
    where = Path(real(path.parent)) / path.name  # the last part may be a symlink: it is replaced
    inside = where.relative_to(root).as_posix() if path.is_absolute() and where.is_relative_to(root) else None
    if inside is None or inside in ("", ".") or (inside.startswith(".kpatch/") and not _STATE.match(inside)) \
            or ".git" in Path(inside).parts:
        raise ValueError(f"step target {target!r} is not a file of the project {root}")
    if where.is_dir() and not where.is_symlink():
        raise ValueError(f"step target {target!r} is a folder")
    staged, kept = (folder / "new" / new if new else None), (folder / "old" / old if old else None)
    if staged is not None and (staged.is_symlink() or (staged.exists() and not staged.is_file())):
        raise ValueError(f"the staged copy of {target!r} (new/{new}) is not a regular file")
    if kept is not None and (kept.is_symlink() or not kept.is_file()):
        raise ValueError(f"the kept copy of {target!r} (old/{old}) is not a regular file")
    return Step(target=str(where), new=new, old=old)


def _project(folder: Path) -> Path:
    """The project a journal folder belongs to: `<project>/.kpatch/journal`, or a release line's
    `<project>/.kpatch/lines/<line>/journal`."""
    if folder.parent.parent.name == "lines" and folder.parent.parent.parent.name == ".kpatch":
        return folder.parent.parent.parent.parent
    return folder.parent.parent


def _keep(folder: Path, path: Path, name: str) -> str | None:
    """Copy the file `path` into the journal (mode included) so that going back can restore it."""
    if not path.is_file() or path.is_symlink():
        return None
    shutil.copy2(path, folder / "old" / name)
    return name


def _move(staged: Path, target: Path) -> None:
    if staged.is_symlink():  # planted since the journal was checked: never moved into the project
        raise WorktreeError(f"{staged}: the staged copy is a symlink; run 'kpatch <command> --abort'")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        staged.replace(target)
    except OSError as err:
        if err.errno != errno.EXDEV:
            raise
        write_atomic(target, staged.read_bytes(), mode=stat.S_IMODE(staged.stat().st_mode))
        staged.unlink()


def _hook(step: int | str) -> None:
    killseam.reached(f"journal:{step}")
