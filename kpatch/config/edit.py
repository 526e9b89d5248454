"""Edits to kpatch.toml that keep the person's comments, order and layout (tomlkit)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kpatch.errors import ConfigError
from kpatch.files import KPATCH_TOML, read_input


def load_editor() -> None:
    """Import what the edits below use (tomlkit, ~20-30 ms) now: a rebase loads it while git writes its patches."""
    import tomlkit  # noqa: F401


def with_new_bases(path: Path, bases: Mapping[str, str], *, line: str = "main") -> bytes:
    """kpatch.toml's text with `base` of the named upstreams set to full SHAs (and `base-commit` dropped): in their
    [[upstream]] tables for main, in their `[line."NAME".UPSTREAM]` tables for a release line.

    Edited with tomlkit, so comments, key order, quoting and layout stay as the person wrote them: a base the
    person wrote as a literal string ('v1.0') gets its SHA as one too. The new value's string kind is set here, not
    left to tomlkit, whose releases differ in what an assignment keeps (0.15 keeps the old kind, 0.12-0.14 did not).
    """
    # imported where used: tomlkit (~20 ms) only for an edit: every command loads config, few edit it
    import tomlkit

    # not read_text: its newline translation would drop CRs
    text = read_input(path, KPATCH_TOML, ConfigError).decode("utf-8")
    document = tomlkit.parse(text)
    untouched = tomlkit.dumps(document)
    for name, table in _tables(document, line):
        if name in bases:
            table["base"] = _string_like(table.get("base"), bases[name])
            if "base-commit" in table:
                del table["base-commit"]
    edited = tomlkit.dumps(document)
    kept = _keep_lines(text, untouched, edited)
    return (kept if tomllib.loads(kept) == tomllib.loads(edited) else edited).encode("utf-8")


def with_line_bases_of(current: bytes, source: bytes, names: Iterable[str], *, line: str = "main") -> bytes:
    """kpatch.toml's `current` text with `base` and `base-commit` of the named upstreams on `line` as `source` has
    them, and nothing else changed: what a journaled rebase of one line writes (or, going back, restores) on top of
    a kpatch.toml another line's rebase has written since (never that line's bases). When the result means what
    `source` means (nobody else wrote since), `source` itself, byte for byte; when either is no TOML, `source`."""
    import tomlkit

    try:
        meant = tomllib.loads(source.decode("utf-8"))
        text = current.decode("utf-8")
        tomllib.loads(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return source
    document = tomlkit.parse(text)
    untouched = tomlkit.dumps(document)
    theirs = dict(_tables(tomlkit.parse(source.decode("utf-8")), line))
    wanted = set(names)
    for name, table in _tables(document, line):
        if name not in wanted or name not in theirs:
            continue
        for key in ("base", "base-commit"):
            if key in theirs[name]:
                table[key] = theirs[name][key]
            elif key in table:
                del table[key]
    edited = tomlkit.dumps(document)
    if tomllib.loads(edited) == meant:
        return source
    kept = _keep_lines(text, untouched, edited)
    return (kept if tomllib.loads(kept) == tomllib.loads(edited) else edited).encode("utf-8")


def _tables(document: Any, line: str) -> list[tuple[Any, Any]]:
    """(upstream name, its table) of `line` in a tomlkit document: [[upstream]] for main, [line."NAME".UPSTREAM]."""
    if line == "main":
        return [(t.get("name"), t) for t in document.get("upstream", [])]
    return list(document.get("line", {}).get(line, {}).items())


def _keep_lines(text: str, untouched: str, edited: str) -> str:
    """The lines tomlkit changed for the edit, applied to the person's text: a line tomlkit only renders its own
    way (`[[ upstream ]]` as `[[upstream]]`) stays as written."""
    import difflib

    original, before, after = (t.splitlines(keepends=True) for t in (text, untouched, edited))
    if len(original) != len(before):
        return edited
    lines: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        lines += original[i1:i2] if tag == "equal" else after[j1:j2]
    return "".join(lines)



def _string_like(old: object, value: str) -> object:
    """`value` as a one-line TOML string of the kind `old` was written in: literal ('...') or basic ("...")."""
    import tomlkit
    from tomlkit.items import String

    literal = isinstance(old, String) and old.as_string().startswith("'")  # as written: `.type` is 0.14+ only
    return tomlkit.string(value, literal=literal)
