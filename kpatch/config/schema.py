"""The JSON Schema of kpatch.toml, made from the keys the loader takes (load.py, tables.py) and the model's defaults.

Shipped as kpatch/config/kpatch.schema.json for editors (taplo, Even Better TOML: `#:schema` on a file's first
line); `scripts/gen-config-schema` writes it and docs/config.md's key reference, and a test fails when either differs
from what this module makes. kpatch itself never reads the schema: load.py stays the one check, with file:line errors.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kpatch.config.lines import LINE_KEYS, LINE_REQUIRED
from kpatch.config.load import REQUIRED, TOP_KEYS, UPSTREAM_KEYS
from kpatch.config.model import (
    CONFIG_VERSION,
    DEFAULT_BUILD_TIMEOUT,
    DEFAULT_TEST_TIMEOUT,
    DEVICE_KINDS,
    NAME_RE,
    PYTORCH_XPU_INDEX,
    SHA_RE,
)
from kpatch.config.tables import (
    BUILD_KEYS,
    CUDA_ONLY_KEYS,
    DASHBOARD_KEYS,
    DEFAULT_BASELINE,
    DEFAULT_KEEP,
    DEFAULT_MAX_STEPS,
    GITHUB_KEYS,
    NIGHTLY_KEYS,
    PROPOSE_KEYS,
    RELEASE_KEYS,
    SET_KEYS,
    TEST_KEYS,
    VERIFY_KEYS,
)
from kpatch.forge.github.names import OWNER_PATTERN

SCHEMA_FILE = Path(__file__).with_name("kpatch.schema.json")
LINE_TABLE = "line.NAME.UPSTREAM"  # a release line's upstream, as docs/config.md names it
SCHEMA_ID = "https://github.com/kpatch-dev/kpatch/blob/main/kpatch/config/kpatch.schema.json"
_NONEMPTY = {"type": "string", "pattern": r"\S"}  # the loader's "non-empty string" (not only spaces)
_STRINGS = {"type": "array", "items": {"type": "string"}}
_NONEMPTY_STRINGS = {"type": "array", "items": _NONEMPTY}
_ENV = {"type": "object", "additionalProperties": {"type": "string"}}
_SECONDS = {"type": "number", "minimum": 0, "exclusiveMinimum": True}  # draft 4: a boolean

# Every key of every table: its schema, what it means, and an example. (table, key) must match the loader's keys
# exactly: schema() fails on a key the loader takes that has no entry here, and on an entry the loader does not take.
_KEYS: dict[tuple[str, str], dict[str, Any]] = {
    ("", "version"): {"type": "integer", "enum": [CONFIG_VERSION],
                      "description": "The stack file's format version.", "examples": [CONFIG_VERSION]},
    ("", "upstream"): {"description": "The upstreams, one [[upstream]] table each, in any order: `requires` decides "
                                      "the order their stacks are applied in.",
                       "examples": [[{"name": "vllm", "url": "https://github.com/vllm-project/vllm.git",
                                      "branch": "main", "base": "v0.33.0", "patches": "patches/vllm"}]]},
    ("", "line"): {"description": "Release lines beside main (the [[upstream]] tables): `[line.\"NAME\".UPSTREAM]` "
                                  "gives, for every upstream, the branch and base the line follows and its own "
                                  "patch folder; commands take `--line NAME` (default main).",
                   "examples": [{"0.33": {"vllm": {"branch": "releases/v0.33", "base": "v0.33.0"}}}]},
    ("", "github"): {"description": "Where `kpatch nightly` opens its pull request and issue (else "
                                    "$GITHUB_REPOSITORY).", "examples": [{"repository": "owner/name"}]},
    ("", "dashboard"): {"description": "The carry history the nightly appends to, and the dashboard issue "
                                       "(`kpatch report`).",
                        "examples": [{"history": "reports/nightly/history.jsonl"}]},
    ("", "nightly"): {"description": "How far `kpatch nightly` searches, when the upstream heads are red, for the "
                                     "last upstream commits at which the whole chain is green.",
                      "examples": [{"max-steps": 8, "budget": 7200, "runners": 3}]},
    ("", "release"): {"description": "Where `kpatch release --to DIR` publishes the set and what its nightly "
                                     "channel keeps.",
                      "examples": [{"url": "https://example.org/kimi-xpu", "keep": 7}]},
    ("", "set"): {"description": "What the whole set of wheels builds against.",
                  "examples": [{"torch": "2.14.0+xpu"}]},
    ("", "verify"): {"description": "What `kpatch verify` allows vLLM to call without an XPU kernel.",
                     "examples": [{"baseline": DEFAULT_BASELINE}]},
    ("upstream", "name"): {"type": "string", "pattern": NAME_RE.pattern,
                           "description": "The upstream's name: lower case letters, digits, `.`, `_`, `-`; names "
                                          "its worktree, mirror and KPATCH_URL_<NAME>.",
                           "examples": ["vllm-xpu-kernels"]},
    ("upstream", "url"): {"type": "string", "pattern": r"^[^\s-](.*\S)?$",
                          "description": "Where the upstream is fetched from: https, ssh, git, file or a local path "
                                         "(no http://, no remote helpers such as ext::).",
                          "examples": ["https://github.com/vllm-project/vllm.git"]},
    ("upstream", "branch"): {**_NONEMPTY, "description": "The branch `kpatch rebase` moves the stack onto.",
                             "examples": ["main"]},
    ("upstream", "base"): {**_NONEMPTY, "description": "What the stack applies onto: a full commit SHA or a tag.",
                           "examples": ["v0.33.0", "4543b580fecca68a7dd54ddaf6e444dc5f11a6a4"]},
    ("upstream", "base-commit"): {"type": "string", "pattern": SHA_RE.pattern,
                                  "description": "The 40-hex SHA a tag `base` must resolve to (a mismatch is an "
                                                 "error; a warning with --url).",
                                  "examples": ["4543b580fecca68a7dd54ddaf6e444dc5f11a6a4"]},
    ("upstream", "patches"): {**_NONEMPTY, "description": "The stack's folder (its `series` and patch files), "
                                                          "relative to kpatch.toml and inside its folder "
                                                          "(no other upstream's, and neither inside nor around one).",
                              "examples": ["patches/vllm"]},
    ("upstream", "requires"): {**_STRINGS, "default": [],
                               "description": "Names of the upstreams whose stacks and wheels this one needs first.",
                               "examples": [["vllm-xpu-kernels"]]},
    ("upstream", "test-selection"): {"type": "boolean", "default": False,
                                     "description": "During a nightly scrolling step, run first the tests whose files "
                                     "or imports the upstream diff touches, then the rest; the report says which. The "
                                     "test command must take its files from $KPATCH_TESTS, e.g. "
                                     "`pytest ${KPATCH_TESTS:-tests}`.",
                                     "examples": [True]},
    ("upstream", "build"): {"description": "How build-wheels builds the upstream's wheel (needed by build-wheels).",
                            "examples": [{"command": "python3 setup.py bdist_wheel --dist-dir=$KPATCH_OUT"}]},
    ("upstream", "test"): {"description": "How `kpatch test` runs the upstream's suite against the locked pair "
                                          "(needed by kpatch test).",
                           "examples": [{"command": "python3 -m pytest -v tests --junitxml=$KPATCH_JUNIT"}]},
    (LINE_TABLE, "branch"): {**_NONEMPTY, "description": "The branch `kpatch rebase --line NAME` moves the line's "
                                                        "stack onto.", "examples": ["releases/v0.33"]},
    (LINE_TABLE, "base"): {**_NONEMPTY, "description": "What the line's stack applies onto: a full commit SHA or a "
                                                      "tag.", "examples": ["v0.33.0"]},
    (LINE_TABLE, "base-commit"): {"type": "string", "pattern": SHA_RE.pattern,
                                  "description": "The 40-hex SHA a tag `base` must resolve to.",
                                  "examples": ["4ba787ec9f0c2b0f3e1d6a8b7c5e4d3c2b1a0f9e"]},
    (LINE_TABLE, "patches"): {**_NONEMPTY, "default": "patches/NAME/UPSTREAM",
                              "description": "The line's stack folder for this upstream, relative to kpatch.toml "
                                            "(no other line's or main's, and neither inside nor around one).",
                              "examples": ["patches/0.33/vllm"]},
    ("upstream.build", "command"): {**_NONEMPTY, "description": "The upstream's documented build command, run in a "
                                                                "copy of the source; the wheel must land in "
                                                                "$KPATCH_OUT.",
                                    "examples": ["python3 setup.py bdist_wheel --dist-dir=$KPATCH_OUT"]},
    ("upstream.build", "env"): {**_ENV, "default": {}, "description": "Environment variables for the build.",
                                "examples": [{"VLLM_TARGET_DEVICE": "xpu"}]},
    ("upstream.build", "pin-files"): {**_STRINGS, "default": [],
                                      "description": "Requirement files (or pyproject.toml) whose pins on required "
                                                     "upstreams' wheels, and on torch, are rewritten.",
                                      "examples": [["requirements/xpu.txt"]]},
    ("upstream.build", "timeout"): {**_SECONDS, "default": DEFAULT_BUILD_TIMEOUT,
                                    "description": "Seconds one wheel's build may take, then it is killed and "
                                                   "nothing is kept (build-wheels --timeout overrides).",
                                    "examples": [14400]},
    ("upstream", "propose"): {"description": "Where `kpatch propose` sends the stack's patches as pull requests "
                                             "(docs/propose.md).",
                              "examples": [{"fork": "https://github.com/acme/vllm.git"}]},
    ("upstream.propose", "repository"): {"type": "string", "pattern": f"^{OWNER_PATTERN}/[A-Za-z0-9_.-]{{1,100}}$",
                                         "description": "The upstream on GitHub (owner/name), where the pull "
                                                        "requests open; default: from `url`.",
                                         "examples": ["vllm-project/vllm"]},
    ("upstream.propose", "fork"): {**_NONEMPTY, "description": "The fork's URL the branches are pushed to; "
                                                               "default: `url` with --fork's owner.",
                                   "examples": ["https://github.com/acme/vllm.git"]},
    ("upstream.test", "command"): {**_NONEMPTY, "description": "Runs the suite in a copy of `paths` of the patched "
                                                               "tree; writes JUnit XML to $KPATCH_JUNIT.",
                                   "examples": ["python3 -m pytest -v tests --junitxml=$KPATCH_JUNIT"]},
    ("upstream.test", "junit"): {"type": "string", "default": "junit.xml",
                                 "description": "Where `command` writes JUnit XML, relative to the test folder.",
                                 "examples": ["junit.xml"]},
    ("upstream.test", "paths"): {**_NONEMPTY_STRINGS, "minItems": 1, "default": ["tests"],
                                 "description": "What of the patched tree goes in (relative paths; never the "
                                                "package source, which would shadow the installed wheel).",
                                 "examples": [["tests", "pyproject.toml"]]},
    ("upstream.test", "requires"): {**_NONEMPTY_STRINGS, "default": [],
                                    "description": "pip arguments for the test image, resolved with the pair.",
                                    "examples": [["pytest==9.0.3", "-r requirements/test/xpu.txt"]]},
    ("upstream.test", "devices"): {"type": "array", "items": {"enum": list(DEVICE_KINDS)}, "default": [],
                                   "description": "Device kinds the suite cannot run without (exit 7 when absent).",
                                   "examples": [["xpu"]]},
    ("upstream.test", "env"): {**_ENV, "default": {}, "description": "Environment variables for the suite.",
                               "examples": [{"PIP_EXTRA_INDEX_URL": "https://download.pytorch.org/whl/xpu"}]},
    ("upstream.test", "timeout"): {**_SECONDS, "default": DEFAULT_TEST_TIMEOUT,
                                   "description": "Seconds one run of the suite may take (--timeout overrides).",
                                   "examples": [3600]},
    ("github", "repository"): {"type": "string", "pattern": f"^{OWNER_PATTERN}/[A-Za-z0-9_.-]{{1,100}}$",
                               "description": "owner/name, by GitHub's name rules.", "examples": ["owner/name"]},
    ("dashboard", "history"): {"type": "string", "pattern": r"^.*[^/]$",
                               "description": "The carry history file of main (JSON lines), relative to kpatch.toml "
                                              "or absolute, inside the project (default: history.jsonl in the "
                                              "nightly's report folder; a release line's is always "
                                              "`reports-<line>/nightly/history.jsonl`).",
                               "examples": ["reports/nightly/history.jsonl"]},
    ("dashboard", "issue"): {"type": "boolean", "default": False,
                             "description": "The nightly keeps one \"kpatch carry dashboard\" issue on GitHub and "
                                            "edits it in place.", "examples": [True]},
    ("nightly", "max-steps"): {"type": "integer", "minimum": 0, "default": DEFAULT_MAX_STEPS,
                               "description": "Bisection steps (a whole chain each: rebase, build, verify, test) the "
                                              "search may take; 0: no search (--max-steps overrides).",
                               "examples": [8]},
    ("nightly", "budget"): {**_SECONDS, "description": "Seconds of wall clock the search may take (--budget "
                                                       "overrides); no budget when not set.", "examples": [7200]},
    ("nightly", "runners"): {"type": "integer", "minimum": 1, "default": 1,
                             "description": "Commits the search tries at once per round, each step on a local "
                                            "worker process; 1: a bisection (--runners overrides).",
                             "examples": [3]},
    ("release", "url"): {"type": "string", "pattern": r"^(https?|file)://\S+$",
                         "description": "The URL DIR is served at: the index's and each release lock's URLs start "
                                        "with it (--base-url overrides; default: DIR's file:// URL).",
                         "examples": ["https://example.org/kimi-xpu"]},
    ("release", "keep"): {"type": "integer", "minimum": 1, "default": DEFAULT_KEEP,
                          "description": "The sets the nightly channel's index lists; older ones leave the index "
                                         "(their files and release folders stay).", "examples": [7]},
    ("release", "torch-index"): {"type": "string", "pattern": r"^(https?|file)://\S+$",
                                 "default": PYTORCH_XPU_INDEX,
                                 "description": "The package index the set's torch comes from: the release lock "
                                                "names its wheels there, pip's command adds it as an extra index.",
                                 "examples": [PYTORCH_XPU_INDEX]},
    ("release", "nightly"): {"type": "boolean", "default": False,
                             "description": "A green night publishes its set on the nightly channel of `to` "
                                            "(as `kpatch release --channel nightly --to TO`).", "examples": [True]},
    ("release", "to"): {"type": "string", "minLength": 1,
                        "description": "Where `kpatch release` publishes when no --to is given (--to overrides "
                                       "it), and where the nightly publishes: a folder (relative to kpatch.toml) "
                                       "or \"github\" (a GitHub Release and the index's branch); needed with "
                                       "nightly = true.", "examples": ["site", "github"]},
    ("release", "pages-remote"): {"type": "string", "minLength": 1,
                                  "description": "With github: the git URL (or path) the index's branch is pushed "
                                                 "to (default: the [github] repository on GitHub).",
                                  "examples": ["https://github.com/kpatch/kimi-xpu.git"]},
    ("release", "pages-branch"): {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._/-]*$",
                                  "default": "gh-pages",
                                  "description": "With github: the branch that holds the index (GitHub Pages "
                                                 "serves it).", "examples": ["gh-pages"]},
    ("set", "torch"): {"type": "string", "pattern": r"^[0-9][0-9A-Za-z.!+_-]*$",
                       "description": "One exact torch version every upstream builds against (a local label such "
                                      "as +xpu allowed); written into every upstream's pin files.",
                       "examples": ["2.14.0+xpu"]},
    ("verify", "cuda-only"): {"default": [],
                              "description": "Ops (name, library.name or a pattern) or calling modules the XPU path "
                                             "never needs, each with why.",
                              "examples": [[{"op": "cutlass_*", "why": "CUTLASS kernels: CUDA only"}]]},
    ("verify", "baseline"): {"type": "string", "pattern": r"^[^/].*\.toml$", "default": DEFAULT_BASELINE,
                             "description": "Accepted contract findings (`kpatch verify --update-baseline`), "
                                            "relative to kpatch.toml, inside its folder.",
                             "examples": [DEFAULT_BASELINE]},
    ("verify.cuda-only", "op"): {**_NONEMPTY, "examples": ["cutlass_*"],
                                 "description": "An op: name, library.name or an fnmatch pattern (an entry names "
                                                "exactly one of op and module)."},
    ("verify.cuda-only", "module"): {**_NONEMPTY, "examples": ["vllm.vllm_flash_attn"],
                                     "description": "A calling module (dotted), its submodules too (an entry names "
                                                    "exactly one of op and module)."},
    ("verify.cuda-only", "why"): {**_NONEMPTY, "description": "Why the XPU path never needs it.",
                                  "examples": ["imported on CUDA only"]},
}

# The tables, each with the loader's keys and the keys it requires.
TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "": (TOP_KEYS, ("version", "upstream")),
    "upstream": (UPSTREAM_KEYS, REQUIRED),
    "upstream.build": (BUILD_KEYS, ("command",)),
    "upstream.test": (TEST_KEYS, ("command",)),
    "upstream.propose": (PROPOSE_KEYS, ()),
    "github": (GITHUB_KEYS, ("repository",)),
    "set": (SET_KEYS, ()),
    "verify": (VERIFY_KEYS, ()),
    "dashboard": (DASHBOARD_KEYS, ()),
    "nightly": (NIGHTLY_KEYS, ()),
    "release": (RELEASE_KEYS, ()),
    "verify.cuda-only": (CUDA_ONLY_KEYS, ("why",)),
    LINE_TABLE: (LINE_KEYS, LINE_REQUIRED),
}
_ARRAYS = {"upstream": 1, "verify.cuda-only": 0}  # the tables that come as arrays, with their fewest items


def key_spec(table: str, key: str) -> dict[str, Any]:
    """What the schema says of one key (its own entry, without the tables nested in it)."""
    spec = _KEYS.get((table, key))
    if spec is None:
        raise KeyError(f"kpatch.toml key {'.'.join(filter(None, (table, key)))!r} is taken by the loader but "
                       "kpatch/config/schema.py does not describe it")
    return spec


def _table(table: str) -> dict[str, Any]:
    keys, required = TABLES[table]
    properties: dict[str, Any] = {}
    for key in keys:
        spec = dict(key_spec(table, key))
        child = f"{table}.{key}" if table else key
        if child in _ARRAYS:  # an array of tables: [[upstream]], cuda-only = [{ ... }]
            spec |= {"type": "array", "minItems": _ARRAYS[child], "items": _table(child)}
        elif child == "line":  # [line."NAME".UPSTREAM]: names the loader checks (main is no line's)
            named = {"type": "object", "additionalProperties": False,
                     "patternProperties": {NAME_RE.pattern: _table(LINE_TABLE)}}
            spec |= {"type": "object", "additionalProperties": False,
                     "patternProperties": {NAME_RE.pattern: named}}
        elif child in TABLES:
            spec = {**_table(child), **spec}
        properties[key] = spec
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    if table == "verify.cuda-only":  # exactly one of op and module
        out["oneOf"] = [{"required": ["op"]}, {"required": ["module"]}]
    return out


def schema() -> dict[str, Any]:
    """The JSON Schema of kpatch.toml: draft 4, the one taplo reads whole, with no lookaround in a pattern (the
    loader's own checks, such as GitHub's `.`/`..` rule, stay in load.py)."""
    described = {table for table, _ in _KEYS}
    stray = [f"{t}.{k}" for t, k in _KEYS if t not in TABLES or k not in TABLES[t][0]]
    if stray or described != set(TABLES):
        raise KeyError(f"kpatch/config/schema.py describes keys the loader does not take: {sorted(stray)}")
    return {"$schema": "http://json-schema.org/draft-04/schema#", "id": SCHEMA_ID, "title": "kpatch.toml",
            "description": "kpatch's stack file: the upstreams, their patch stacks, builds and test suites.",
            **_table("")}


def schema_text() -> str:
    """The schema as kpatch/config/kpatch.schema.json holds it."""
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


def key_rows() -> list[tuple[str, dict[str, Any], bool]]:
    """Every key as (dotted path, its entry, required), in the loader's order: what docs/config.md lists."""
    rows = []
    for table, (keys, required) in TABLES.items():
        for key in keys:
            rows.append((f"{table}.{key}" if table else key, key_spec(table, key), key in required))
    return rows


