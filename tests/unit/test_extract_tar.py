"""kpatch.files.extract_tar: what a local build or test run unpacks from the source kpatch packed for it."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from kpatch.files import extract_tar


def _tar(members: dict[str, bytes]) -> tarfile.TarFile:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    data.seek(0)
    return tarfile.open(fileobj=data)


def test_a_plain_source_tar_is_extracted_file_for_file(tmp_path: Path) -> None:
    with _tar({"src/setup.py": b"print('built')\n", "src/pkg/__init__.py": b""}) as tar:
        extract_tar(tar, tmp_path)
    assert (tmp_path / "src" / "setup.py").read_bytes() == b"print('built')\n"
    assert (tmp_path / "src" / "pkg" / "__init__.py").is_file()


def test_a_member_that_climbs_out_of_the_folder_is_refused_and_nothing_lands_outside(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    with _tar({"../escaped.txt": b"no\n"}) as tar, pytest.raises(tarfile.TarError):
        extract_tar(tar, dest)
    assert not (tmp_path / "escaped.txt").exists()
