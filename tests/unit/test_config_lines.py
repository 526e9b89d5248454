"""kpatch.toml's release lines ([line."NAME".UPSTREAM]): read as the line's stack, every mistake one line naming
the file, the line and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpatch.config import load
from kpatch.config.edit import with_new_bases
from kpatch.errors import ConfigError, UsageError

UPSTREAMS = """version = 1

[[upstream]]
name = "kernels"
url = "https://example.invalid/kernels.git"
branch = "main"
base = "v1.0"
patches = "patches/kernels"

[[upstream]]
name = "vllm"
url = "https://example.invalid/vllm.git"
branch = "main"
base = "v0.34.0"
patches = "patches/vllm"
requires = ["kernels"]
"""
LINE = """
[line."0.33".kernels]
branch = "main"
base = "v0.1.15.4"

[line."0.33".vllm]
branch = "releases/v0.33"  # the release branch
base = 'v0.33.0'
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "kpatch.toml"
    path.write_text(text)
    return path


def test_a_line_is_the_stack_with_its_branches_bases_and_own_patch_folders(tmp_path: Path) -> None:
    stack = load(_write(tmp_path, UPSTREAMS + LINE))
    assert stack.line == "main" and stack.line_names == ("main", "0.33")
    line = stack.on_line("0.33")
    vllm = line.get("vllm")
    assert (vllm.branch, vllm.base, vllm.url) == ("releases/v0.33", "v0.33.0", "https://example.invalid/vllm.git")
    assert vllm.patches == tmp_path / "patches" / "0.33" / "vllm" and vllm.requires == ("kernels",)
    assert line.resolutions == tmp_path / "patches" / "0.33" / ".rerere"
    assert stack.resolutions == tmp_path / "patches" / ".rerere"
    assert stack.get("vllm").base == "v0.34.0"  # main as the [[upstream]] tables say


def test_a_project_without_lines_has_only_main(tmp_path: Path) -> None:
    stack = load(_write(tmp_path, UPSTREAMS))
    assert stack.lines == () and stack.line_names == ("main",) and stack.on_line("main") is stack
    with pytest.raises(UsageError, match=r"unknown line '0.33' \(kpatch.toml declares: main\)"):
        stack.on_line("0.33")


@pytest.mark.parametrize(("text", "line", "says"), [
    (LINE.replace('[line."0.33".vllm]', '[line."0.33".vlm]'), 6,
     "line.\"0.33\".vlm: unknown upstream 'vlm' (did you mean 'vllm'?)"),
    (LINE.replace("base = 'v0.33.0'", "bsae = 'v0.33.0'"), 8, "line.\"0.33\".vllm.bsae: unknown key 'bsae' (did you "
                                                              "mean 'base'?)"),
    (LINE.replace("base = 'v0.33.0'", ""), 6, "line.\"0.33\".vllm is missing 'base'"),
    (LINE.split("[line.\"0.33\".vllm]")[0], 2, "line '0.33' does not say where upstream 'vllm' stands"),
    (LINE.replace('"0.33"', '"main"'), 2, "'main' is the line the [[upstream]] tables describe"),
    (LINE.replace("base = 'v0.33.0'", "base = 'v0.33.0'\npatches = \"patches/vllm\""), 9,
     "is already upstream vllm's patches (main)"),
    (LINE.replace("base = 'v0.33.0'", "base = 'v0.33.0'\npatches = \"../elsewhere\""), 9, "must stay inside"),
    (LINE.replace("base = 'v0.33.0'", "base = 'v0.33.0'\nbase-commit = \"abc\""), 9, "must be a 40-hex SHA"),
    (LINE.replace('"0.33"', '"0.33/x"'), 2, "bad line name '0.33/x'"),
    # a stack folder inside or around another's; a line named like an upstream: its default folders
    # patches/kernels/<upstream>/ lie inside main's stack
    (LINE.replace('"0.33"', '"kernels"'), 2, "lies inside"),
    (LINE.replace("base = 'v0.33.0'", "base = 'v0.33.0'\npatches = \"patches/vllm/old\""), 9, "lies inside"),
    (LINE.replace("base = 'v0.33.0'", "base = 'v0.33.0'\npatches = \"patches\""), 9, "holds"),
    (LINE.replace("base = \"v0.1.15.4\"", "base = \"v0.1.15.4\"\npatches = \"patches/l/k\"")
     .replace("base = 'v0.33.0'", "base = 'v0.33.0'\npatches = \"patches/l/k/v\""), 10, "lies inside"),
])
def test_a_bad_line_is_one_line_naming_the_file_the_line_and_the_key(tmp_path: Path, text: str, line: int,
                                                                    says: str) -> None:
    path = _write(tmp_path, UPSTREAMS + text)
    with pytest.raises(ConfigError) as caught:
        load(path)
    message = str(caught.value)
    assert "\n" not in message and says in message, message
    number = UPSTREAMS.count("\n") + line
    assert message.startswith(f"{path}:{number}: "), message


