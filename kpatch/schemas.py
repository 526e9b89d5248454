"""Torch op schemas as C++ registers them: read `ops.def("...")` strings out of source text and compare them."""

from __future__ import annotations

import re
from dataclasses import dataclass

# ops.def( "part one" "part two" ) -- adjacent C++ string literals, possibly across lines
_DEF = re.compile(r"\.def\(\s*((?:\"(?:[^\"\\]|\\.)*\"\s*)+)[,)]")
_LITERAL = re.compile(r"\"((?:[^\"\\]|\\.)*)\"")


@dataclass(frozen=True)
class Schema:
    name: str
    text: str  # whitespace-normalised schema string, e.g. "f(Tensor! x, int n=1) -> ()"


def extract(source: str) -> dict[str, Schema]:
    """Every schema a C++ file defines with `<lib>.def("...")`, by op name."""
    found: dict[str, Schema] = {}
    for match in _DEF.finditer(source):
        text = normalise("".join(_LITERAL.findall(match.group(1))))
        name = text.split("(", 1)[0].strip()
        if name and "(" in text:
            found[name] = Schema(name=name, text=text)
    return found


def normalise(schema: str) -> str:
    """One space after commas and around `->`, none inside brackets or around `=`."""
    text = re.sub(r"\s+", " ", schema).strip()
    text = re.sub(r"\s*,\s*", ", ", text)
    text = re.sub(r"\(\s+", "(", text)
    text = re.sub(r"\s+\)", ")", text)
    text = re.sub(r"\s*=\s*", "=", text)
    return re.sub(r"\s*->\s*", " -> ", text)
