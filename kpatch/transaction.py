"""Change many files as one step: stage every new file beside its target, journal the plan, then rename.

A crash after the journal is written is finished by `resume` (each step is an idempotent rename or
delete); a crash before it leaves only staged temp files, which `resume` removes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from kpatch.workspace import write_atomic


class Transaction:
    def __init__(self, journal: Path) -> None:
        self.journal = journal
        self.writes: dict[Path, bytes] = {}
        self.deletes: set[Path] = set()

    def write(self, path: Path, data: bytes) -> None:
        self.writes[path] = data

    def delete(self, path: Path) -> None:
        """Remove a file or a whole folder."""
        self.deletes.add(path)

    def commit(self) -> int:
        """Stage, journal, apply; return how many paths changed."""
        steps: list[list[str]] = []
        for path, data in self.writes.items():
            if path.is_file() and path.read_bytes() == data:
                continue
            staged = path.with_name(f".{path.name}.kpatch-new")
            write_atomic(staged, data)
            steps.append(["replace", str(staged), str(path)])
        steps += [["delete", str(path)] for path in sorted(self.deletes) if path.exists()]
        write_atomic(self.journal, json.dumps(steps, indent=1).encode())
        resume(self.journal)
        return len(steps)


def resume(journal: Path) -> None:
    """Carry out (the rest of) a journaled transaction, then drop the journal."""
    steps = json.loads(journal.read_text(encoding="utf-8"))
    for step in steps:
        if step[0] == "replace":
            staged, target = Path(step[1]), Path(step[2])
            if staged.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staged, target)
        else:
            target = Path(step[1])
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
    journal.unlink()
