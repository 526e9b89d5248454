"""Folders removed beside a command (files.remove_tree, remove_later): everything under the folder goes, nothing a
symlink in it points at, and removals_done returns only once the folder is gone."""

from __future__ import annotations

from pathlib import Path

from kpatch.files import removals_done, remove_later, remove_tree


def tree_with_links(root: Path, outside: Path) -> Path:
    folder = root / "journal.dropped"
    (folder / "old" / "deeper").mkdir(parents=True)
    for n in range(20):
        (folder / "old" / f"w{n}").write_bytes(b"kept copy\n" * 100)
    (folder / "old" / "deeper" / "d1").write_text("x")
    (folder / "journal.json").write_text("{}")
    outside.mkdir()
    (outside / "precious").write_text("keep me")
    (folder / "old" / "file-link").symlink_to(outside / "precious")
    (folder / "old" / "folder-link").symlink_to(outside)
    return folder


def test_remove_tree_removes_everything_and_follows_no_symlink(tmp_path: Path) -> None:
    folder = tree_with_links(tmp_path, tmp_path / "outside")
    remove_tree(folder)
    assert not folder.exists()
    assert (tmp_path / "outside" / "precious").read_text() == "keep me"


def test_remove_tree_of_a_missing_folder_is_quiet(tmp_path: Path) -> None:
    remove_tree(tmp_path / "gone")
    assert not (tmp_path / "gone").exists()


def test_removals_done_returns_once_the_folders_left_to_remove_later_are_gone(tmp_path: Path) -> None:
    folders = [tree_with_links(tmp_path / str(n), tmp_path / f"outside{n}") for n in range(3)]
    for folder in folders:
        remove_later(folder)
    removals_done()
    assert [f.exists() for f in folders] == [False, False, False]
    assert all((tmp_path / f"outside{n}" / "precious").is_file() for n in range(3))
