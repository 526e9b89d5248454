"""A no-op night: no upstream branch moved past the pinned base, and the stacks and their builds are what the
last passing night locked. Then nothing is rebased, built or tested, and no container starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kpatch.dashboard.night import Move
from kpatch.engine.plan import fetch, load_all_series
from kpatch.errors import LockError, UpstreamError
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace
from kpatch.wheels import lock as lockfile


@dataclass(frozen=True)
class Heads:
    """Each upstream's pinned base and fetched branch head; `changed` says why a full night is needed, or None."""

    moves: tuple[Move, ...]
    changed: str | None  # the first reason this is not a no-op; None: a no-op night


def fetch_heads(ws: Workspace, ui: UI, kept_lock: Path) -> Heads:
    """Fetch every upstream, then compare its branch head with the pinned base and the stacks with the lock."""
    moves = []
    for upstream in ws.stack.upstreams:
        mirror = fetch(ws, ui, upstream)
        old, new = mirror.resolve(upstream.base), mirror.resolve(upstream.branch)
        if old is None:
            raise UpstreamError(f"upstream {upstream.name}: pinned base {upstream.base!r} is not in "
                                f"{upstream.display_url}")
        if new is None:
            raise UpstreamError(f"upstream {upstream.name}: branch {upstream.branch!r} is not in "
                                f"{upstream.display_url}")
        commits = mirror.count(old, new) if mirror.is_ancestor(old, new) else 0
        moves.append(Move(upstream=upstream.name, branch=upstream.branch, old_base=old, new_base=new,
                          commits=commits))
    return Heads(moves=tuple(moves), changed=_changed(ws, ui, moves, kept_lock))


def _changed(ws: Workspace, ui: UI, moves: list[Move], kept_lock: Path) -> str | None:
    """Why tonight is not a no-op (the first reason found), or None."""
    moved = [m for m in moves if m.old_base != m.new_base]
    if moved:
        return f"{moved[0].upstream} moved: {moved[0].old_base[:12]} -> {moved[0].new_base[:12]}"
    if not kept_lock.is_file():
        return f"no lock of an earlier night at {kept_lock}"
    try:
        last = lockfile.read(kept_lock)
    except LockError as err:
        ui.warn(f"{err}: every stage runs, and a passing night replaces it")
        return f"{kept_lock} cannot be read"
    locked = {u.name: u for u in last.upstreams}
    if set(locked) != {u.name for u in ws.stack.upstreams}:
        return f"{kept_lock} locks other upstreams than {ws.stack.path.name} lists"
    if last.set_torch != ws.stack.torch:
        return f"[set] torch is {ws.stack.torch or 'unset'}, the lock has {last.set_torch or 'none'}"
    series = load_all_series(ws.stack)
    for move, upstream in zip(moves, ws.stack.upstreams, strict=True):
        was = locked[upstream.name]
        if was.base != move.old_base:
            return f"{upstream.name}: the pinned base {move.old_base[:12]} is not the locked {was.base[:12]}"
        if series[upstream.name].stack_hash() != was.stack_hash:
            return f"{upstream.name}: the patches changed since the lock"
        build = upstream.build
        if build is not None and (build.command != was.command or dict(build.env) != dict(was.env)):
            return f"{upstream.name}: its [upstream.build] changed since the lock"
    return None
