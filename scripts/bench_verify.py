#!/usr/bin/env python3
"""The op contract of a real pair, timed: `kpatch verify`'s analysis (the kernels' registered schemas, the
application's calls and their XPU reachability) of two source trees, each kpatch given in interleaved rounds, each
run a process of its own. Prints the seconds (median [quartiles]) and how many findings each kpatch gives, and
says when two kpatches give different findings (a change of the model, or a mistake).

    python3 scripts/bench_verify.py KERNELS_TREE APP_TREE [--reps 3] [--kpatch LABEL=SRC ...]

The real pair: a clone of vllm-xpu-kernels at 4543b580 and a git repository of the vLLM v0.33.0 sdist (see
tests/git/test_real_contract.py's docstring); patched trees are the ones `kpatch apply` leaves in work/.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import ENV, Kpatch, kpatches, paired, spread

SCRIPT = """
import json, sys, time
from pathlib import Path
import kpatch
assert kpatch.__file__.startswith(sys.argv[3]), kpatch.__file__
from kpatch.verify.contract import check, findings
started = time.perf_counter()
found = findings(check(Path(sys.argv[1]), Path(sys.argv[2]), ()))
took = time.perf_counter() - started
print(json.dumps({"seconds": took, "findings": sorted(f"{f.op} {f.site} {f.kind}" for f in found)}))
"""


def one(kp: Kpatch, kernels: Path, app: Path, seen: dict[str, list[str]]) -> float:
    with tempfile.TemporaryDirectory() as cwd:  # outside any checkout: the kpatch timed is the one on PYTHONPATH
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(kernels), str(app), str(kp.source)], cwd=cwd,
                              env={**ENV, "PYTHONPATH": str(kp.source)}, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{kp.label}: the contract check failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    seen[kp.label] = result["findings"]
    return float(result["seconds"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("kernels", type=Path)
    parser.add_argument("app", type=Path)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--kpatch", action="append", default=[], metavar="LABEL=SRC")
    args = parser.parse_args()
    kps = kpatches(args.kpatch)
    seen: dict[str, list[str]] = {}
    kernels, app = args.kernels.resolve(), args.app.resolve()
    times = paired({kp.label: functools.partial(one, kp, kernels, app, seen) for kp in kps}, args.reps)
    print(f"the op contract of {args.kernels} and {args.app}, {args.reps} interleaved rounds, seconds in process")
    for kp in kps:
        print(f"  {kp.label:12} {spread(times[kp.label])}   {len(seen[kp.label])} findings")
    first = kps[0].label
    for kp in kps[1:]:
        if seen[kp.label] != seen[first]:
            only = sorted(set(seen[kp.label]) ^ set(seen[first]))
            print(f"  {kp.label} and {first} give different findings ({len(only)} differ), e.g. {only[:3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
