"""Where a project's things live on disk, per release line (its run state, reports and work folder), and the cache
folder every project of a user shares."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from kpatch.config.model import MAIN
from kpatch.errors import StorageError, UsageError, WorktreeError
from kpatch.project import state

KPATCH_DIR = ".kpatch"


def recorded_workdir(root: Path, recorded: str, where: Path) -> Path:
    """The work folder the run state remembers (relative: to the project), checked: a folder (or none yet), and
    not one inside another kpatch project (a copied project's file names the original's)."""
    if not recorded.strip() or "\0" in recorded:
        raise WorktreeError(f"{where}: the recorded work folder {recorded!r} is not a path; pass --workdir "
                            "(e.g. --workdir work)")
    workdir = (root / recorded).resolve()
    if workdir.exists() and not workdir.is_dir():
        raise WorktreeError(f"{where}: the recorded work folder {workdir} is not a folder; pass --workdir "
                            "(e.g. --workdir work)")
    project = root.resolve()
    for folder in workdir.parents:
        if folder == project:
            break
        if (folder / "kpatch.toml").is_file() and (folder / KPATCH_DIR).is_dir():
            raise WorktreeError(f"{where}: the recorded work folder {workdir} belongs to the project in {folder}, "
                                "not this one (was the project copied?); pass --workdir (e.g. --workdir work)")
    return workdir


def line_state_dir(root: Path, line: str) -> Path:
    """Where a line's run state lives: `.kpatch/` for main (as before lines), `.kpatch/lines/<line>/` else."""
    return root / KPATCH_DIR if line == MAIN else root / KPATCH_DIR / "lines" / line


def line_reports_dir(root: Path, line: str) -> Path:
    """A line's test reports (and, in nightly/, its night's report and carry history): reports/ for main,
    reports-<line>/ for a release line."""
    return root / ("reports" if line == MAIN else f"reports-{line}")


def line_workdir(root: Path, line: str) -> Path:
    """A line's work folder: the one its last apply used (recorded in its run state), else `work` for main and
    `work-<line>` for a release line (beside main's, never inside it)."""
    where = line_state_dir(root, line) / "state.json"
    recorded = state.read(where)
    if recorded:
        return recorded_workdir(root, recorded.workdir, where)
    return root / ("work" if line == MAIN else f"work-{line}")


def default_cache_dir() -> Path:
    if os.environ.get("KPATCH_CACHE_DIR"):
        return Path(os.environ["KPATCH_CACHE_DIR"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kpatch"


def make_cache_dir(path: Path) -> None:
    """Make the cache folder (and its parents); one that cannot be made is one line naming it: exit 5 on a full
    or read-only disk, else exit 2 (a path no folder can be made at: `--cache-dir /proc/nope`, a file)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        why = f"the cache folder {path} cannot be made ({err.strerror}): give another with --cache-dir or " \
              "KPATCH_CACHE_DIR"
        if err.errno in (errno.ENOSPC, errno.EROFS, errno.EDQUOT):
            raise StorageError(why) from None
        raise UsageError(why) from None
