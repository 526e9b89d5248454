"""Markdown cells from upstream text: one line that renders as that text and nothing else (the night's report and
the carry dashboard's issue both put upstream text into GitHub bodies)."""

from __future__ import annotations

import re
from collections.abc import Sequence

GITHUB_LIMIT = 60_000  # GitHub refuses bodies and comments over 65,536 characters


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows of cells that are markdown already (made by `_text` and `_code`: one line, no bare pipe)."""
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(row) + " |" for row in rows)]


# Text from upstreams (commit subjects, author names, test ids, messages) goes into GitHub issue and pull request
# bodies: it must stay text. No @mention (it would ping), no #123 reference (it would link, and a "Fixes #12"
# close, an issue of this repository), no HTML (`<img>`, `<!--` that hides the rest), no links or emphasis.
_MENTION = re.compile(r"(?<![\w.+-])@(?=\w)")  # an e-mail address's @ is no mention
_REFERENCE = re.compile(r"(?<![\w/])(#|GH-)(?=\d)", re.IGNORECASE)
_MARKUP = re.compile(r"([\\`*_\[\]|~])")
_ZERO_WIDTH = "\u200b"  # between @ and a name: GitHub sees no mention, a person reads the same text


def _text(text: str, *, references: bool = False) -> str:
    """Upstream text as one line of markdown that renders as that text and nothing else; `references`: the
    text is kpatch's own (an issue or pull request it opened, owner/repo#N from a patch) and may link."""
    flat = " ".join(text.splitlines())
    escaped = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    escaped = _MARKUP.sub(r"\\\1", escaped)
    escaped = _MENTION.sub("@" + _ZERO_WIDTH, escaped)
    return escaped if references else _REFERENCE.sub(lambda m: m.group(1) + _ZERO_WIDTH, escaped)


def _code(text: str) -> str:
    """Text as an inline code span (nothing in it is markdown, mention or HTML), whatever backticks it holds."""
    flat = " ".join(text.splitlines()).replace("|", "\\|")  # a pipe ends a table cell even in a code span
    ticks = "`" * (1 + _longest_run(flat, "`"))
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}"


def _longest_run(text: str, char: str) -> int:
    return max((len(run) for run in re.findall(f"{re.escape(char)}+", text)), default=0)
