"""kpatch.toml's [release] table: where `kpatch release --to DIR` is served, what nightly keeps, the torch index."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpatch.config import load
from kpatch.config.model import PYTORCH_XPU_INDEX, Stack
from kpatch.errors import ConfigError, ExitCode, UsageError
from kpatch.wheels.release import target

UPSTREAM = """
[[upstream]]
name = "vllm"
url = "https://example.invalid/vllm.git"
branch = "main"
base = "v0.33.0"
patches = "patches/vllm"
"""


def _load(tmp_path: Path, head: str) -> Stack:
    path = tmp_path / "kpatch.toml"
    path.write_text("version = 1\n" + head + UPSTREAM)
    return load(path)


def test_no_release_table_serves_dir_from_its_file_url_and_nightly_keeps_seven(tmp_path: Path) -> None:
    stack = _load(tmp_path, "")
    nightly = target(stack, tmp_path / "site", "nightly", None)
    assert (nightly.base_url, nightly.keep, nightly.torch_index) == ((tmp_path / "site").as_uri(), 7,
                                                                      PYTORCH_XPU_INDEX)
    assert nightly.index_url == f"{(tmp_path / 'site').as_uri()}/nightly/simple"
    assert target(stack, tmp_path / "site", "stable", None).keep is None  # stable lists every release


def test_the_release_table_is_read_and_base_url_wins_over_its_url(tmp_path: Path) -> None:
    stack = _load(tmp_path, '[release]\nurl = "https://example.org/k3"\nkeep = 2\n'
                            'torch-index = "https://example.org/torch"\n')
    nightly = target(stack, tmp_path, "nightly", None)
    assert (nightly.base_url, nightly.keep, nightly.torch_index) == ("https://example.org/k3", 2,
                                                                      "https://example.org/torch")
    assert target(stack, tmp_path, "nightly", "http://127.0.0.1:8000").index_url == \
        "http://127.0.0.1:8000/nightly/simple"


@pytest.mark.parametrize(("head", "line", "message"), [
    ("[release]\nkeep = 0\n", 3, "[release] 'keep' must be a whole number, 1 or more"),
    ("[release]\nkeep = true\n", 3, "[release] 'keep' must be a whole number, 1 or more"),
    ('[release]\nkeep = 3\nurl = "example.org/k3"\n', 4,
     "[release] 'url' must be an http(s):// or file:// URL, not 'example.org/k3'"),
    ('[release]\ntorch_index = "https://x"\n', 3, "unknown key 'torch_index' in [release]"),
    ('release = "yes"\n', 2, "'release' must be a table"),
    ("[release]\nnightly = true\n", 3, "[release] nightly = true needs 'to': the folder the nightly channel is "
                                       'published in, or "github"'),
    ('[release]\nnightly = "yes"\nto = "site"\n', 3, "[release] 'nightly' must be true or false"),
    ('[release]\nto = ""\n', 3, "[release] 'to' must be a one-line string, not ''"),
    ('[release]\npages-branch = "../x"\n', 3, "[release] 'pages-branch' '../x' is no branch name"),
    ('[release]\nkeep = 2\nto = "GitHub"\n', 4,
     '[release] \'to\' must be a folder (relative to kpatch.toml) or "github", not \'GitHub\''),
    ('[release]\nto = "https://example.org/k3"\n', 3,
     '[release] \'to\' must be a folder (relative to kpatch.toml) or "github", not \'https://example.org/k3\''),
])
def test_a_bad_release_table_names_the_file_line_and_key(tmp_path: Path, head: str, line: int, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, head)
    assert str(err.value) == f"{tmp_path / 'kpatch.toml'}:{line}: {message}"
    assert err.value.exit_code is ExitCode.BAD_INPUT


def test_a_to_that_is_a_file_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "site").write_text("")
    with pytest.raises(UsageError) as err:
        target(_load(tmp_path, ""), tmp_path / "site", "stable", None)
    assert str(err.value) == f"--to {tmp_path / 'site'}: not a folder"


def test_nightly_release_and_github_pages_keys_are_read(tmp_path: Path) -> None:
    stack = _load(tmp_path, '[release]\nnightly = true\nto = "github"\npages-remote = "/srv/pages.git"\n')
    settings = stack.release
    assert (settings.nightly, settings.to, settings.pages_remote, settings.pages_branch) == (
        True, "github", "/srv/pages.git", "gh-pages")
    assert _load(tmp_path, "").release.nightly is False