def toml_value(value: Any) -> str:
    """A value as inline TOML (the examples and defaults of docs/config.md)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string of these is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{ " + ", ".join(f"{_toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }" if value else "{}"


def _toml_key(key: str) -> str:
    """A key as TOML takes it: bare when it can be (`max-steps`), quoted else (`"0.33"`, not a dotted key)."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _type_name(spec: dict[str, Any], path: str) -> str:
    if path in _ARRAYS:
        return "array of tables"
    if path in TABLES:
        return "table"
    if path == "line":
        return "table of lines, each a table of upstreams"
    kind = spec["type"]
    if kind == "array":
        return "array of strings"
    if kind == "object":
        return "table of strings"
    return str(kind)


def reference_table() -> str:
    """docs/config.md's key reference: one row per key the loader takes."""
    rows = ["| key | type | required | default | example | what it is |", "|---|---|---|---|---|---|"]
    for path, spec, required in key_rows():
        default = toml_value(spec["default"]) if "default" in spec else "-"
        example = f"{path.rsplit('.', 1)[-1]} = {toml_value(spec['examples'][0])}"
        cells = [f"`{path}`", _type_name(spec, path), "yes" if required else "no", f"`{default}`" if
                 default != "-" else default, f"`{example}`", spec["description"]]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows) + "\n"
