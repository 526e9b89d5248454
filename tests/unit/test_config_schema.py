"""kpatch.toml's JSON Schema (kpatch/config/kpatch.schema.json, shipped for editors) is what the config model makes,
accepts the shipped kpatch.toml and docs/config.md's example, rejects what the loader rejects, and docs/config.md
lists exactly its keys."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kpatch.config import load
from kpatch.config.schema import SCHEMA_FILE, TABLES, reference_table, schema, schema_text
from kpatch.errors import ConfigError
from tests.support.readme import DOCS, ROOT, blocks

VALIDATOR = jsonschema.Draft4Validator(schema())  # draft 4: what taplo reads


def _errors(document: dict[str, Any]) -> list[str]:
    return [error.message for error in VALIDATOR.iter_errors(document)]


def test_the_shipped_schema_is_what_the_model_makes() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text(), "stale: run scripts/gen-config-schema"


def test_the_schema_is_a_valid_draft_4_schema_without_lookaround() -> None:
    shipped = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(shipped)
    patterns = re.findall(r'"pattern": ("(?:[^"\\]|\\.)*")', SCHEMA_FILE.read_text(encoding="utf-8"))
    lookaround = re.compile(r"\(\?<?[=!]")  # (?= (?! (?<= (?<!: regex engines of editors lack them
    assert patterns and not [p for p in patterns if lookaround.search(json.loads(p))]


def test_the_package_ships_the_schema() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    data = pyproject["tool"]["setuptools"]["package-data"]["kpatch.config"]
    assert SCHEMA_FILE.name in data and SCHEMA_FILE.parent == ROOT / "kpatch" / "config"


def _schema_keys(node: dict[str, Any], prefix: str = "", names: tuple[str, ...] = ("NAME", "UPSTREAM")) -> list[str]:
    keys = []
    for key, spec in node.get("properties", {}).items():
        path = f"{prefix}.{key}" if prefix else key
        keys.append(path)
        keys += _schema_keys(spec.get("items", spec), path)
    for spec in node.get("patternProperties", {}).values():  # [line."NAME".UPSTREAM]: names the person gives
        keys += _schema_keys(spec, f"{prefix}.{names[0]}", names[1:])
    return keys


def test_the_schema_has_exactly_the_keys_the_loader_takes() -> None:
    loader = [f"{table}.{key}" if table else key for table, (keys, _) in TABLES.items() for key in keys]
    assert sorted(_schema_keys(schema())) == sorted(loader)


def _documented_keys() -> list[str]:
    text = (DOCS / "config.md").read_text(encoding="utf-8")
    return re.findall(r"^\| `([a-zA-Z.-]+)` \|", text, re.MULTILINE)


def test_docs_config_lists_every_key_of_the_schema_and_no_other() -> None:
    documented = _documented_keys()
    assert len(documented) == len(set(documented)), "a key is listed twice"
    assert sorted(documented) == sorted(_schema_keys(schema()))


def test_docs_config_key_reference_is_what_the_model_makes() -> None:
    assert reference_table() in (DOCS / "config.md").read_text(encoding="utf-8"), \
        "stale: run scripts/gen-config-schema"


def test_docs_config_tells_editors_about_the_schema_directive() -> None:
    directive = f"#:schema ./{SCHEMA_FILE.relative_to(ROOT).as_posix()}\n"
    assert directive in (DOCS / "config.md").read_text(encoding="utf-8")
    assert (ROOT / "kpatch.toml").read_text(encoding="utf-8").startswith(directive)


def test_the_repository_kpatch_toml_validates() -> None:
    assert _errors(tomllib.loads((ROOT / "kpatch.toml").read_text(encoding="utf-8"))) == []


def _config_example() -> str:
    text = (DOCS / "config.md").read_text(encoding="utf-8")
    return next(b.text for b in blocks(text) if b.info == "toml" and "[[upstream]]" in b.text)


def test_the_docs_config_example_validates_and_loads(tmp_path: Path) -> None:
    example = _config_example()
    assert _errors(tomllib.loads(example)) == []
    (tmp_path / "kpatch.toml").write_text(example, encoding="utf-8")
    assert [u.name for u in load(tmp_path / "kpatch.toml").upstreams] == ["vllm-xpu-kernels", "vllm"]


GOOD = """version = 1

[[upstream]]
name = "kernels"
url = "https://example.com/kernels.git"
branch = "main"
base = "v1.0"
patches = "patches/kernels"

[upstream.build]
command = "make wheel"

[upstream.test]
command = "pytest"

[verify]
cuda-only = [{ op = "cutlass_*", why = "CUDA only" }]
"""

# A bad key or type planted in GOOD: (what it is, the text to replace, its replacement).
BAD = [
    ("an unknown top-level key", "version = 1\n", "version = 1\ncolour = \"blue\"\n"),
    ("the wrong version", "version = 1\n", "version = 2\n"),
    ("an unknown upstream key", 'branch = "main"\n', 'branch = "main"\nbrnch = "main"\n'),
    ("a missing name", 'name = "kernels"\n', ""),
    ("a bad upstream name", 'name = "kernels"', 'name = "Kernels!"'),
    ("a number as base", 'base = "v1.0"', "base = 1"),
    ("a short base-commit", 'base = "v1.0"\n', 'base = "v1.0"\nbase-commit = "abc123"\n'),
    ("requires as a string", 'patches = "patches/kernels"\n', 'patches = "patches/kernels"\nrequires = "app"\n'),
    ("an unknown build key", 'command = "make wheel"\n', 'command = "make wheel"\nimage = "x"\n'),
    ("a string build timeout", 'command = "make wheel"\n', 'command = "make wheel"\ntimeout = "4h"\n'),
    ("a zero test timeout", 'command = "pytest"\n', 'command = "pytest"\ntimeout = 0\n'),
    ("an unknown device kind", 'command = "pytest"\n', 'command = "pytest"\ndevices = ["gpu"]\n'),
    ("a non-string env value", 'command = "pytest"\n', 'command = "pytest"\nenv = { N = 1 }\n'),
    ("an empty test command", 'command = "pytest"', 'command = "  "'),
    ("a cuda-only entry with op and module", 'op = "cutlass_*"', 'op = "cutlass_*", module = "m"'),
    ("a cuda-only entry without why", ', why = "CUDA only"', ""),
    ("a baseline that is no .toml", "[verify]\n", '[verify]\nbaseline = "baseline.json"\n'),
    ("a bad github repository", "version = 1\n", 'version = 1\ngithub = { repository = "no-slash" }\n'),
    ("an unknown set key", "version = 1\n", 'version = 1\nset = { numpy = "2" }\n'),
]


def test_the_good_example_passes_the_schema_and_the_loader(tmp_path: Path) -> None:
    assert _errors(tomllib.loads(GOOD)) == []
    (tmp_path / "kpatch.toml").write_text(GOOD, encoding="utf-8")
    load(tmp_path / "kpatch.toml")


@pytest.mark.parametrize(("what", "old", "new"), BAD, ids=[what for what, _, _ in BAD])
def test_a_planted_bad_key_or_type_is_rejected_by_the_schema_and_the_loader(what: str, old: str, new: str,
                                                                            tmp_path: Path) -> None:
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    assert _errors(tomllib.loads(text)), f"the schema accepts {what}"
    (tmp_path / "kpatch.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError):
        load(tmp_path / "kpatch.toml")
