"""The run-state codec: every field survives a round trip; anything unexpected is one clear error, not a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kpatch.config import load
from kpatch.errors import WorktreeError
from kpatch.project import state
from kpatch.project.state import (
    Culprit,
    Evidence,
    How,
    Hunk,
    Kind,
    Operation,
    PatchRun,
    Phase,
    Prediction,
    Resolved,
    RunState,
    Settled,
    StackPhase,
    StackRun,
)
from kpatch.project.workspace import Workspace

WHERE = Path("/project/.kpatch/state.json")


def full_state() -> RunState:
    """A state with every enum value and every optional field in use."""
    patches = [PatchRun(name=f"000{i}-{phase.value.replace(' ', '-')}.patch", phase=phase) for i, phase in
               enumerate(Phase)]
    patches[0].how, patches[0].resolved, patches[0].hunks = How.THREE_WAY, Resolved.BY_HAND, [Hunk("a.c", 3)]
    patches[1].predicted, patches[1].evidence, patches[1].commit = Prediction.UPSTREAM, Evidence.EMPTY, "c" * 40
    patches[2].culprit = Culprit(sha="d" * 40, subject="Rewrite c", author="U <u@x>", date="2026-01-01", trials=6,
                                 commits=70)
    patches[3].detail, patches[3].hunks = "ü and \"quotes\"", [Hunk("b.c", None)]
    stacks = {"kernels": StackRun(name="kernels", base="a" * 40, tree="/w/.rebase/kernels", phase=StackPhase.STOPPED,
                                  old_base="b" * 40, head_before="e" * 40, patches=patches),
              "app": StackRun(name="app", base="f" * 40, tree="/w/app", previous_head=None, final_head="1" * 40)}
    return RunState(workdir="/w", settled={"kernels": Settled(base="a" * 40, head="2" * 40, tag="v1.0",
                                                              tag_commit="a" * 40)},
                    operation=Operation(kind=Kind.REBASE, stacks=stacks, github="GitHub unreachable",
                                        discard={"kernels": "3" * 40}))


def test_every_field_survives_a_round_trip() -> None:
    original = full_state()
    data = state.encode(original)
    assert json.loads(data)["version"] == state.STATE_VERSION
    assert state.decode(data, WHERE) == original
    assert state.encode(state.decode(data, WHERE)) == data  # byte-stable


def test_the_encoding_is_the_json_of_dataclasses_asdict_with_enum_values() -> None:
    """The one-walk encoder writes what `dataclasses.asdict` (enums by value) wrote, byte for byte."""
    from dataclasses import asdict
    from enum import Enum

    def plain(value: object) -> object:
        if isinstance(value, Enum):
            return value.value
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value

    original = full_state()
    fields = plain(asdict(original))
    assert isinstance(fields, dict)
    data = (json.dumps({"version": state.STATE_VERSION, **fields}, indent=1) + "\n").encode()
    assert state.encode(original) == data


def test_an_older_file_without_the_newer_optional_fields_still_reads() -> None:
    raw = json.loads(state.encode(full_state()))
    del raw["operation"]["discard"], raw["operation"]["github"]
    decoded = state.decode(json.dumps(raw).encode(), WHERE)
    assert decoded.operation is not None and decoded.operation.discard == {} and decoded.operation.github is None


def _broken(edit: str) -> bytes:
    raw = json.loads(state.encode(full_state()))
    stack = raw["operation"]["stacks"]["kernels"]
    if edit == "unknown field":
        stack["colour"] = "red"
    elif edit == "missing field":
        del stack["base"]
    elif edit == "bad enum":
        stack["patches"][0]["phase"] = "half done"
    elif edit == "bool for int":
        stack["patches"][2]["culprit"]["trials"] = True
    elif edit == "list for object":
        raw["settled"] = []
    return json.dumps(raw).encode()


@pytest.mark.parametrize("data", [b"{not json", b"\xff\xfe", b"[]", b'"text"', _broken("unknown field"),
                                  _broken("missing field"), _broken("bad enum"), _broken("bool for int"),
                                  _broken("list for object")],
                         ids=["not json", "not utf-8", "a list", "a string", "unknown field", "missing field",
                              "bad enum", "bool for int", "list for object"])
def test_anything_unexpected_is_one_line_naming_the_file(data: bytes) -> None:
    with pytest.raises(WorktreeError) as caught:
        state.decode(data, WHERE)
    message = str(caught.value)
    assert message.startswith(f"{WHERE}: ") and "\n" not in message and "kpatch apply" in message


@pytest.mark.parametrize("version", [1, 3, None, "2"])
def test_another_version_says_it_was_written_by_another_kpatch(version: object) -> None:
    raw = json.loads(state.encode(full_state()))
    raw["version"] = version
    with pytest.raises(WorktreeError, match=rf"run state version {version!r} is not 2 \(written by another kpatch\)"):
        state.decode(json.dumps(raw).encode(), WHERE)


@pytest.mark.parametrize("name", [".kpatch-state.json", ".kpatch-rebase.json", ".kpatch-rebase.journal",
                                  ".kpatch-export.journal"])
def test_a_state_file_of_the_old_layout_is_refused_with_a_way_out(tmp_path: Path, name: str) -> None:
    (tmp_path / "patches" / "k").mkdir(parents=True)
    (tmp_path / "kpatch.toml").write_text('version = 1\n\n[[upstream]]\nname = "k"\nurl = "/nowhere"\n'
                                          'branch = "main"\nbase = "v1"\npatches = "patches/k"\n')
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / name).write_text("{}")
    with pytest.raises(WorktreeError, match=f"{name}: run state of an older kpatch; finish or abort"):
        Workspace.create(load(tmp_path / "kpatch.toml"), tmp_path / "cache", None)
