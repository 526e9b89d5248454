"""kpatch/output/printable.py: what a terminal would obey comes out escaped, text stays text."""

from __future__ import annotations

import pytest

from kpatch.output.printable import printable, shown


@pytest.mark.parametrize(("raw", "printed"), [
    ("plain text, [brackets] and ünïcode", "plain text, [brackets] and ünïcode"),
    ("two\nlines\tand a tab", "two\nlines\tand a tab"),
    ("a title \x1b]0;pwned\x07", "a title \\x1b]0;pwned\\x07"),
    ("clear \x1b[2J", "clear \\x1b[2J"),
    ("C1 CSI \x9b2J, DEL \x7f, NUL \x00", "C1 CSI \\x9b2J, DEL \\x7f, NUL \\x00"),
    ("right-to-left \u202eexe.txt \u2066x\u2069", "right-to-left \\u202eexe.txt \\u2066x\\u2069"),
    ("crlf\r\nlines\r\n", "crlf\nlines\n"),
    ("over\rwritten", "over\\x0dwritten"),
])
def test_printable_escapes_every_control_a_terminal_obeys_and_keeps_text(raw: str, printed: str) -> None:
    assert printable(raw) == printed


def test_shown_blanks_credentials_and_escapes_controls() -> None:
    assert shown("https://user:pw@host/x \x1b[2J") == "https://***@host/x \\x1b[2J"
