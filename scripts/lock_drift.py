"""What this interpreter's environment holds that the test lock does not pin as it is: one line per package whose
installed version differs from the lock's, or that one side lacks; exit 0 whatever drifted (a report, not a gate).

    python scripts/lock_drift.py ci/test-requirements.txt
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

from packaging.utils import canonicalize_name

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def locked(text: str) -> dict[str, str]:
    """The lock's `name==version` pins, by canonical name."""
    return {str(canonicalize_name(m[1])): m[2] for m in map(_PIN.match, text.splitlines()) if m}


def installed() -> dict[str, str]:
    found: dict[str, str] = {canonicalize_name(d.metadata["Name"]): d.version
                             for d in importlib.metadata.distributions() if d.metadata["Name"]}
    for own in ("kpatch", "pip"):  # the checkout itself, and the venv's own installer (no package asks for pip)
        found.pop(own, None)
    return found


def drift(lock: dict[str, str], env: dict[str, str]) -> list[str]:
    lines = []
    for name in sorted(lock.keys() | env.keys()):
        was, now = lock.get(name), env.get(name)
        if was == now:
            continue
        if was is None:
            lines.append(f"drift: {name} {now} is new (the lock has no {name})")
        elif now is None:
            lines.append(f"drift: {name} {was} is locked but no longer installed")
        else:
            lines.append(f"drift: {name} {was} (locked) -> {now}")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: lock_drift.py LOCK", file=sys.stderr)
        return 2
    lock = locked(Path(argv[0]).read_text(encoding="utf-8"))
    lines = drift(lock, installed())
    print("\n".join(lines) if lines else f"no drift: every package is at its version in {argv[0]}")
    print(f"{len(lines)} of {len(lock)} locked packages drifted" if lines else "", end="\n" if lines else "")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
