"""Plain output off a terminal: kpatch's markup read as rich reads it, without importing rich."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from rich.console import Console

from kpatch.output import plainout

SAMPLES = [
    "[bold]kernels[/]  https://example.invalid/k.git (main)",
    "[yellow]warning:[/] tag v1 moved",
    "[bold red]error:[/] patch [XPU] Fix.patch does not apply",
    "a [1] list and a [dim]note[/dim]",
    "path C:\\new\\\\[bold]x[/]",
    "\\\\[bold]two backslashes, then a tag[/]",
    "trailing backslash \\",
]


def rich_plain(text: str) -> str:
    """What rich itself prints for `text` off a terminal (highlighting off, as kpatch's console has it)."""
    out = io.StringIO()
    Console(file=out, highlight=False, soft_wrap=True, emoji=False, force_terminal=False).print(text)
    return out.getvalue()


@pytest.mark.parametrize("text", SAMPLES)
def test_markup_is_stripped_as_rich_strips_it(text: str) -> None:
    assert plainout.strip_markup(text) + "\n" == rich_plain(text)


@pytest.mark.parametrize("text", [s.replace("[/]", "") for s in SAMPLES] + ["[bold]", "x\\", "[a=b]", "\\[x]"])
def test_escaped_text_prints_the_same_plain_and_through_rich(text: str) -> None:
    from rich.markup import escape as rich_escape

    assert plainout.escape(text) == rich_escape(text)
    assert plainout.strip_markup(plainout.escape(text)) + "\n" == rich_plain(plainout.escape(text))
    if not text.endswith("\\"):  # rich doubles a trailing backslash that no tag follows; so does plain output
        assert plainout.strip_markup(plainout.escape(text)) == text


def test_the_cli_and_plain_output_import_neither_rich_nor_gitpython() -> None:
    code = ("import sys\nfrom kpatch.cli import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "from kpatch.output.ui import UI\nUI().note('x')\nUI().warn('[y]')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'git')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip().splitlines()[-1] == "[]"
    assert proc.stderr.splitlines() == ["x", "warning: [y]"]
