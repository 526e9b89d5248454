#!/usr/bin/env python3
"""Benchmark: `kpatch status --json` and `kpatch export --check` at 300 patches against the raw git they stand for.

On the upstream of scripts/benchlib.py (the size of real vLLM), the 300-patch stack applied on v1. Interleaved:
  status, raw:  git log -p v1..HEAD | git patch-id --verbatim; cat patches | git patch-id --verbatim  (both sides)
  export, raw:  git format-patch (kpatch's flags) v1..HEAD into a temp folder; diff -r against patches/
It prints medians with quartiles and the ratio kpatch / raw (targets: status <= 1.3x, export --check <= 1.3x).

    python3 scripts/bench_status.py [--reps 9] [--size 300] [--kpatch LABEL=SRC ...] [--dir DIR]
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
    kpatches,
    paired,
    ratio,
    spread,
    timed,
    upstream_summary,
    write_project,
)

FORMAT = ("--zero-commit --no-signature -N --full-index --no-thread --no-attach --no-cover-letter --no-notes "
          "--encode-email-headers -M --stat=72")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="work folder (default: a new temp dir, removed afterwards)")
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--size", type=int, default=300)
    parser.add_argument("--kpatch", action="append", default=[], metavar="LABEL=SRC",
                        help="a kpatch source tree to time (repeatable; default: this checkout)")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="kpatch-bench-status-"))
    try:
        up = cached_upstream(root / "upstream")
        print(upstream_summary(up))
        status, export = {}, {}
        tree = patches = None
        for kp in kpatches(args.kpatch):
            project = root / f"status-{args.size}-{kp.label}"
            shutil.rmtree(project, ignore_errors=True)
            patches = write_project(project, up, args.size)
            cache = ["--cache-dir", str(root / f"cache-{kp.label}")]
            kp.run(project, "apply", *cache)
            tree = project / "work" / "up"
            status[kp.label] = (lambda kp=kp, project=project, cache=cache:
                                timed(kp.command("status", "--json", *cache), project, kp.env()))
            export[kp.label] = (lambda kp=kp, project=project, cache=cache:
                                timed(kp.command("export", "--check", *cache), project, kp.env()))
        assert tree is not None and patches is not None
        out = root / "raw-export"
        both_sides = (f"git log -p --no-color --no-ext-diff --format='commit %H' {up.v1}..HEAD | "
                      f"git patch-id --verbatim >/dev/null && cat {patches}/*.patch | git patch-id --verbatim")
        format_diff = (f"rm -rf {out} && git format-patch -q {FORMAT} -o {out} {up.v1}..HEAD && "
                       f"diff -r -x series {out} {patches}")
        raw = {"status": lambda: timed(["sh", "-c", both_sides], tree),
               "export": lambda: timed(["sh", "-c", format_diff], tree)}
        times = paired({"raw status": raw["status"], "raw export": raw["export"],
                        **{f"status {k}": v for k, v in status.items()},
                        **{f"export {k}": v for k, v in export.items()}}, args.reps)
        print(f"{f'{args.size} patches':<32} {'median s [quartiles]':>24} {'ratio to raw [quartiles]':>26}")
        for what, raw_label in (("status", "patch-id of both sides"), ("export", "format-patch + diff")):
            print(f"{f'{what}: {raw_label}':<32} {spread(times[f'raw {what}']):>24}")
            for label in status:
                key = f"{what} {label}"
                print(f"{f'  kpatch {what} ({label})':<32} {spread(times[key]):>24} "
                      f"{ratio(times[key], times[f'raw {what}']):>26}")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
