"""Help that teaches: every command's --help ends with one real example, and that example parses."""

from __future__ import annotations

import shlex

import pytest

from kpatch.output.help import EXAMPLES
from tests.support.cli import all_commands, run_kpatch

COMMANDS = all_commands()  # every module of kpatch/commands/ (each loaded on demand)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_ends_with_an_example_that_the_command_accepts(name: str) -> None:
    result = run_kpatch(None, name, "--help")
    assert result.exit_code == 0
    example = EXAMPLES[name]
    assert result.output.rstrip().endswith(f"  Example: {example.does}\n    $ {example.command}")
    words = shlex.split(example.command)
    assert words[:2] == ["kpatch", name]
    command = COMMANDS[name]
    command.make_context(name, words[2:])  # an unknown option or a bad value raises click's UsageError


def test_every_command_takes_quiet_and_verbose() -> None:
    for name, command in COMMANDS.items():
        options = {opt for param in command.params for opt in param.opts}
        assert {"-q", "--quiet", "-v", "--verbose", "--json"} <= options, name


def test_the_group_lists_and_finds_the_commands_registered_in_other_modules() -> None:
    """`kpatch --help` lists build-wheels ... doctor, whose modules load only when needed, and each one runs."""
    listing = run_kpatch(None, "--help").output
    for name in ("build-wheels", "verify", "test", "nightly", "demo", "doctor", "apply", "status"):
        assert f"  {name} " in listing, name
        assert run_kpatch(None, name, "--help").exit_code == 0, name
