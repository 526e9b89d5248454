"""kpatch.toml's [nightly] table: how far a red night searches for the last green upstream commits."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpatch.config import load
from kpatch.config.model import Stack
from kpatch.errors import ConfigError, ExitCode

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


def test_no_nightly_table_means_eight_steps_and_no_budget(tmp_path: Path) -> None:
    stack = _load(tmp_path, "")
    assert (stack.max_steps, stack.budget) == (8, None)


def test_nightly_max_steps_and_budget_are_read(tmp_path: Path) -> None:
    stack = _load(tmp_path, "[nightly]\nmax-steps = 3\nbudget = 90\n")
    assert (stack.max_steps, stack.budget) == (3, 90.0)


def test_nightly_runners_is_one_by_default_and_read_when_given(tmp_path: Path) -> None:
    assert _load(tmp_path, "").runners == 1 and _load(tmp_path, "[nightly]\nmax-steps = 3\n").runners == 1
    assert _load(tmp_path, "[nightly]\nrunners = 3\n").runners == 3


@pytest.mark.parametrize(("head", "line", "message"), [
    ("[nightly]\nrunners = 0\n", 3, "'runners' must be a whole number, 1 or more"),
    ("[nightly]\nmax-steps = 2\nrunners = 2.5\n", 4, "'runners' must be a whole number, 1 or more"),
    ("[nightly]\nmax-steps = -1\n", 3, "'max-steps' must be a whole number, 0 or more"),
    ("[nightly]\nmax-steps = true\n", 3, "'max-steps' must be a whole number, 0 or more"),
    ("[nightly]\nmax-steps = 2\nbudget = 0\n", 4, "'budget' must be a number of seconds above 0"),
    ('[nightly]\nbudget = "1h"\n', 3, "'budget' must be a number of seconds above 0"),
    ("[nightly]\nmax_steps = 2\n", 3, "unknown key 'max_steps' in [nightly] (did you mean 'max-steps'?)"),
    ('nightly = "yes"\n', 2, "'nightly' must be a table"),
])
def test_a_bad_nightly_table_names_the_file_line_and_key(tmp_path: Path, head: str, line: int, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, head)
    assert str(err.value) == f"{tmp_path / 'kpatch.toml'}:{line}: {message}"
    assert err.value.exit_code is ExitCode.BAD_INPUT


# --- [[upstream]] test-selection ----------------------------------------------------------------------------

SELECTING = '\n[upstream.test]\ncommand = "python3 -m pytest ${KPATCH_TESTS:-tests} --junitxml=$KPATCH_JUNIT"\n'


def _upstream(tmp_path: Path, extra: str, test: str = SELECTING) -> Stack:
    path = tmp_path / "kpatch.toml"
    path.write_text("version = 1\n" + UPSTREAM + extra + test)
    return load(path)


def test_test_selection_is_off_by_default_and_read_when_on(tmp_path: Path) -> None:
    assert not _upstream(tmp_path, "").get("vllm").test_selection
    assert _upstream(tmp_path, "test-selection = true\n").get("vllm").test_selection


@pytest.mark.parametrize(("extra", "test", "message"), [
    ('test-selection = "yes"\n', SELECTING, "'test-selection' must be true or false"),
    ("test-selection = true\n", "", "upstream vllm: test-selection needs a test command that takes its test files "
     "from $KPATCH_TESTS (e.g. pytest ${KPATCH_TESTS:-tests}), and has no [upstream.test]"),
    ("test-selection = true\n", '\n[upstream.test]\ncommand = "pytest tests"\n',
     "upstream vllm: test-selection needs a test command that takes its test files from $KPATCH_TESTS (e.g. pytest "
     "${KPATCH_TESTS:-tests}), and its test command does not read $KPATCH_TESTS"),
])
def test_a_bad_test_selection_names_the_file_line_and_upstream(tmp_path: Path, extra: str, test: str,
                                                              message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _upstream(tmp_path, extra, test)
    assert str(err.value) == f"{tmp_path / 'kpatch.toml'}:9: {message}"  # the test-selection line
    assert err.value.exit_code is ExitCode.BAD_INPUT
