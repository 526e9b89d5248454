"""The journal on plain files: interrupted at every step, forward gives all new files and back all old ones."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kpatch.errors import WorktreeError
from kpatch.project import journal


class Interrupted(Exception):
    """Stands in for the SIGKILL the real test seam sends (this test runs inside pytest's own process)."""


def files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
            for p in sorted(root.rglob("*")) if p.is_file()}


def setup(root: Path) -> tuple[dict[Path, bytes], list[Path]]:
    """Three files of different modes to change, one to add, one to delete."""
    (root / "patches").mkdir(parents=True)
    for name, mode in (("kpatch.toml", 0o664), ("patches/series", 0o600), ("patches/0001-a.patch", 0o644),
                       ("patches/0002-b.patch", 0o640)):
        (root / name).write_text(f"old {name}\n")
        (root / name).chmod(mode)
    writes = {root / "kpatch.toml": b"new toml\n", root / "patches/series": b"new series\n",
              root / "patches/0001-a.patch": b"new a\n", root / "patches/0003-c.patch": b"new c\n"}
    return writes, [root / "patches/0002-b.patch"]


STEPS = 5  # four writes and one delete


@pytest.mark.parametrize("stop", range(STEPS + 1))
@pytest.mark.parametrize("then", ["forward", "back"])
def test_a_journal_stopped_at_any_step_ends_fully_new_or_fully_old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   stop: int, then: str) -> None:
    root, folder = tmp_path / "project", tmp_path / "journal"
    writes, deletes = setup(root)
    old = files(root)

    def hook(step: int) -> None:
        if step == stop:
            raise Interrupted

    monkeypatch.setattr(journal, "_hook", hook)
    with pytest.raises(Interrupted):
        journal.write(folder, "rebase", writes, deletes)
    assert journal.pending(folder) == "rebase" and journal.committed(folder) == (stop > 0)
    monkeypatch.setattr(journal, "_hook", lambda step: None)
    with pytest.raises(WorktreeError, match="an interrupted write is pending: run 'kpatch rebase --continue'"):
        journal.write(folder, "export", {}, [])
    if then == "forward" and journal.committed(folder):
        journal.forward(folder)
        journal.close(folder)
        umask = os.umask(0)
        os.umask(umask)
        assert files(root) == {"kpatch.toml": (b"new toml\n", 0o664), "patches/series": (b"new series\n", 0o600),
                               "patches/0001-a.patch": (b"new a\n", 0o644),
                               "patches/0003-c.patch": (b"new c\n", 0o666 & ~umask)}  # a new file: as `touch` makes it
    else:  # going back, or forward before the commit point (nothing was written: staging is dropped)
        journal.back(folder)
        assert files(root) == old
    assert journal.pending(folder) is None and not folder.exists()


def test_an_unchanged_file_is_not_a_step(tmp_path: Path) -> None:
    root, folder = tmp_path / "project", tmp_path / "journal"
    writes, _ = setup(root)
    writes[root / "kpatch.toml"] = (root / "kpatch.toml").read_bytes()
    assert journal.write(folder, "export", writes, []) == 3
    journal.close(folder)
