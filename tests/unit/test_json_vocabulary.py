"""One word per thing across every command's JSON (docs/json.md, "The same names everywhere"): read from the shipped
schemas (kpatch/commands/schemas/, made from the result types), so a new result type that brings back an old
name, or a second word for a verdict, fails here. No git."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parents[2] / "kpatch" / "commands" / "schemas"

# a name that has another word in kpatch's JSON -> the word every command uses
SYNONYMS = {
    "klass": "class",  # a patch's class
    "level": "status",  # a verdict
    "upstream_prs": "prs",  # the Upstream-PRs a patch names
    "pulls": "prs",  # the Upstream-PRs and their states
    "pulls_unavailable": "pr_states_unavailable",
}
VERDICT_WORDS = {"passed", "failed", "warning", "skipped"}
OTHER_VERDICT_WORDS = {"pass", "fail", "warn", "skip", "ok"}  # verify's and doctor's words before envelope 2


def properties(node: Any, where: str = "") -> Iterator[tuple[str, str, Any]]:
    """(where, name, schema) of every property declared anywhere in a schema."""
    if isinstance(node, dict):
        for name, value in (node.get("properties") or {}).items():
            yield where, name, value
            yield from properties(value, f"{where}/{name}")
        for key, value in node.items():
            if key != "properties":
                yield from properties(value, where)
    elif isinstance(node, list):
        for value in node:
            yield from properties(value, where)


def enums(node: Any) -> Iterator[list[Any]]:
    """Every enum a schema (or part of one) allows."""
    if isinstance(node, dict):
        if "enum" in node:
            yield node["enum"]
        for value in node.values():
            yield from enums(value)
    elif isinstance(node, list):
        for value in node:
            yield from enums(value)


def problems(schemas: Mapping[str, Any]) -> list[str]:
    """Each place a command's JSON names a thing with a second word, one line each."""
    found = []
    for command, schema in sorted(schemas.items()):
        if "kpatch_version" not in schema["properties"]:
            found.append(f"{command}: the envelope does not name kpatch's version (kpatch_version)")
        for where, name, value in properties(schema.get("$defs", {})):
            if name in SYNONYMS:
                found.append(f"{command}: {where}/{name} is {SYNONYMS[name]!r} everywhere else")
            if name == "ok":
                found.append(f"{command}: {where}/ok inside a result: a verdict is 'status' (ok is the envelope's)")
            if name == "status" and "integer" in json.dumps(value):
                found.append(f"{command}: {where}/status is a number: a verdict is a word; an exit status is "
                             "'exit_code'")
            for allowed in enums(value) if name == "status" else ():
                old = sorted(set(allowed) & OTHER_VERDICT_WORDS)
                if old:
                    found.append(f"{command}: {where}/status says {', '.join(old)}: the verdict words are "
                                 f"{', '.join(sorted(VERDICT_WORDS))}")
    return found


def shipped() -> dict[str, Any]:
    return {path.stem: json.loads(path.read_text(encoding="utf-8")) for path in sorted(SCHEMAS.glob("*.json"))}


def test_every_command_names_each_thing_with_one_word() -> None:
    schemas = shipped()
    assert {"rebase", "nightly", "status", "verify", "doctor", "test", "report", "demo"} <= schemas.keys()
    assert problems(schemas) == []


def test_verify_doctor_and_the_nightly_stages_share_their_verdict_words() -> None:
    schemas = shipped()
    words = {command: {w for _, name, value in properties(schema["$defs"]) if name == "status"
                       for allowed in enums(value) for w in allowed if w in VERDICT_WORDS}
             for command, schema in schemas.items() if command in ("verify", "doctor", "nightly")}
    assert words == {"verify": VERDICT_WORDS, "doctor": VERDICT_WORDS, "nightly": VERDICT_WORDS}


def test_a_second_word_for_a_thing_is_found() -> None:
    """A test of the test: a schema with the old names (klass, upstream_prs, an integer status, `pass`, an `ok`
    inside the result, no kpatch_version) fails it, each named."""
    patch = {"type": "object", "properties": {"klass": {"type": "string"}, "upstream_prs": {"type": "array"}}}
    check = {"type": "object", "properties": {"status": {"enum": ["pass", "fail"]}, "ok": {"type": "boolean"}}}
    suite = {"type": "object", "properties": {"status": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}
    planted = {"kpatch": 2, "properties": {"kpatch": {}}, "$defs": {"result": {"type": "object", "properties": {
        "patches": {"type": "array", "items": patch}, "checks": {"type": "array", "items": check},
        "suites": {"type": "array", "items": suite}}}}}
    found = problems({"planted": planted})
    assert len(found) == 6, found
    assert "planted: /patches/klass is 'class' everywhere else" in found
    assert "planted: /patches/upstream_prs is 'prs' everywhere else" in found
    assert any("/checks/status says fail, pass" in line for line in found)
    assert any("/checks/ok inside a result" in line for line in found)
    assert any("/suites/status is a number" in line for line in found)
    assert any("does not name kpatch's version" in line for line in found)
