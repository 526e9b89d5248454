#!/usr/bin/env python3
"""Benchmark: `kpatch apply` against raw `git am -3 --keep-cr` of the same patch files, worktree kept.

On the upstream of scripts/benchlib.py (the size of real vLLM), stacks of 1, 50 and 300 patches on v1. For each
size, interleaved rounds, both starting from a worktree that holds the previous result:
  raw:    git checkout --detach v1 && git am -3 --keep-cr <patches>
  kpatch: kpatch apply                     (its checks, state and backup ref included)
It prints medians with quartiles and the ratio kpatch / raw (targets: 1 patch <= 2.0x, 50 <= 1.1x, 300 <= 1.05x).

    python3 scripts/bench_apply.py [--reps 7] [--sizes 1,50,300] [--kpatch LABEL=SRC ...] [--dir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (
    cached_upstream,
    git,
    kpatches,
    paired,
    ratio,
    spread,
    timed,
    upstream_summary,
    write_project,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="work folder (default: a new temp dir, removed afterwards)")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--sizes", default="1,50,300")
    parser.add_argument("--kpatch", action="append", default=[], metavar="LABEL=SRC",
                        help="a kpatch source tree to time (repeatable; default: this checkout)")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="kpatch-bench-apply-"))
    try:
        up = cached_upstream(root / "upstream")
        print(upstream_summary(up))
        print(f"{'apply':<20} {'median s [quartiles]':>24} {'ratio to raw [quartiles]':>26}")
        for n in (int(s) for s in args.sizes.split(",")):
            raw_tree = root / f"raw-apply-{n}"
            shutil.rmtree(raw_tree, ignore_errors=True)
            git(up.repo, "worktree", "prune")
            git(up.repo, "worktree", "add", "-q", "--detach", str(raw_tree), up.v1)
            cases = {}
            for kp in kpatches(args.kpatch):
                project = root / f"apply-{n}-{kp.label}"
                shutil.rmtree(project, ignore_errors=True)
                patches = write_project(project, up, n)
                cache = ["--cache-dir", str(root / f"cache-{kp.label}")]
                kp.run(project, "apply", *cache)
                cases[kp.label] = (lambda kp=kp, project=project, cache=cache:
                                   timed(kp.command("apply", *cache), project, kp.env()))
            names = sorted(p.name for p in patches.glob("*.patch"))
            am = ["git", "am", "-3", "--keep-cr", "--quiet", *(str(patches / name) for name in names)]
            timed(am, raw_tree)

            def raw(raw_tree: Path = raw_tree, am: list[str] = am) -> float:
                return timed(["sh", "-c", f'git checkout -q --detach {up.v1} && exec "$@"', "raw", *am], raw_tree)

            times = paired({"raw": raw, **cases}, args.reps)
            print(f"{f'{n} patch(es): git am':<20} {spread(times['raw']):>24}")
            for label in cases:
                print(f"{f'  kpatch ({label})':<20} {spread(times[label]):>24} {ratio(times[label], times['raw']):>26}")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
