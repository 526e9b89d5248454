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


def test_a_long_steps_first_heartbeat_comes_at_a_third_of_the_interval_then_every_interval(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The kernels build was silent for 30 s before its first heartbeat (a silence that reads as a hang)."""
    import threading
    import time

    from kpatch.output.ui import UI, _Activity

    beat = _Activity(UI(), "building kernels")
    beat("compiling unit 7")
    stop = threading.Event()
    thread = threading.Thread(target=beat.heartbeat, args=(3.0, stop), daemon=True)
    thread.start()
    time.sleep(1.6)  # past a third of the interval, well before the whole of it
    stop.set()
    thread.join()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines  # the first beat, and not yet the second
    assert lines[0].startswith("building kernels: still running after ")
    assert lines[0].endswith(" s; last line: compiling unit 7")


@pytest.mark.parametrize(("line", "room", "shown"), [
    ("short line", 40, "short line"),
    ("g++ -O2 -c csrc/attention/paged_attention_kernel.cpp -o build/paged_attention_kernel.o", 40,
     "…-o build/paged_attention_kernel.o"),
    ("one " + "x" * 60, 20, "…" + "x" * 19),  # a word longer than the room: its end
])
def test_the_spinners_line_is_cut_between_words_to_the_room_it_has(line: str, room: int, shown: str) -> None:
    from kpatch.output.ui import tail_words

    assert tail_words(line, room) == shown and len(shown) <= room
