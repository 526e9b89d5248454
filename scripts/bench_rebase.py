#!/usr/bin/env python3
"""Benchmark: `kpatch rebase` of a 300-patch stack against raw `git rebase --onto` of the same commits.

The upstream is the size of real vLLM (scripts/benchlib.py: 8.5k files, 150 MB of text, 4.5k commits) and the
rebase from v1 to v2 has real vLLM v0.32.0 -> v0.33.0's mix: 235 clean, 60 three-way, 5 already upstream.
Both start from a worktree that holds the applied stack (a warm mirror for kpatch) and end with it rebased:
  raw:    git rebase --onto v2 v1                (in a worktree at the stack's head)
  kpatch: kpatch rebase --json                   (the project's stack applied, its worktree at the stack)
Rounds are interleaved; it prints medians with quartiles, and the ratio kpatch / raw (target: <= 1.5x).

    python3 scripts/bench_rebase.py [--reps 5] [--kpatch LABEL=SRC ...] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (
    Kpatch,
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


class RebaseCase:
    """One kpatch's project, put back before each round to the applied, not yet rebased stack."""

    def __init__(self, kp: Kpatch, root: Path, cache: Path) -> None:
        self.kp, self.root, self.cache = kp, root, cache
        self.saved = root.parent / f"{root.name}-saved"
        kp.run(root, "apply", "--cache-dir", str(cache))
        self.tree = root / "work" / "up"
        self.head = git(self.tree, "rev-parse", "HEAD").strip()
        self.saved.mkdir()
        for name in ("kpatch.toml", "patches", ".kpatch", "work/.kpatch-state.json"):
            if (root / name).exists():
                (self.saved / name).parent.mkdir(parents=True, exist_ok=True)
                copy = shutil.copytree if (root / name).is_dir() else shutil.copy2
                copy(root / name, self.saved / name)

    def reset(self) -> None:
        for name in ("kpatch.toml", "patches", ".kpatch", "work/.kpatch-state.json"):
            target = self.root / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            if (self.saved / name).exists():
                copy = shutil.copytree if (self.saved / name).is_dir() else shutil.copy2
                copy(self.saved / name, target)
        git(self.tree, "checkout", "-q", "--detach", self.head)

    def time(self) -> float:
        self.reset()
        return timed(self.kp.command("rebase", "--json", "--cache-dir", str(self.cache)), self.root, self.kp.env())

    def classes(self) -> Counter[str]:
        self.reset()
        proc = self.kp.run(self.root, "rebase", "--json", "--cache-dir", str(self.cache))
        payload = json.loads(proc.stdout)
        payload = payload["result"] if "kpatch" in payload else payload  # the envelope (older kpatches: bare)
        return Counter(p.get("class", p.get("klass")) for s in payload["stacks"] for p in s["patches"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="work folder (default: a new temp dir, removed afterwards)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--kpatch", action="append", default=[], metavar="LABEL=SRC",
                        help="a kpatch source tree to time (repeatable; default: this checkout)")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="kpatch-bench-rebase-"))
    try:
        up = cached_upstream(root / "upstream")
        print(upstream_summary(up))
        raw_tree = root / "raw-rebase"
        shutil.rmtree(raw_tree, ignore_errors=True)
        git(up.repo, "worktree", "prune")
        git(up.repo, "worktree", "add", "-q", "--detach", str(raw_tree), up.stack[-1])

        def raw() -> float:
            git(raw_tree, "checkout", "-q", "--detach", up.stack[-1])
            took = timed(["git", "rebase", "--quiet", "--onto", up.v2, up.v1], raw_tree)
            assert int(git(raw_tree, "rev-list", "--count", f"{up.v2}..HEAD")) == 295
            return took

        cases = {}
        for kp in kpatches(args.kpatch):
            project = root / f"rebase-{kp.label}"
            for old in (project, root / f"rebase-{kp.label}-saved", root / f"cache-{kp.label}"):
                shutil.rmtree(old, ignore_errors=True)
            write_project(project, up, len(up.stack))
            case = RebaseCase(kp, project, root / f"cache-{kp.label}")
            found = case.classes()
            print(f"{kp.label}: classes " + ", ".join(f"{n} {k}" for k, n in sorted(found.items())))
            cases[kp.label] = case.time
        times = paired({"git rebase --onto": raw, **cases}, args.reps)
        print(f"{'rebase 300 patches':<22} {'median s [quartiles]':>26} {'ratio to raw [quartiles]':>26}")
        print(f"{'git rebase --onto':<22} {spread(times['git rebase --onto']):>26}")
        for label in cases:
            print(f"{'kpatch rebase (' + label + ')':<22} {spread(times[label]):>26} "
                  f"{ratio(times[label], times['git rebase --onto']):>26}")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
