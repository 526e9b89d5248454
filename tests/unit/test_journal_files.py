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


# --- files staged ahead (journal.Stager: import stages each patch file as it is read) ---------------------------------


def test_files_staged_ahead_are_taken_as_they_are_and_end_as_a_plain_write_ends(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    root, folder = tmp_path / "project", tmp_path / "journal"
    writes, deletes = setup(root)
    plain_root = tmp_path / "plain"
    plain_writes, plain_deletes = setup(plain_root)
    staged = journal.Stager(folder, "import")
    for path, data in writes.items():
        staged.put(path, data)
    assert (tmp_path / "journal.staging" / "new").is_dir()
    assert journal.pending(folder) is None  # a kill now leaves a leftover the next writer sweeps, not a pending write
    written: list[str] = []
    from kpatch.files import write_atomic as real

    def write_atomic(path: Path, data: bytes, **kwargs: object) -> None:
        written.append(path.name)
        real(path, data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(journal, "write_atomic", write_atomic)
    assert journal.write(folder, "import", writes, deletes, staged) == STEPS
    journal.close(folder)
    staged.abandon()  # taken: nothing of it is left to remove, and the files stay
    assert written == [journal.JOURNAL]  # only the commit point: every new file was staged (and fsynced) already
    assert journal.write(tmp_path / "plain-journal", "import", plain_writes, plain_deletes) == STEPS
    journal.close(tmp_path / "plain-journal")
    assert files(root) == files(plain_root)
    assert not (tmp_path / "journal.staging").exists() and not folder.exists()


def test_a_file_staged_with_other_bytes_is_written_again_with_the_ones_given(tmp_path: Path) -> None:
    root, folder = tmp_path / "project", tmp_path / "journal"
    writes, deletes = setup(root)
    staged = journal.Stager(folder, "import")
    for path in writes:
        staged.put(path, b"an earlier render\n")
    journal.write(folder, "import", writes, deletes, staged)
    journal.close(folder)
    assert {name: data for name, (data, _mode) in files(root).items()} == {
        "kpatch.toml": b"new toml\n", "patches/series": b"new series\n", "patches/0001-a.patch": b"new a\n",
        "patches/0003-c.patch": b"new c\n"}


def test_what_was_staged_for_a_write_that_never_came_is_removed(tmp_path: Path) -> None:
    root, folder = tmp_path / "project", tmp_path / "journal"
    writes, _ = setup(root)
    old = files(root)
    staged = journal.Stager(folder, "import")
    for path, data in writes.items():
        staged.put(path, data)
    staged.abandon()
    assert not (tmp_path / "journal.staging").exists() and journal.pending(folder) is None
    assert files(root) == old


def test_nothing_is_staged_beside_a_pending_journal_and_the_write_is_refused_as_before(tmp_path: Path) -> None:
    root, folder = tmp_path / "project", tmp_path / "journal"
    writes, deletes = setup(root)
    (folder / "new").mkdir(parents=True)
    (folder / "operation").write_text("rebase")
    staged = journal.Stager(folder, "import")
    for path, data in writes.items():
        staged.put(path, data)
    assert not (tmp_path / "journal.staging").exists()
    with pytest.raises(WorktreeError, match="an interrupted write is pending: run 'kpatch rebase --continue'"):
        journal.write(folder, "import", writes, deletes, staged)


def test_a_file_holding_the_bytes_is_moved_into_the_staging_and_ends_as_a_plain_write_ends(tmp_path: Path) -> None:
    root, folder = tmp_path / "project", tmp_path / "journal"
    writes, deletes = setup(root)
    plain_root = tmp_path / "plain"
    plain_writes, plain_deletes = setup(plain_root)
    holders = tmp_path / "written-by-git"
    holders.mkdir()
    staged = journal.Stager(folder, "import")
    for index, (path, data) in enumerate(writes.items()):
        (holders / str(index)).write_bytes(data)
        (holders / str(index)).chmod(0o600)  # the staged copy gets the target's mode all the same
        staged.put(path, data, holders / str(index))
    assert not list(holders.iterdir())  # moved, not copied
    assert journal.write(folder, "import", writes, deletes, staged) == STEPS
    journal.close(folder)
    journal.write(tmp_path / "plain-journal", "import", plain_writes, plain_deletes)
    journal.close(tmp_path / "plain-journal")
    assert files(root) == files(plain_root)
