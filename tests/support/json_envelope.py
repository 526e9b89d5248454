"""A command's --json output, checked against its shipped JSON Schema (kpatch/commands/schemas/<command>.json)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import jsonschema


def schema(command: str) -> dict[str, Any]:
    text = resources.files("kpatch.commands").joinpath("schemas", f"{command}.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


def checked(stdout: str, command: str) -> dict[str, Any]:
    """The envelope `kpatch <command> --json` printed, after its schema validated it (ValidationError if not)."""
    envelope = json.loads(stdout)
    jsonschema.Draft202012Validator(schema(command)).validate(envelope)
    return dict(envelope)
