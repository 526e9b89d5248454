"""Every command's --json output, from real runs on the example project, is what its shipped JSON Schema says:
the envelope (kpatch, command, ok, result, error) and the result's fields, in success and in failure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kpatch.errors import ExitCode
from kpatch.examples.moves import move_upstreams
from kpatch.examples.upstreams import make_example_project
from tests.support.cli import run_kpatch
from tests.support.json_envelope import checked, schema

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("apply", "rebase", "diff", "export", "status", "build-wheels", "verify", "test", "nightly", "demo",
            "doctor", "init", "import", "report", "propose", "release", "backport")


@pytest.mark.unit
def test_every_command_ships_a_valid_draft_2020_12_schema() -> None:
    for command in COMMANDS:
        jsonschema.Draft202012Validator.check_schema(schema(command))
    assert sorted(p.stem for p in (ROOT / "kpatch" / "commands" / "schemas").glob("*.json")) == sorted(COMMANDS)


@pytest.mark.unit
def test_the_shipped_schemas_are_what_the_result_types_give() -> None:
    ran = subprocess.run([sys.executable, str(ROOT / "scripts" / "json_schemas.py"), "--check"], cwd=ROOT,
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert ran.returncode == 0, ran.stderr


@pytest.mark.unit
def test_an_output_with_a_renamed_field_fails_its_schema() -> None:
    """A test of the check: the old names (klass, level, bare hunk pairs) are not accepted any more."""
    patch = {"upstream": "k", "name": "p", "klass": "clean", "applied": True, "why": "", "commit": None,
             "hunks": [["a", 1]], "culprit": None}
    stack = {"upstream": "k", "old_base": "a", "new_base": "b", "outcome": "done", "patches": [patch]}
    envelope = {"kpatch": 2, "command": "rebase", "ok": True, "error": None,
                "result": {"stacks": [stack], "github": None, "committed": True}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema("rebase")).validate(envelope)


def test_the_pipeline_outputs_match_their_schemas(tmp_path: Path) -> None:
    example = make_example_project(tmp_path)
    root, cache = example.root, ["--cache-dir", str(tmp_path / "cache")]

    def run(command: str, *args: str, code: int = 0) -> dict[str, Any]:
        ran = run_kpatch(root, command, "--json", *args, *cache)
        assert ran.exit_code == code, ran.output
        envelope = checked(ran.stdout, command)
        assert envelope["ok"] is (code == 0) and (envelope["error"] is None) is (code == 0)
        return envelope

    assert run("status")["result"]
    failed = run("verify", code=ExitCode.CONFLICT)  # nothing applied, no lock: nothing checked is a failure
    assert failed["result"] and failed["error"]["message"].startswith("verify failed")
    assert run("apply")["result"]
    assert run("export")["result"] == {"written": False, "files": run("export", "--check")["result"]["files"]}
    doctor = run_kpatch(root, "doctor", "--backend", "local", "--json", *cache)  # ok or not: this machine's say
    assert checked(doctor.stdout, "doctor")["ok"] is (doctor.exit_code == 0) and doctor.exit_code in (0, 1)
    unread = run("verify", "--lock", str(tmp_path / "none.toml"), code=ExitCode.BAD_INPUT)
    assert unread["result"] is None and "no lock at" in unread["error"]["message"]
    assert run("build-wheels", "--backend", "local")["result"]
    assert run("verify")["result"]
    assert run("test", "--backend", "local")["result"]
    move_upstreams(example)  # one kernels patch is now upstream, one app patch conflicts
    stopped = run("rebase", code=ExitCode.CONFLICT)
    assert stopped["result"] and "conflicts" in stopped["error"]["message"]
    assert run("rebase", "--abort")["result"]["aborted"]
    usage = run("apply", "--continue", "--abort", code=ExitCode.BAD_INPUT)
    assert usage["result"] is None and usage["error"]["exit_code"] == ExitCode.BAD_INPUT
