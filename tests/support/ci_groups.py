"""How CI's two pytest workers share the slow tiers (`pytest --ci-groups`, scripts/test): every test file is one xdist
group (its module fixtures built once on one worker), but the long files whose tests build their own worlds (no
module fixture worth keeping, or only a wheel cache a chunk warms again) are cut into a few contiguous chunks, so one
file is no longer the run's long pole. The groups go out longest first (ci/test-durations.json, from a CI run's
JUnit by scripts/ci_schedule.py --write): a worker that frees up takes the next longest, and the short ones fill
the end. scripts/ci_schedule.py uses the same cut to estimate the wall time from a JUnit folder."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DURATIONS = Path(__file__).resolve().parents[2] / "ci" / "test-durations.json"
# file -> chunks. Only files without a costly module-scoped fixture: each chunk builds the module's fixtures again.
SPLIT: dict[str, int] = {
    "tests/git/test_nightly_scroll.py": 3,  # its wheel cache is conftest's nightly_wheel_cache, one per worker
    "tests/git/test_nightly_matrix.py": 2,  # the same
    "tests/git/test_security.py": 3,
    "tests/git/test_demo.py": 2,
    "tests/git/test_build_local.py": 2,
    "tests/git/test_import.py": 2,
}
# A file CI has not timed yet goes out among the first (it may be a long one), but a unit one (no git, no build) near
# the end.
UNKNOWN_SECONDS = {"tests/unit/": 5.0, "": 600.0}


def test_file(nodeid: str) -> str:
    """A test id's file: tests/git/test_x.py::test_y[z] -> tests/git/test_x.py"""
    return nodeid.split("::")[0]


def scheduler(config: Any, log: Any) -> Any:
    """xdist's scope scheduling with these groups as the scopes (xdist's own `loadgroup` marks do not reach the test
    ids under pytest 9: it sets a field pytest no longer reads). The queue keeps the collection's order, longest
    first as the workers collected it. xdist is imported here only: scripts/ci_schedule.py runs without it."""
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def __init__(self, config: Any, log: Any) -> None:
            super().__init__(config, log)
            self.group_of: dict[str, str] = {}

        def schedule(self) -> None:
            if self.collection is None and self.collection_is_completed and self.registered_collections:
                ids = list(next(iter(self.registered_collections.values())))
                self.group_of = dict(zip(ids, groups([test_file(i) for i in ids]), strict=True))
            super().schedule()

        def _split_scope(self, nodeid: str) -> str:
            return self.group_of.get(nodeid) or test_file(nodeid)

    return GroupScheduling(config, log)


def groups(files: Sequence[str]) -> list[str]:
    """Each test's group, for tests given by their file (repo-relative, in collection order): `file` or `file#k`,
    k the chunk of the file's tests in order (equal counts)."""
    count: dict[str, int] = {}
    for f in files:
        count[f] = count.get(f, 0) + 1
    seen: dict[str, int] = {}
    out = []
    for f in files:
        n = min(SPLIT.get(f, 1), count[f])
        i = seen.get(f, 0)
        seen[f] = i + 1
        out.append(f if n == 1 else f"{f}#{i * n // count[f]}")
    return out


def seconds_of(group: str, durations: dict[str, float], chunks: int) -> float:
    """A group's expected seconds: its file's total from the durations, shared equally by its chunks."""
    file = group.split("#")[0]
    unknown = next(s for prefix, s in UNKNOWN_SECONDS.items() if file.startswith(prefix))
    return durations.get(file, unknown * chunks) / chunks


def longest_first(groups_in_order: Sequence[str], durations: dict[str, float]) -> list[str]:
    """The groups (each once) in the order they should go out: longest expected first (ties keep collection order)."""
    unique = list(dict.fromkeys(groups_in_order))
    chunks = {g: sum(1 for h in unique if h.split("#")[0] == g.split("#")[0]) for g in unique}
    return sorted(unique, key=lambda g: -seconds_of(g, durations, chunks[g]))


def load_durations(path: Path = DURATIONS) -> dict[str, float]:
    """ci/test-durations.json: seconds per test file (repo-relative), or nothing when it is missing."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    return {str(k): float(v) for k, v in data.items()}
