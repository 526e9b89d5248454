"""Output for pipes, CI logs and files: kpatch's console markup rendered as plain text, without importing rich.

rich costs about 40 ms to import, more than a command's whole fixed-cost budget, and off a terminal it only
strips markup. This module reads the same markup (`[bold]...[/]`, a backslash before `[` keeps it literal) and
`escape` writes it, so text escaped here prints the same through rich on a terminal.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TextIO

# A markup tag as rich reads one: `[` then a letter, `#`, `/` or `@`, up to the next `]`; backslashes before it
# escape it when there is an odd number of them.
_TAG = re.compile(r"(\\*)\[([a-z#/@][^\[]*?)]")


def escape(text: str) -> str:
    """`text` with everything that would read as a markup tag escaped."""
    escaped = _TAG.sub(lambda m: f"{m.group(1) * 2}\\[{m.group(2)}]", text)
    if escaped.endswith("\\") and not escaped.endswith("\\\\"):
        escaped += "\\"  # a lone trailing backslash would escape the tag that follows it in a format string
    return escaped


def strip_markup(text: str) -> str:
    """What rich prints for `text` off a terminal: tags dropped, escaped brackets kept."""
    pieces: list[str] = []
    position = 0
    for match in _TAG.finditer(text):
        pieces.append(text[position:match.start()])
        pairs, odd = divmod(len(match.group(1)), 2)
        pieces.append("\\" * pairs)
        if odd:
            pieces.append(f"[{match.group(2)}]")
        position = match.end()
    pieces.append(text[position:])
    return "".join(pieces)


def is_terminal(stream: TextIO) -> bool:
    """Whether rich would treat `stream` as a terminal (TTY_COMPATIBLE, FORCE_COLOR, then isatty)."""
    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    force = os.environ.get("FORCE_COLOR")
    if force is not None:
        return force != ""
    try:
        return stream.isatty()
    except (ValueError, AttributeError):  # a closed or replaced stream
        return False


class PlainConsole:
    """The part of rich's Console that kpatch uses off a terminal: print lines."""

    is_terminal = False

    def __init__(self, *, stderr: bool) -> None:
        self.stderr = stderr

    def print(self, text: str, *, markup: bool = True) -> None:
        stream = sys.stderr if self.stderr else sys.stdout  # looked up per line: test runners swap them
        text = strip_markup(text) if markup else text
        stream.write("\n".join(line.rstrip() for line in text.split("\n")) + "\n")  # no trailing spaces
        stream.flush()
