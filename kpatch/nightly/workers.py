"""The search's rounds on local worker processes (`kpatch nightly --runners N`, `[nightly] runners = N`): a build
host with several GPUs or cores runs a round's N steps at once.

Worker K works in a folder of its own under the search's scratch (`.kpatch/scroll/worker-K/`): a copy of the
project (made once, then each round its kpatch.toml, patches/ and run state put back as they were before the
night), with its own work folder, the worktrees of its steps, `dist/`, `reports/` and its log, `step.log`. It
runs one step (`python -m kpatch.nightly.worker`, a process of its own, so its containers have names of their own:
they carry its pid) and writes the step's result (`result.json`, versioned). The cache (the mirrors, the wheel
cache) is the night's: its writer lock is the night's, held for the workers while they run; a step fetches
nothing (the night fetched every commit it tries).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import kpatch
from kpatch.dashboard.night import _decode
from kpatch.files import write_atomic
from kpatch.nightly.scroll import Attempt, Ran, Runner, Saved, Trial
from kpatch.nightly.stages import Settings
from kpatch.output.ui import UI, to_jsonable
from kpatch.project.places import KPATCH_DIR
from kpatch.project.workspace import Workspace

SPEC_VERSION = 1  # spec.json: what a worker is asked to run
RESULT_VERSION = 1  # result.json: what its step did
SPEC, RESULT, LOG, LOCK = "spec.json", "result.json", "step.log", "step-pylock.toml"
_NOT_COPIED = {KPATCH_DIR, ".git", "dist"}  # the project's own scratch, history and build output


def worker_folder(saved: Saved, number: int) -> Path:
    return saved.folder / f"worker-{number}"


def local(ws: Workspace, ui: UI, settings: Settings, saved: Saved, bases: Mapping[str, str]) -> Runner:
    """A runner that runs each round's steps at once, step K of a round on worker K."""
    def run(trials: Sequence[Trial]) -> list[Ran]:
        started: list[tuple[int, Path, subprocess.Popen[bytes], IO[bytes]]] = []
        try:
            for number, trial in enumerate(trials, 1):
                folder = worker_folder(saved, number)
                prepare(ws, saved, folder / "project")
                for stale in (folder / RESULT, folder / LOCK):
                    stale.unlink(missing_ok=True)
                spec = {"version": SPEC_VERSION, "project": str(folder / "project"), "cache": str(ws.cache_dir),
                        "workdir": str(folder / "project" / "work"), "onto": dict(trial.onto), "bases": dict(bases),
                        "settings": to_jsonable(settings), "result": str(folder / RESULT), "lock": str(folder / LOCK)}
                write_atomic(folder / SPEC, json.dumps(spec, indent=2).encode())
                output: IO[bytes] = (folder / LOG).open("wb")
                proc = subprocess.Popen([sys.executable, "-m", "kpatch.nightly.worker", str(folder / SPEC)],  # noqa: S603
                                        stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                        env=_environ(), start_new_session=True)
                started.append((number, folder, proc, output))
                ui.note(f"scroll: worker {number} (pid {proc.pid}) runs {trial.upstream} at {trial.commit[:12]}; "
                        f"its log: {folder / LOG}")
            with ui.group(f"kpatch nightly: scroll, {len(started)} step(s) on local workers"):
                for _number, _folder, proc, output in started:
                    proc.wait()
                    output.close()
            return [_collected(number, folder, proc.returncode) for number, folder, proc, _log in started]
        finally:
            for _number, _folder, proc, output in started:  # interrupted: no worker outlives the night
                if proc.poll() is None:
                    _stop(proc)
                output.close()
    return run


def prepare(ws: Workspace, saved: Saved, project: Path) -> None:
    """The worker's copy of the project, its files as they were before the night."""
    root = ws.stack.root.resolve()
    apart = {ws.workdir.resolve(), ws.cache_dir.resolve()}  # the night's worktrees, and a cache inside the project
    if not project.is_dir():
        def ignored(folder: str, names: list[str]) -> set[str]:
            here = Path(folder).resolve()
            return {n for n in names if (here == root and n in _NOT_COPIED) or here / n in apart}
        shutil.copytree(root, project, symlinks=True, ignore=ignored)
    saved.restore_into(project)


def _collected(number: int, folder: Path, code: int) -> Ran:
    where = f"worker {number}"
    try:
        data = json.loads((folder / RESULT).read_text(encoding="utf-8"))
        if data.get("version") != RESULT_VERSION:
            raise ValueError(f"result version {data.get('version')!r}, not {RESULT_VERSION}")
        lock = data["attempt"].pop("lock")
        attempt = _decode(Attempt, {**data["attempt"], "lock": None})
        assert isinstance(attempt, Attempt)
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as err:
        tail = _tail(folder / LOG)
        return Ran(None, 0.0, where, f"the worker exited {code} without a step result ({err}); the end of its log "
                                     f"{folder / LOG}: {tail}")
    kept = Path(lock).read_bytes() if lock else None
    return Ran(replace(attempt, lock=kept), float(data["seconds"]), where)


def write_result(path: Path, attempt: Attempt, seconds: float, lock_path: Path) -> None:
    """The worker's step result: the attempt (its lock as the file it is written to), versioned."""
    if attempt.lock is not None:
        write_atomic(lock_path, attempt.lock)
    data: dict[str, Any] = to_jsonable(replace(attempt, lock=None))
    data["lock"] = str(lock_path) if attempt.lock is not None else None
    write_atomic(path, json.dumps({"version": RESULT_VERSION, "seconds": round(seconds, 3), "attempt": data},
                                  indent=2).encode())


def _environ() -> dict[str, str]:
    """The night's environment, with this kpatch first on the path (the worker runs the same code)."""
    here = str(Path(kpatch.__file__).resolve().parents[1])
    paths = [here, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != here)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a worker and what it started (its own session), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        proc.wait()


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty)"

