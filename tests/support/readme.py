"""The README and docs/*.md as data for their tests: fenced blocks (with their info strings) and inline code spans.

Every check that holds the documentation to the code reads `documents()`: a claim moved from README.md into docs/
is checked where it now lives."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
RUNNABLE = "sh runnable"  # the info string of a block CI runs (GitHub renders it as sh)
_FENCE = re.compile(r"^(?P<fence>`{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=fence)\s*$",
                    re.MULTILINE | re.DOTALL)  # a longer fence holds a shorter one
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_SEPARATORS = re.compile(r"&&|\|\||[;|()]|\$\(|\n")


@dataclass(frozen=True)
class Block:
    info: str
    text: str
    line: int


def documents() -> list[tuple[str, str]]:
    """(name relative to the repository, text) of README.md and every docs/*.md, README first."""
    paths = [README, *sorted(DOCS.glob("*.md"))]
    return [(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")) for path in paths]


def all_text() -> str:
    """Every document's text, lines joined (claims wrap), for the checks that look for a sentence anywhere."""
    return " ".join(" ".join(text.split()) for _, text in documents())


def blocks(text: str) -> list[Block]:
    return [Block(m.group("info").strip(), m.group("body"), text.count("\n", 0, m.start()) + 1)
            for m in _FENCE.finditer(text)]


def prose(text: str) -> str:
    """The README without its fenced blocks."""
    return _FENCE.sub("", text)


def spans(text: str) -> list[str]:
    return _SPAN.findall(prose(text))


@dataclass(frozen=True)
class Invocation:
    command: str  # the word after `kpatch` ("" for `kpatch --version`)
    options: tuple[str, ...]
    where: str


def invocations(code: str, where: str) -> list[Invocation]:
    """Every `kpatch WORD --opt ...` in a piece of shell: the command and the options given to it."""
    found = []
    for part in _SEPARATORS.split(code.split(" #")[0] if "\n" not in code else _strip_comments(code)):
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        while "kpatch" in words:
            words = words[words.index("kpatch") + 1:]
            name = words[0] if words and not words[0].startswith("-") else ""
            options = tuple(w.split("=", 1)[0] for w in words if w.startswith("-") and w != "-")
            found.append(Invocation(name, options, where))
            words = []
    return found


def _strip_comments(code: str) -> str:
    return "\n".join(line.split(" #")[0] for line in code.splitlines())
