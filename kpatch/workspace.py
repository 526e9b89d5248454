"""Where things live on disk (mirrors, worktrees, logs) and the apply state kept between runs."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path

from kpatch.config import Stack
from kpatch.errors import WorktreeError

STATE_VERSION = 1


class Outcome(Enum):
    """Where one upstream's stack stands in a worktree."""

    APPLIED = "applied"
    CONFLICT = "conflict"  # git am stopped; the worktree waits for a person
    BLOCKED = "blocked"  # not applied because an upstream it requires conflicted


@dataclass
class UpstreamState:
    base: str  # the commit the stack is applied onto
    previous_head: str | None  # what the worktree held before this apply (None: kpatch created it)
    outcome: Outcome
    patches: list[str]  # the patch files given to git am, in order
    applied: int
    failed: list[tuple[str, int | None]] = field(default_factory=list)  # (path, line) where git am stopped
    in_flight: bool = False  # git am was running: if kpatch was killed, --continue starts the stack again


@dataclass
class ApplyState:
    upstreams: dict[str, UpstreamState] = field(default_factory=dict)

    @property
    def in_progress(self) -> bool:
        return any(s.outcome is not Outcome.APPLIED for s in self.upstreams.values())


@dataclass(frozen=True)
class Workspace:
    stack: Stack
    cache_dir: Path
    workdir: Path

    @classmethod
    def create(cls, stack: Stack, cache_dir: Path | None, workdir: Path | None) -> Workspace:
        return cls(stack=stack, cache_dir=(cache_dir or default_cache_dir()).resolve(),
                   workdir=(workdir or stack.root / "work").resolve())

    def mirror(self, name: str) -> Path:
        return self.cache_dir / "mirrors" / f"{name}.git"

    def worktree(self, name: str) -> Path:
        return self.workdir / name

    @property
    def log_dir(self) -> Path:
        return self.cache_dir / "logs"

    @property
    def state_file(self) -> Path:
        return self.workdir / ".kpatch-state.json"

    @property
    def rebase_state_file(self) -> Path:
        return self.workdir / ".kpatch-rebase.json"

    @property
    def rebase_journal(self) -> Path:
        return self.workdir / ".kpatch-rebase.journal"

    @property
    def previous_state_file(self) -> Path:
        return self.workdir / ".kpatch-state.previous.json"

    def keep_previous_state(self) -> None:
        """Set the finished apply's state aside, so that an abort of the next one can bring it back."""
        self.previous_state_file.unlink(missing_ok=True)
        if self.state_file.exists():
            os.replace(self.state_file, self.previous_state_file)

    def restore_previous_state(self) -> None:
        if self.previous_state_file.exists():
            os.replace(self.previous_state_file, self.state_file)
        else:
            self.state_file.unlink(missing_ok=True)

    def read_state(self) -> ApplyState | None:
        try:
            raw = json.loads(self.state_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            raise WorktreeError(
                f"{self.state_file}: unreadable apply state ({err}); remove it and apply again") from None
        if not isinstance(raw, dict) or raw.get("version") != STATE_VERSION:
            version = raw.get("version") if isinstance(raw, dict) else None
            raise WorktreeError(f"{self.state_file}: apply state version {version} is not {STATE_VERSION}")
        try:
            return ApplyState(upstreams={
                name: UpstreamState(**{**item, "outcome": Outcome(item["outcome"]),
                                       "failed": [tuple(f) for f in item.get("failed", [])]})
                for name, item in raw["upstreams"].items()
            })
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise WorktreeError(f"{self.state_file}: unreadable apply state ({err!r}); remove it and apply "
                                "again") from None

    def write_state(self, state: ApplyState) -> None:
        payload = {"version": STATE_VERSION, "upstreams": {
            name: {**asdict(item), "outcome": item.outcome.value} for name, item in state.upstreams.items()
        }}
        write_atomic(self.state_file, (json.dumps(payload, indent=2) + "\n").encode(), durable=False)


def default_cache_dir() -> Path:
    if os.environ.get("KPATCH_CACHE_DIR"):
        return Path(os.environ["KPATCH_CACHE_DIR"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kpatch"


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write to a temp file beside `path`, then rename over it: readers see old or new, never half.

    `durable` also fsyncs, so the file survives a power cut; run-state files that kpatch rewrites on the
    apply path skip it (a killed process cannot lose them, and fsync can stall behind unrelated writeback).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
