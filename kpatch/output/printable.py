"""Text from outside (upstream commit subjects, author names, file names, a build's log) shown as text: the
control characters a terminal would obey are printed escaped, never sent raw.

An upstream commit subject such as `ESC ]0;title BEL` or `ESC [2J` would retitle the window or clear the screen of
whoever reads kpatch's output, on a terminal or later through `cat` of a CI log. Every line kpatch prints or logs
passes through `printable` (by way of `shown`, below): C0 controls but newline and tab, DEL, the C1 controls (U+0080 to
U+009F: a lone U+009B is a CSI) and the bidirectional overrides and isolates (which reorder what a reader sees) come
out as `\\x1b`, `\\u202e`. A carriage return before a newline is dropped (CRLF text reads as lines), any other one
is escaped (it would overwrite the line). The escapes kpatch's own console (rich) adds for colour come after this,
so they are kept.
"""

from __future__ import annotations

import re

from kpatch.output.redact import redact_text

_CONTROL = re.compile("\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character a terminal would obey escaped (`\\x1b`); newlines and tabs kept."""
    if text.isprintable():  # the usual case: nothing to look for
        return text
    return _CONTROL.sub(_shown, text.replace("\r\n", "\n"))


def shown(text: str) -> str:
    """`text` as kpatch may show or log it: credentials blanked, control characters escaped."""
    return printable(redact_text(text))
