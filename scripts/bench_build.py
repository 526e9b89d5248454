#!/usr/bin/env python3
"""Benchmark: kpatch build-wheels on the example pair: a cold build, a no-change rerun (target: no container,
under 5 s) and an app-only change (kernels reused). Needs a Docker engine and the base image
(scripts/docker-test-image).

    python3 scripts/bench_build.py [--base-image kpatch-test-base:bookworm]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kpatch.examples import make_example_project  # noqa: E402


def kpatch(project: Path, cache: Path, *args: str) -> tuple[float, dict]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kpatch", *args, "--cache-dir", str(cache)], cwd=project,
                          capture_output=True, text=True, check=True)
    return time.perf_counter() - started, json.loads(proc.stdout) if "--json" in args else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-image", default="kpatch-test-base:bookworm")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kpatch-bench-build-"))
    try:
        project = make_example_project(root).root
        cache = root / "cache"
        kpatch(project, cache, "apply")
        build = ("build-wheels", "--base-image", args.base_image, "--json")
        images = subprocess.run(["docker", "images", "-q", "kpatch-build"], capture_output=True, text=True).stdout
        if images.split():  # a cold build builds the image too
            subprocess.run(["docker", "rmi", "-f", *images.split()], capture_output=True)
        print(f"{'run':<28} {'seconds':>8} {'containers':>10} {'built':>6}")
        for label in ("cold (image + 2 wheels)", "no change", "app-only change"):
            if label == "app-only change":
                patch = project / "patches" / "app" / "0001-Route-k3-to-the-XPU-path.patch"
                patch.write_text(patch.read_text().replace("# ops come from", "# the ops come from"))
                kpatch(project, cache, "apply")
            seconds, result = kpatch(project, cache, *build)
            built = sum(1 for w in result["wheels"] if not w["cached"])
            print(f"{label:<28} {seconds:>8.2f} {result['containers']:>10} {built:>6}")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
