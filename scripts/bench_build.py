#!/usr/bin/env python3
"""Benchmark: kpatch build-wheels on the example pair, and what the compiler cache (sccache on a volume) saves.

Needs a Docker engine and the base image (scripts/docker-test-image). First, single runs: a cold build (image and
both wheels), a rerun with nothing changed (target: no container), an app-only change (kernels reused). Then the
build-cache figure, in interleaved rounds:
  cold:  a new, empty compiler-cache volume; the kernels wheel built from scratch (25 C++ translation units)
  warm:  one translation unit changed (a new commit on the kernels stack); the warm volume has the other 24
for the kernels' build step alone (from kpatch's log) and for the whole command. Target: warm <= 25% of cold.

    python3 scripts/bench_build.py [--base-image kpatch-test-base:bookworm] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kpatch.examples.upstreams import make_example_project

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def kpatch(project: Path, cache: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, dict]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kpatch", *args, "--cache-dir", str(cache)], cwd=project,
                          capture_output=True, text=True, env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        sys.exit(f"kpatch {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    data = json.loads(proc.stdout) if "--json" in args else {}
    return time.perf_counter() - started, data["result"] if "kpatch" in data else data  # older kpatches: bare


def kernels_step(cache: Path) -> float:
    """Seconds from 'building kernels' to its wheel, read from the newest build-wheels log."""
    log = max((cache / "logs").glob("*build-wheels.log"), key=lambda p: p.stat().st_mtime)
    start = end = None
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        match = _STAMP.match(line)
        if not match:
            continue
        when = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
        if "INFO kpatch: building kernels " in line:
            start = when
        elif start and end is None and ("INFO kpatch: kernels: sccache" in line or "building app" in line):
            end = when
    if start is None or end is None:
        sys.exit(f"no kernels build step in {log}")
    return (end - start).total_seconds()


def change_one_unit(project: Path, cache: Path, round_: int) -> None:
    """A new commit on the kernels stack that changes one translation unit, exported to the patch files."""
    tree = project / "work" / "kernels"
    unit = tree / "csrc" / "ext" / "kernel_07.cpp"
    unit.write_text(unit.read_text() + f"// tuned, round {round_}\nnamespace kernels {{ int tuned_{round_}; }}\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid"}
    subprocess.run(["git", "commit", "-qam", f"Tune kernel 7 ({round_})\n\nUpstream-Status: pending"], cwd=tree,
                   env=env, check=True)
    kpatch(project, cache, "export")


def spread(values: list[float]) -> str:
    if len(values) < 4:
        return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):.2f} [{q[0]:.2f}-{q[2]:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-image", default=os.environ.get("KPATCH_TEST_BASE_IMAGE", "kpatch-test-base:bookworm"))
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kpatch-bench-build-"))
    volumes: list[str] = []
    try:
        project = make_example_project(root).root
        cache = root / "cache"
        kpatch(project, cache, "apply")
        build = ("build-wheels", "--base-image", args.base_image, "--json")
        images = subprocess.run(["docker", "images", "-q", "--filter", f"label=kpatch.base-image={args.base_image}",
                                 "kpatch-build"], capture_output=True, text=True).stdout
        if images.split():  # a cold build builds the image too (only this base image's: others may be in use)
            subprocess.run(["docker", "rmi", "-f", *images.split()], capture_output=True)
        volumes.append(f"kpatch-bench-{uuid.uuid4().hex[:8]}")
        env = {"KPATCH_SCCACHE_VOLUME": volumes[-1]}
        print(f"{'run':<28} {'seconds':>8} {'containers':>10} {'built':>6}")
        for label in ("cold (image + 2 wheels)", "no change", "app-only change"):
            if label == "app-only change":
                patch = project / "patches" / "app" / "0001-Route-k3-to-the-XPU-path.patch"
                patch.write_text(patch.read_text().replace("# ops come from", "# the ops come from"))
                kpatch(project, cache, "apply")
            seconds, result = kpatch(project, cache, *build, env=env)
            built = sum(1 for w in result["wheels"] if not w["cached"])
            print(f"{label:<28} {seconds:>8.2f} {result['containers']:>10} {built:>6}")
        step = {"cold": [], "warm": []}
        whole = {"cold": [], "warm": []}
        for n in range(args.reps):
            for kind in ("cold", "warm") if n % 2 == 0 else ("warm", "cold"):
                shutil.rmtree(cache / "wheels", ignore_errors=True)
                if kind == "cold":
                    volumes.append(f"kpatch-bench-{uuid.uuid4().hex[:8]}")
                    env = {"KPATCH_SCCACHE_VOLUME": volumes[-1]}
                else:
                    env = {"KPATCH_SCCACHE_VOLUME": volumes[0]}  # warm: every source the rounds built is in it
                    change_one_unit(project, cache, n)
                seconds, result = kpatch(project, cache, *build, env=env)
                stats = next(w for w in result["wheels"] if w["upstream"] == "kernels")["compiler_cache"]
                whole[kind].append(seconds)
                step[kind].append(kernels_step(cache))
                print(f"  round {n + 1} {kind}: kernels step {step[kind][-1]:.2f} s, build-wheels {seconds:.2f} s, "
                      f"sccache {stats['hits']} hits / {stats['misses']} misses")
        print(f"{'compiler cache':<28} {'cold s [range]':>20} {'warm s [range]':>20} {'warm/cold':>10}")
        for label, values in (("kernels build step", step), ("whole build-wheels", whole)):
            ratio = statistics.median(values["warm"]) / statistics.median(values["cold"])
            print(f"{label:<28} {spread(values['cold']):>20} {spread(values['warm']):>20} {ratio:>9.0%}")
    finally:
        for volume in volumes:
            subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
