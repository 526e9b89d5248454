"""Write kpatch/commands/schemas/<command>.json: the JSON Schema (draft 2020-12) of each command's --json output,
made from the result types the command prints (dataclasses, enums, paths; a field's JSON name from its metadata).

  python scripts/json_schemas.py          # write them
  python scripts/json_schemas.py --check  # exit 1 when a shipped schema differs from what the types give

docs/json.md says what the envelope holds and when its version changes.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any

from kpatch.adopt.branch import ImportResult
from kpatch.adopt.init import InitResult
from kpatch.adopt.propose import ProposeResult
from kpatch.dashboard.night import Report
from kpatch.dashboard.report import Written
from kpatch.demo.adoption import AdoptResult
from kpatch.demo.pipeline import DemoResult
from kpatch.demo.scrolling import ScrollResult
from kpatch.doctor import DoctorReport
from kpatch.engine.apply import ApplyResult
from kpatch.engine.diff import DiffResult
from kpatch.engine.export import FileChange
from kpatch.engine.reports import RebaseResult
from kpatch.engine.status import StatusResult
from kpatch.lines.backport import BackportResult
from kpatch.lines.matrix import LineMatrix
from kpatch.nightly.matrix import PLAN_KIND, PLAN_VERSION, STEP_KIND, STEP_VERSION, RoundPlan, StepRecord
from kpatch.nightly.replay import Replay
from kpatch.output.ui import JSON_VERSION
from kpatch.testing.run import TestRun
from kpatch.verify.run import VerifyResult
from kpatch.wheels.build import BuildResult
from kpatch.wheels.release import Published

FOLDER = Path(__file__).resolve().parents[1] / "kpatch" / "commands" / "schemas"
FILES = Path(__file__).resolve().parents[1] / "kpatch" / "nightly" / "schemas"  # files kpatch writes and reads
DIALECT = "https://json-schema.org/draft/2020-12/schema"
STRINGS = {"type": "array", "items": {"type": "string"}}


def of_type(kind: Any) -> dict[str, Any]:
    """The schema of a value of type `kind` as kpatch.output.ui.to_jsonable writes it."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        options = [of_type(a) for a in args]
        return {"anyOf": options}
    if origin in (tuple, list, set, frozenset):
        return {"type": "array", "items": of_type(args[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": of_type(args[1])}
    if kind is type(None):
        return {"type": "null"}
    if isinstance(kind, type) and issubclass(kind, Enum):
        return {"enum": [m.value for m in kind]}
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return of_dataclass(kind)
    simple = {str: "string", Path: "string", bool: "boolean", int: "integer", float: "number"}
    if kind in simple:
        return {"type": simple[kind]}
    if kind is object or kind is Any:
        return {}
    raise TypeError(f"no JSON schema for {kind!r}")


def of_dataclass(kind: type) -> dict[str, Any]:
    hints = typing.get_type_hints(kind)
    fields = dataclasses.fields(kind)
    names = [f.metadata.get("json", f.name) for f in fields]
    return {"type": "object", "properties": {name: of_type(hints[f.name]) for name, f in zip(names, fields,
                                                                                             strict=True)},
            "required": names, "additionalProperties": False}


def obj(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def with_log(kind: type) -> dict[str, Any]:
    """A demo's result with the path of the run's log."""
    schema = of_type(kind)
    return {**schema, "properties": {"log": {"type": ["string", "null"]}, **schema["properties"]},
            "required": ["log", *schema["required"]]}


def results() -> dict[str, dict[str, Any]]:
    """Each command's result schema (several when its options give different results: one of them)."""
    return {
        "apply": {"oneOf": [of_type(ApplyResult), obj(restored=STRINGS)]},
        "rebase": {"oneOf": [of_type(RebaseResult), obj(aborted=STRINGS)]},
        "export": {"oneOf": [obj(written={"type": "boolean"}, files={"type": "array", "items": of_type(FileChange)}),
                             obj(aborted={"const": True})]},
        "status": {"oneOf": [of_type(StatusResult), of_type(LineMatrix)]},  # --lines: the patch x line matrix
        "backport": {"oneOf": [of_type(BackportResult), obj(aborted=STRINGS)]},
        "diff": of_type(DiffResult),
        "build-wheels": of_type(BuildResult),
        "verify": of_type(VerifyResult),
        "test": of_type(TestRun),
        # a night (or --collect's end of one), --replay's nights, --run-step's result, --collect's next plan
        "nightly": {"oneOf": [of_type(Report), of_type(Replay), of_type(StepRecord), of_type(RoundPlan)]},
        "demo": {"oneOf": [with_log(DemoResult), with_log(AdoptResult), with_log(ScrollResult)]},
        "doctor": of_type(DoctorReport),
        "init": of_type(InitResult),
        "report": of_type(Written),
        "import": {"oneOf": [of_type(ImportResult), obj(aborted={"type": "boolean"}, finished={"type": "boolean"})]},
        "release": of_type(Published),
        "propose": {"oneOf": [of_type(ProposeResult), obj(aborted={"type": "boolean"}, finished={"type": "boolean"})]},
    }


def schema(command: str, result: dict[str, Any]) -> dict[str, Any]:
    """The envelope around `result`: ok with a result, or not ok with an error (and a result when the command
    got one: a conflict, a failed check)."""
    error = obj(message={"type": "string"}, exit_code={"type": "integer", "minimum": 1},
                detail={"type": "array", "items": {"type": "string"}}, log={"type": ["string", "null"]})
    return {
        "$schema": DIALECT,
        "$id": f"https://github.com/kpatch-dev/kpatch/kpatch/commands/schemas/{command}.json",
        "title": f"kpatch {command} --json",
        "description": f"The output of `kpatch {command} --json` (envelope version {JSON_VERSION}; docs/json.md).",
        "type": "object",
        "properties": {"kpatch": {"const": JSON_VERSION}, "kpatch_version": {"type": "string"},
                       "command": {"const": command}, "ok": {"type": "boolean"},
                       "result": {"anyOf": [{"$ref": "#/$defs/result"}, {"type": "null"}]},
                       "error": {"anyOf": [error, {"type": "null"}]}},
        "required": ["kpatch", "kpatch_version", "command", "ok", "result", "error"],
        "additionalProperties": False,
        "oneOf": [{"properties": {"ok": {"const": True}, "result": {"$ref": "#/$defs/result"},
                                  "error": {"type": "null"}}},
                  {"properties": {"ok": {"const": False}, "error": error}}],
        "$defs": {"result": result},
    }


def file_schema(name: str, kind: type, const: dict[str, object], title: str) -> dict[str, Any]:
    """The schema of a versioned file kpatch writes and reads back (its kind and version fixed)."""
    body = of_type(kind)
    body["properties"].update({key: {"const": value} for key, value in const.items()})
    return {"$schema": DIALECT, "$id": f"https://github.com/kpatch-dev/kpatch/kpatch/nightly/schemas/{name}",
            "title": title, **body}


def files() -> dict[str, dict[str, Any]]:
    """The search's files between the jobs of the CI's matrix (kpatch/nightly/matrix.py, docs/nightly.md)."""
    return {
        "scroll-plan.json": file_schema("scroll-plan.json", RoundPlan, {"kind": PLAN_KIND, "version": PLAN_VERSION},
                                        "plan.json: a round of the search for the CI's matrix"),
        "scroll-step.json": file_schema("scroll-step.json", StepRecord, {"kind": STEP_KIND, "version": STEP_VERSION},
                                        "result.json: one step of the search, as its job ran it"),
    }


def rendered() -> dict[Path, str]:
    """File -> its text."""
    made = {FOLDER / f"{command}.json": json.dumps(schema(command, result), indent=2) + "\n"
            for command, result in results().items()}
    return made | {FILES / name: json.dumps(body, indent=2) + "\n" for name, body in files().items()}


def main(argv: list[str]) -> int:
    texts = rendered()
    if "--check" in argv:
        stale = [path for path, text in texts.items()
                 if not path.is_file() or path.read_text(encoding="utf-8") != text]
        for path in stale:
            print(f"{path.relative_to(FOLDER.parents[2])} is stale: run python scripts/json_schemas.py",
                  file=sys.stderr)
        return 1 if stale else 0
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
