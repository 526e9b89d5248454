#!/usr/bin/env python3
"""Benchmark: a red night's k-way search (`kpatch nightly --runners N`) on the example upstreams, offline.

The example project pinned at its upstreams' heads and applied, one green night to fill a cache (the kernels'
wheel, the build and test environments); then 64 new app commits of which the 45th plants a test break (the
demo's sampler test). For each N (default 1, 3, 7), a fresh copy of that project and of the warm cache, then one
`kpatch nightly --dry-run --no-publish --backend local --runners N --max-steps 64` as a new process: the heads
are red, the search finds the last green commit (44) and the culprit (45). It prints, per N, the rounds, the
steps, the search's and the whole night's wall time, and what the search found; it exits 1 when two N disagree
on the culprit or the last green commit.

    python3 scripts/bench_scroll.py [--runners 1,3,7] [--commits 64] [--break-at 45]
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
from kpatch.config.edit import with_new_bases
from kpatch.demo.scrolling import BREAK, BREAK_FILE, BREAK_SUBJECT
from kpatch.examples.upstreams import commit, make_example_project
from kpatch.files import write_atomic
from kpatch.gitx import out

ROOT = Path(__file__).resolve().parents[1]  # the nights run this checkout's kpatch (PYTHONPATH)
ENV = {**os.environ, "KPATCH_OFFLINE": "1", "PYTHONPATH": str(ROOT)}


def kpatch(project: Path, cache: Path, *args: str) -> tuple[int, dict[str, Any], float]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kpatch", *args, "--json", "--cache-dir", str(cache)],
                          cwd=project, capture_output=True, text=True, env=ENV)
    seconds = time.perf_counter() - started
    try:
        envelope = json.loads(proc.stdout)
    except ValueError:
        raise SystemExit(f"kpatch {' '.join(args)} printed no JSON ({proc.returncode}):\n{proc.stderr[-3000:]}") \
            from None
    return proc.returncode, envelope.get("result") or envelope.get("error") or {}, seconds


def project_at_heads(root: Path, cache: Path) -> Path:
    """The example project pinned at its upstreams' heads and applied; returns kpatch.toml's folder."""
    example = make_example_project(root)
    heads = {"kernels": out(["rev-parse", "main"], example.kernels), "app": out(["rev-parse", "main"], example.app)}
    toml = example.root / "kpatch.toml"
    write_atomic(toml, with_new_bases(toml, heads))
    code, _, _ = kpatch(example.root, cache, "apply")
    if code != 0:
        raise SystemExit(f"kpatch apply failed ({code}) in {example.root}")
    return example.root


def day(app: Path, commits: int, break_at: int) -> list[str]:
    """`commits` new app commits, the `break_at`-th (from 1) planting the test break."""
    made = []
    for n in range(1, commits + 1):
        files = {BREAK_FILE: BREAK} if n == break_at else {"NEWS.txt": f"entry {n}\n"}
        made.append(commit(app, files, BREAK_SUBJECT if n == break_at else f"News {n}", 3000 + n))
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runners", default="1,3,7", help="the N to measure, comma-separated (default 1,3,7)")
    parser.add_argument("--commits", type=int, default=64)
    parser.add_argument("--break-at", type=int, default=45)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (printed)")
    args = parser.parse_args()
    counts = [int(n) for n in args.runners.split(",")]
    root = Path(tempfile.mkdtemp(prefix="kpatch-bench-scroll-"))
    try:
        warm = root / "warm-cache"
        template = project_at_heads(root / "template", warm)
        code, report, seconds = kpatch(template, warm, "nightly", "--dry-run", "--no-publish", "--backend", "local")
        if code != 0:
            raise SystemExit(f"the warm-up night failed ({code}): {report.get('summary')}")
        print(f"warm-up night (fills the cache): {seconds:.1f} s; {args.commits} app commits, the break at "
              f"{args.break_at}; {os.cpu_count()} CPU(s)", flush=True)
        print(f"{'N':>3} {'rounds':>6} {'steps':>5} {'search s':>9} {'night s':>8}  last green    culprit")
        found: dict[int, tuple[str, str | None]] = {}
        for n in counts:
            cache = root / f"cache-{n}"
            shutil.copytree(warm, cache, symlinks=True)
            project = project_at_heads(root / f"n{n}", cache)
            commits = day(project.parent / "upstreams" / "app", args.commits, args.break_at)
            code, report, seconds = kpatch(project, cache, "nightly", "--dry-run", "--no-publish", "--backend",
                                           "local", "--runners", str(n), "--max-steps", str(args.commits))
            scroll = report.get("scroll") or {}
            span = next((s for s in scroll.get("spans", []) if s["upstream"] == "app"), None)
            if span is None:
                raise SystemExit(f"N={n}: no search (exit {code}): {report.get('summary')}")
            culprit = (scroll.get("culprit") or {}).get("commit")
            found[n] = (span["last_green"], culprit)
            where = {c: i + 1 for i, c in enumerate(commits)}
            print(f"{n:>3} {scroll['rounds']:>6} {len(scroll['steps']):>5} {scroll['seconds']:>9.1f} {seconds:>8.1f}  "
                  f"{span['last_green'][:12]} ({where.get(span['last_green'], 0)})  "
                  f"{(culprit or '-')[:12]} ({where.get(culprit or '', 0)})", flush=True)
        if len(set(found.values())) > 1:
            print(f"the runners disagree: {found}", file=sys.stderr)
            return 1
        return 0
    finally:
        if args.keep:
            print(f"kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
