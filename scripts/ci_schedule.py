#!/usr/bin/env python3
"""Estimates scripts/test's pytest wall time from a CI run's JUnit folder (.venv-ci/junit: unit-git-sycl.xml,
docker.xml, kills.xml), by replaying each tier's tests on its workers: a worker that frees up takes the next unit.
  before: `--dist loadfile`, whole files in collection order (tests/unit, tests/git, tests/sycl, by name);
  after:  `--ci-groups` (tests/conftest.py): tests/support/ci_groups.py's groups, longest first.
tests/docker runs beside the two workers in one process (the tier ends when both have); the kills tier follows,
test by test on two workers. The figures are the run's own seconds (a loaded machine's are longer: --scale 0.33 for
one three times as loaded as a quiet one). A re-warmed chunk's fixture is counted as its tests were timed.

    python3 scripts/ci_schedule.py .venv-ci/junit [--workers 2] [--scale 1.0] [--write]

--write stores the seconds per test file in ci/test-durations.json (what conftest orders the groups by)."""

from __future__ import annotations

import argparse
import heapq
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support import ci_groups  # noqa: E402

TIERS = ("unit", "git", "sycl")


def test_file(classname: str) -> str:
    """tests.git.test_x (or tests.git.test_x.TestClass) -> tests/git/test_x.py"""
    parts = classname.split(".")
    end = next((n for n, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
    return "/".join(parts[: end + 1]) + ".py"


def timed(path: Path) -> list[tuple[str, float]]:
    """(file, seconds) per test case of one JUnit file, in the file's order; nothing when it is missing."""
    if not path.is_file():
        return []
    return [(test_file(c.get("classname", "")), float(c.get("time") or 0))
            for c in ET.parse(path).iter("testcase")]  # noqa: S314 - the JUnit pytest wrote in CI


def makespan(units: Sequence[float], workers: int) -> tuple[float, list[float]]:
    """Units handed out in order, each to the worker that frees up first: the last end, and each worker's busy time."""
    ends = [(0.0, w) for w in range(workers)]
    busy = [0.0] * workers
    for seconds in units:
        end, w = heapq.heappop(ends)
        busy[w] += seconds
        heapq.heappush(ends, (end + seconds, w))
    return max(e for e, _ in ends), busy


def per_file(cases: Sequence[tuple[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for f, s in cases:
        out[f] = out.get(f, 0.0) + s
    return out


def collection_order(f: str) -> tuple[int, str]:
    tier = f.split("/")[1] if f.count("/") >= 2 else ""
    return (TIERS.index(tier) if tier in TIERS else len(TIERS), f)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("junit", type=Path)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    main_cases = timed(args.junit / "unit-git-sycl.xml")
    if not main_cases:
        sys.exit(f"error: {args.junit / 'unit-git-sycl.xml'}: no JUnit test cases there")
    docker = sum(s for _, s in timed(args.junit / "docker.xml")) * args.scale
    kill_cases = timed(args.junit / "kills.xml")
    files = per_file(main_cases)
    if args.write:
        ci_groups.DURATIONS.write_text(json.dumps({f: round(s, 1) for f, s in sorted(
            (files | per_file(kill_cases)).items())}, indent=1) + "\n")
        print(f"wrote {ci_groups.DURATIONS.relative_to(ROOT)} ({len(files)} files)")
    sc = args.scale
    before, before_busy = makespan([files[f] * sc for f in sorted(files, key=collection_order)], args.workers)
    ordered = sorted(main_cases, key=lambda c: collection_order(c[0]))  # stable: each file's tests keep their order
    grouped = ci_groups.groups([f for f, _ in ordered])
    group_seconds: dict[str, float] = {}
    for g, (_, s) in zip(grouped, ordered, strict=True):
        group_seconds[g] = group_seconds.get(g, 0.0) + s * sc
    after, after_busy = makespan([group_seconds[g] for g in ci_groups.longest_first(grouped, files)], args.workers)
    kills, _ = makespan(sorted((s * sc for _, s in kill_cases), reverse=True), args.workers)
    work = sum(files.values()) * sc
    print(f"tests/unit+git+sycl: {work:.0f} s of test time in {len(files)} files; the longest file "
          f"{max(files.values()) * sc:.0f} s ({max(files, key=files.__getitem__)})")
    for name, span, busy in (("before (loadfile, collection order)", before, before_busy),
                             ("after (--ci-groups: groups, longest first)", after, after_busy)):
        tier = max(span, docker)
        print(f"{name}: workers end at {span:.0f} s (busy {', '.join(f'{b:.0f}' for b in busy)} s); with "
              f"tests/docker ({docker:.0f} s) beside: {tier:.0f} s; + kills {kills:.0f} s = "
              f"{tier + kills:.0f} s ({(tier + kills) / 60:.1f} min) of pytest")
    print(f"floor: {work / args.workers:.0f} s (the test time on {args.workers} workers, perfectly shared)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
