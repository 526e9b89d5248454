"""The README and docs/ name only commands and options that exist in `kpatch --help` (the runnable blocks run
elsewhere: tests/docker/test_readme.py)."""

from __future__ import annotations

from tests.support.cli import all_commands
from tests.support.readme import README, RUNNABLE, blocks, documents, invocations, spans

COMMANDS = all_commands()  # every module of kpatch/commands/ (each loaded on demand)

# Commands named before they exist (none now): allowed only while they are missing, then checked like every other.
PENDING: dict[str, set[str]] = {}
# Options the README names that belong to other tools, with the tool.
FOREIGN = {
    "--zero-commit": "git format-patch", "--no-signature": "git format-patch", "-N": "git format-patch",
    "--full-index": "git format-patch", "--stat": "git format-patch", "--no-deps": "pip", "--no-index": "pip",
    "--extra-index-url": "pip (docs/release.md)",
    "--python": "pip (the README's main command)",
    "--privileged": "docker", "-v": "pytest", "-": "(a dash in prose)", "--": "git (the end of options)",
    "--end-of-options": "git", "--keep-cr": "git am", "---": "(a commit message line)",
    "--tree": "scripts/hostile_vectors.py", "--kpatch": "scripts/bench_*.py", "-MD": "the C++ compiler",
    "--importtime": "scripts/bench_cli.py", "--force-with-lease": "git push (docs/propose.md)",
    "--version": "kpatch itself (no command)", "--filter": "git fetch (docs/mirrors.md)",
    "--only": "scripts/bench_real.py", "--fetch-debsrc": "scripts/bench_real.py",
    "--nights": "scripts/bench_history.py", "--stdout": "git format-patch", "-M": "git format-patch",
    "-b": "git mailinfo",
}


def _options(name: str) -> set[str]:
    command = COMMANDS[name]
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)} | {"-h", "--help"}


def test_every_kpatch_command_and_its_options_in_the_docs_exist() -> None:
    pieces = []
    for name, text in documents():
        pieces += [(b.text, f"{name}:{b.line}") for b in blocks(text) if b.info in ("sh", RUNNABLE)]
        pieces += [(span, f"{name}: `{span}`") for span in spans(text)]
    checked = 0
    for code, where in pieces:
        for call in invocations(code, where):
            if not call.command:
                assert set(call.options) <= {"--version", "--help", "-h"}, where
                continue
            if call.command in PENDING and call.command not in COMMANDS:
                continue
            assert call.command in COMMANDS, f"{where}: kpatch {call.command} is no command"
            unknown = set(call.options) - _options(call.command)
            assert not unknown, f"{where}: kpatch {call.command} has no {sorted(unknown)}"
            checked += 1
    assert checked > 30  # the parser found the documents' commands (a broken parser would pass vacuously)


def test_every_option_the_docs_name_alone_belongs_to_a_command() -> None:
    known = {opt for name in COMMANDS for opt in _options(name)}
    pending: set[str] = set().union(*(opts for name, opts in PENDING.items() if name not in COMMANDS))
    named = {span.split()[0].split("=")[0] for _, text in documents() for span in spans(text)
             if span.startswith("-")}
    assert "--discard" in named and "--fsck" in named
    unknown = named - known - pending - set(FOREIGN)
    assert not unknown, f"the documents name options no kpatch command has: {sorted(unknown)}"


README_MAIN_COMMAND = ("python3 -m venv --without-pip .venv && python3 -m pip --python .venv/bin/python install . && "
                       ".venv/bin/kpatch demo")


def test_the_readme_has_runnable_blocks_and_the_two_set_up_commands() -> None:
    text = README.read_text(encoding="utf-8")
    found = blocks(text)
    assert [b.text.strip() for b in found if b.info == "sh"][:2] == [README_MAIN_COMMAND,
                                                                    "scripts/test"]
    assert sum(b.info == RUNNABLE for _, text in documents() for b in blocks(text)) >= 8
