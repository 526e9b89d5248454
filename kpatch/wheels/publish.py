"""Putting the built set into the out folder: every wheel staged, renamed in, and the lock written last."""

from __future__ import annotations

import shutil
from pathlib import Path

from kpatch.errors import BuildError, KpatchError
from kpatch.wheels import lock


def publish(out: Path, wheels: list[Path], content: lock.Lock) -> Path:
    """Stage every wheel in `out`, then rename them in and write the lock last. On any failure nothing new is
    left behind: a lock on disk always names wheels that are there, and no wheel appears without its lock."""
    staged: dict[Path, Path] = {}
    new: list[Path] = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for wheel in wheels:
            staging = out / f".{wheel.name}.kpatch-new"
            staged[staging] = out / wheel.name
            shutil.copyfile(wheel, staging)
        for staging, target in staged.items():
            if not target.exists():
                new.append(target)
            staging.replace(target)
        return lock.write(out, content)
    except (OSError, KpatchError) as err:
        for target in new:
            target.unlink(missing_ok=True)
        if isinstance(err, KpatchError):
            raise
        raise BuildError(f"cannot write the wheels to {out}: {err.strerror}") from None
    finally:
        for staging in staged:
            staging.unlink(missing_ok=True)
