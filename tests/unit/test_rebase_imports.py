"""What `kpatch rebase` loads: the modules its command runs (the command, the engine, and the carry history it
appends to, with the functions' own imports) and never the contract analyser (kpatch.verify.contract), which only
verify, build-wheels, the demo and the nightly run. No git: a fresh interpreter imports them and lists what came."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# `kpatch rebase`'s path: cli -> commands.rebase -> engine.rebase, then record_rebase (the carry history)
REBASE_RUNS = ("kpatch.cli", "kpatch.commands.rebase", "kpatch.engine.rebase", "kpatch.dashboard.record")


def loaded_by(modules: tuple[str, ...]) -> set[str]:
    code = ("import importlib, json, sys\n"
            f"for name in {list(modules)!r}:\n    importlib.import_module(name)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kpatch'))))")
    ran = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(ran.stdout))


def test_a_rebase_does_not_load_the_contract_analyser() -> None:
    loaded = loaded_by(REBASE_RUNS)
    assert "kpatch.dashboard.night" in loaded and "kpatch.verify.model" in loaded  # the walk reached them
    assert sorted(m for m in loaded if m.startswith("kpatch.verify.contract")) == []


def test_the_verify_face_imports_nothing() -> None:
    assert loaded_by(("kpatch.verify",)) == {"kpatch", "kpatch.verify"}
