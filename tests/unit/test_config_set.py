"""kpatch.toml's [set] table: the torch the whole set builds against."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpatch.config import load
from kpatch.errors import ConfigError

UPSTREAM = """
[[upstream]]
name = "vllm"
url = "https://example.invalid/vllm.git"
branch = "main"
base = "v0.33.0"
patches = "patches/vllm"
"""


def _load(tmp_path: Path, head: str) -> object:
    path = tmp_path / "kpatch.toml"
    path.write_text("version = 1\n" + head + UPSTREAM)
    return load(path).torch


@pytest.mark.parametrize(("value", "expected"), [("2.14.0", "2.14.0"), ("2.14.0+XPU", "2.14.0+xpu")])
def test_set_torch_is_one_normalized_version(tmp_path: Path, value: str, expected: str) -> None:
    assert _load(tmp_path, f'[set]\ntorch = "{value}"\n') == expected


def test_no_set_table_means_no_set_torch(tmp_path: Path) -> None:
    assert _load(tmp_path, "") is None


@pytest.mark.parametrize(("head", "line", "message"), [
    ('[set]\ntorch = ">=2.14"\n', 3, "[set] torch must be one exact version"),
    ('[set]\ntorch = 2.14\n', 3, "[set] torch must be one exact version"),
    ('[set]\ntorch = "2.14.0"\ntorchvision = "0.29.1"\n', 4, "unknown key 'torchvision' in [set]"),
])
def test_bad_set_table_names_file_and_line(tmp_path: Path, head: str, line: int, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, head)
    assert str(err.value).startswith(f"{tmp_path / 'kpatch.toml'}:{line}: ") and message in str(err.value)
