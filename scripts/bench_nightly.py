#!/usr/bin/env python3
"""Benchmark: kpatch nightly on the example project (offline: GitHub is not asked): a first night (rebase, the
pair, verify, both suites), a no-op night (target: no container, under 5 s), a night after an app upstream
commit, and a no-op again. Each run is a new kpatch process, as the nightly job starts it. Needs a Docker
engine and the base image (scripts/docker-test-image); it removes no image.

--clock: where a whole night's time goes, as the nightly job runs it (ci/nightly.yml caches the mirrors and the
wheels, not the worktrees): a first night fills the cache, an app upstream commit lands, then a night on a cold
checkout of the project (its files only: no worktrees, no run state) with that cache; it prints the night's
clock (report.json `clock`: fetch, rebase, build, verify, test, scroll, report, publish) and each part's share.

    python3 scripts/bench_nightly.py [--base-image kpatch-test-base:bookworm] [--clock] [--backend docker|local]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kpatch.examples.upstreams import commit, make_example_project

ROOT = Path(__file__).resolve().parents[1]  # the nights run this checkout's kpatch (PYTHONPATH)


def night(project: Path, cache: Path, base_image: str, backend: str = "docker") -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    image = ["--base-image", base_image] if backend == "docker" else []  # the local backend takes no image
    proc = subprocess.run([sys.executable, "-m", "kpatch", "nightly", "--json", *image,
                           "--backend", backend, "--cache-dir", str(cache)], cwd=project, capture_output=True,
                          text=True, env={**os.environ, "KPATCH_OFFLINE": "1", "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"kpatch nightly failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    report = json.loads(proc.stdout)
    return seconds, report["result"] if "kpatch" in report else report  # the envelope (older kpatches: bare)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-image", default="kpatch-test-base:bookworm")
    parser.add_argument("--clock", action="store_true", help="where a cold checkout's night spends its time")
    parser.add_argument("--backend", choices=("docker", "local"), default="docker")
    args = parser.parse_args()
    if args.clock:
        clock(args.base_image, args.backend)
        return
    root = Path(tempfile.mkdtemp(prefix="kpatch-bench-nightly-"))
    try:
        example = make_example_project(root)
        cache = root / "cache"
        print(f"{'night':<34} {'seconds':>8} {'outcome':>8} {'built':>6} {'suites':>6}  per stage (s)")
        for label in ("first (rebase, pair, tests)", "no-op", "app upstream moved", "no-op again"):
            if label == "app upstream moved":
                commit(example.app, {"NEWS.txt": "news\n"}, "News", 900)
            seconds, report = night(example.root, cache, args.base_image)
            built = sum(1 for w in report["wheels"] if not w["cached"])
            stages = " ".join(f"{s['stage']} {s['seconds']:.1f}" for s in report["stages"])
            print(f"{label:<34} {seconds:>8.2f} {report['outcome']:>8} {built:>6} {len(report['suites']):>6}  "
                  f"{stages}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def clock(base_image: str, backend: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="kpatch-bench-nightly-clock-"))
    try:
        example = make_example_project(root)
        cache = root / "cache"
        warm, _ = night(example.root, cache, base_image, backend)
        print(f"first night (fills the cache: mirrors, wheels, images): {warm:.1f} s")
        commit(example.app, {"NEWS.txt": "news\n"}, "News", 900)
        checkout = root / "checkout"  # the project's files as the nightly branch holds them
        shutil.copytree(example.root, checkout, ignore=shutil.ignore_patterns("work", ".kpatch", "reports", "dist"))
        seconds, report = night(checkout, cache, base_image, backend)
        c = report["clock"]
        print(f"night on a cold checkout, cached mirrors and wheels ({report['outcome']}, {backend} backend): "
              f"{seconds:.1f} s for the process, {c['total']:.1f} s on the night's clock")
        print(f"{'part':<10} {'seconds':>8} {'share':>6}")
        for part in ("fetch", "rebase", "build", "verify", "test", "scroll", "report", "publish"):
            print(f"{part:<10} {c[part]:>8.2f} {100 * c[part] / c['total']:>5.0f}%")
        rest = seconds - c["total"]
        print(f"{'(start-up, lock, exit: outside the clock)':<10} {rest:.2f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
