#!/usr/bin/env python3
"""Benchmark: the upstream evidence of a 300-patch rebase (the commits that touched each three-way patch's lines)
against the raw `git log`s it reads, and against one `git log -L` per patch (what it replaced).

The upstream is bench_rebase.py's (scripts/benchlib.py: the size of real vLLM, 4.5k commits from v1 to v2; the
300-patch stack on v1, 60 of them three-way on v2). Timed, rounds interleaved:
  raw git log:   the two git calls it makes: git log --first-parent --name-only -z v1..v2 (every commit's names),
                 then git log --no-walk -p --unified=0 <the commits touching the 60 patches' files> -- <those files>
  evidence:      kpatch.engine.evidence.behind() for the 60 three-way patches (those two, read and matched)
  evidence, all: the same for all 300 patches (an upper bound: every patch asked for)
  git log -L:    one `git log -L` per three-way patch over its hunks, v1..v2 (the approach it replaced)
  one git log -p with the paths: git log --first-parent -p --unified=0 v1..v2 -- <the 60 files> (one call: git
                 matches every pathspec against every tree entry of every commit)
It prints medians with quartiles, the ratio of each to the raw git log, and the evidence's time as a share of a
warm `kpatch rebase` of the same stack (its median from one run of the same size, --rebase-seconds).

    python3 scripts/bench_evidence.py [--reps 5] [--dir DIR] [--rebase-seconds S]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import ENV, cached_upstream, paired, ratio, spread, upstream_summary, write_project

from kpatch.engine.evidence import behind, patch_lines
from kpatch.gitx import Repository
from kpatch.stack.series import load_series


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="work folder (default: a new temp dir, removed afterwards)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rebase-seconds", type=float, help="a warm kpatch rebase's median, to say the share")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="kpatch-bench-evidence-"))
    try:
        up = cached_upstream(root / "upstream")
        print(upstream_summary(up))
        project = root / "evidence-project"
        shutil.rmtree(project, ignore_errors=True)
        series = load_series("up", write_project(project, up, len(up.stack)))
        patches = series.patches
        three_way = {patches[i].name for i, kind in up.classes.items() if kind == "three-way" and i < len(patches)}
        everyone = {p.name for p in patches}
        repo = Repository(up.repo)
        lines = patch_lines(patches, three_way)
        files = sorted({path for found in lines.values() for path in found})
        names = ["git", "log", "--first-parent", "--diff-merges=first-parent", "--no-renames", "--name-only", "-z",
                 "--format=%x01%H", f"{up.v1}..{up.v2}"]
        listed = subprocess.run(names, cwd=up.repo, env=ENV, capture_output=True, check=True).stdout
        touching = [chunk.partition(b"\0")[0].decode() for chunk in listed.split(b"\x01")[1:]
                    if set(files) & set(chunk.partition(b"\0")[2].decode().strip("\n").split("\0"))]
        hunks = ["git", "log", "--stdin", "--no-walk=unsorted", "--diff-merges=first-parent", "--no-renames",
                 "--no-color", "--no-ext-diff", "--no-textconv", "-p", "--unified=0",
                 "--format=%x00%H%x00%an <%ae>%x00%aI%x00%s", "--", *files]
        one_log = ["git", "log", "--first-parent", "--diff-merges=first-parent", "--reverse", "--no-renames",
                   "--no-color", "--no-ext-diff", "--no-textconv", "-p", "--unified=0",
                   "--format=%x00%H%x00%an <%ae>%x00%aI%x00%s", f"{up.v1}..{up.v2}", "--", *files]
        found = behind(repo, up.v1, up.v2, patches, three_way, None)
        every = listed.count(b"\x01")
        print(f"{len(three_way)} three-way patches on {len(files)} files, touched by {len(touching)} of "
              f"{every} upstream commits; {sum(len(c) for c in found.values())} listed as touching "
              f"their lines ({sum(1 for c in found.values() if c)} patches with at least one)")

        def timed(call: Callable[[], object]) -> float:
            started = time.perf_counter()
            call()
            return time.perf_counter() - started

        def per_patch() -> None:
            for name in sorted(three_way):
                ranges = [arg for path, stretches in lines[name].items() for low, high in stretches
                          for arg in ("-L", f"{max(low, 1)},{max(high, low, 1)}:{path}")]
                subprocess.run(["git", "log", "--no-merges", "--format=%H", *ranges, f"{up.v1}..{up.v2}"],
                               cwd=up.repo, env=ENV, capture_output=True, check=True)

        cases: dict[str, Callable[[], float]] = {
            "raw git log": lambda: timed(lambda: (
                subprocess.run(names, cwd=up.repo, env=ENV, capture_output=True, check=True),
                subprocess.run(hunks, cwd=up.repo, env=ENV, capture_output=True, check=True,
                               input="".join(f"{sha}\n" for sha in reversed(touching)).encode()))),
            "evidence": lambda: timed(lambda: behind(repo, up.v1, up.v2, patches, three_way, None)),
            "evidence, all 300": lambda: timed(lambda: behind(repo, up.v1, up.v2, patches, everyone, None)),
            "git log -L per patch": lambda: timed(per_patch),
            "one git log -p with paths": lambda: timed(lambda: subprocess.run(one_log, cwd=up.repo, env=ENV,
                                                                              capture_output=True, check=True)),
        }
        times = paired(cases, args.reps)
        print(f"{'300-patch stack, v1..v2':<26} {'median s [quartiles]':>26} {'ratio to raw [quartiles]':>26}")
        for name in cases:
            print(f"{name:<26} {spread(times[name]):>26} "
                  f"{'' if name == 'raw git log' else ratio(times[name], times['raw git log']):>26}")
        if args.rebase_seconds:
            median = sorted(times["evidence"])[len(times["evidence"]) // 2]
            print(f"evidence's share of a {args.rebase_seconds:.2f} s warm rebase: {median / args.rebase_seconds:.1%}")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
