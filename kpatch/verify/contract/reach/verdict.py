"""What the model says of a call: reached on XPU or not, and why."""

from __future__ import annotations

from dataclasses import dataclass

MAX_DEPTH = 6  # callers followed up from a call site before the model gives up (and calls it reached)
Value = bool | None  # on XPU: always true, always false, or not known


@dataclass(frozen=True)
class Verdict:
    """Reached on XPU or not, and why: the guard or chain that keeps it off XPU, or the path that reaches it."""

    reached: bool
    why: str


REACHED_UNKNOWN = Verdict(True, "")
CYCLE = Verdict(False, "(a cycle of callers)")  # a call from itself does not reach it
