"""The example project's kpatch.toml (the one `kpatch demo` and the tests build on) validates against the shipped
JSON Schema, in both its forms: as the demo writes it and with a wheelhouse (pin files)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jsonschema
from gitrepos import Project

from kpatch.config.schema import SCHEMA_FILE
from kpatch.examples.upstreams import make_example_project

VALIDATOR = jsonschema.Draft4Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))


def _errors(toml: Path) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in VALIDATOR.iter_errors(tomllib.loads(toml.read_text()))]


def test_the_example_project_kpatch_toml_validates_against_the_shipped_schema(project: Project) -> None:
    toml = project.root / "kpatch.toml"
    assert "[verify]" in toml.read_text() and "[upstream.test]" in toml.read_text()  # every table is exercised
    assert _errors(toml) == []


def test_the_example_project_with_a_wheelhouse_validates_against_the_shipped_schema(tmp_path: Path) -> None:
    root = make_example_project(tmp_path, wheelhouse={"torch-2.13.0-py3-none-any.whl": b"not a wheel"}).root
    toml = root / "kpatch.toml"
    assert "pin-files" in toml.read_text()
    assert _errors(toml) == []