def test_a_line_rebase_writes_the_lines_bases_and_keeps_the_rest_byte_for_byte(tmp_path: Path) -> None:
    path = _write(tmp_path, UPSTREAMS + LINE)
    sha = "4ba787ec9" + "0" * 31
    edited = with_new_bases(path, {"vllm": sha}, line="0.33").decode()
    assert edited == (UPSTREAMS + LINE).replace("base = 'v0.33.0'", f"base = '{sha}'")
    assert with_new_bases(path, {"vllm": sha}).decode() == (UPSTREAMS + LINE).replace('base = "v0.34.0"',
                                                                                     f'base = "{sha}"')


def test_a_line_whose_own_folder_is_another_stacks_folder_is_refused(tmp_path: Path) -> None:
    # every stack of line "vllm" lives elsewhere, but its lock and resolutions would go to patches/vllm/: main's stack
    text = LINE.replace('"0.33"', '"vllm"').replace(
        "base = \"v0.1.15.4\"", "base = \"v0.1.15.4\"\npatches = \"lines/vllm/kernels\"").replace(
        "base = 'v0.33.0'", "base = 'v0.33.0'\npatches = \"lines/vllm/vllm\"")
    path = _write(tmp_path, UPSTREAMS + text)
    with pytest.raises(ConfigError) as caught:
        load(path)
    message = str(caught.value)
    assert message == (f"{path}:{UPSTREAMS.count(chr(10)) + 2}: line.\"vllm\": the line keeps its lock and recorded "
                       "resolutions in patches/vllm/, which is upstream vllm's patches (main) (patches/vllm): "
                       "name the line otherwise"), message


def test_a_line_beside_mains_folders_loads(tmp_path: Path) -> None:
    # patches/0.33/ beside patches/kernels and patches/vllm: nothing shared
    stack = load(_write(tmp_path, UPSTREAMS + LINE))
    folders = [u.patches for u in stack.upstreams] + [u.patches for _, u in stack.lines[0].upstreams]
    assert len(set(folders)) == 4


def test_a_line_whose_own_folder_is_another_stacks_through_a_symlink_is_refused(tmp_path: Path) -> None:
    # patches/ is a link to store/: the line's lock and resolutions in patches/vllm/ would land in store/vllm/,
    # main's vllm stack, as they would without the link
    (tmp_path / "store").mkdir()
    (tmp_path / "patches").symlink_to(tmp_path / "store")
    text = LINE.replace('"0.33"', '"vllm"').replace(
        "base = \"v0.1.15.4\"", "base = \"v0.1.15.4\"\npatches = \"lines/vllm/kernels\"").replace(
        "base = 'v0.33.0'", "base = 'v0.33.0'\npatches = \"lines/vllm/vllm\"")
    path = _write(tmp_path, UPSTREAMS + text)
    with pytest.raises(ConfigError, match=r"kpatch.toml:18: line\.\"vllm\": the line keeps its lock .* \(store/vllm\)"):
        load(path)


def test_a_line_whose_own_folder_no_name_can_free_is_not_told_to_rename(tmp_path: Path) -> None:
    # main keeps a stack in patches/ itself: every line's patches/<line>/ lies inside it, whatever its name
    text = UPSTREAMS.replace('patches = "patches/kernels"', 'patches = "patches"').replace(
        'patches = "patches/vllm"', 'patches = "stacks/vllm"') + LINE.replace(
        "base = \"v0.1.15.4\"", "base = \"v0.1.15.4\"\npatches = \"lines/0.33/kernels\"").replace(
        "base = 'v0.33.0'", "base = 'v0.33.0'\npatches = \"lines/0.33/vllm\"")
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{UPSTREAMS.count(chr(10)) + 2}: line.\"0.33\": "), message
    assert "lies inside upstream kernels's patches (main) (patches)" in message, message
    assert "name the line otherwise" not in message and "move" in message, message


@pytest.mark.parametrize(("kernels", "vllm", "says"), [
    ("patches/kernels", "patches/kernels", "is already"),
    ("patches/kernels", "patches/kernels/vllm", "lies inside"),
    ("patches/kernels/x/..", "patches/kernels", "is already"),
    ("patches/kernels", ".", "holds"),
])
def test_two_main_stacks_in_one_folder_or_one_inside_the_other_are_refused(tmp_path: Path, kernels: str,
                                                                           vllm: str, says: str) -> None:
    text = UPSTREAMS.replace('patches = "patches/kernels"', f'patches = "{kernels}"').replace(
        'patches = "patches/vllm"', f'patches = "{vllm}"')
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load(path)
    message = str(caught.value)
    number = text.splitlines().index(f'patches = "{vllm}"', 10) + 1
    assert "\n" not in message and message.startswith(f"{path}:{number}: upstream vllm: 'patches' "), message
    assert says in message and "upstream kernels's patches" in message, message


@pytest.mark.parametrize(("old", "new"), [
    ('[line."0.33".kernels]', '[line."0.33\\nx".kernels]'),
    ('[line."0.33".vllm]', '[line."0.33"."vl\\nlm"]'),
    ("base = 'v0.33.0'", "base = 'v0.33.0'\n\"ba\\nse\" = 1"),
])
def test_a_name_holding_a_newline_is_quoted_in_its_one_line_error(tmp_path: Path, old: str, new: str) -> None:
    path = _write(tmp_path, UPSTREAMS + LINE.replace(old, new))
    with pytest.raises(ConfigError) as caught:
        load(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}:"), message
    assert "\\n" in message.split(": ")[1], message  # the key, as TOML writes it
