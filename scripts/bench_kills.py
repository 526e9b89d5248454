#!/usr/bin/env python3
"""Benchmark: SIGKILL kpatch at random moments, recover with --continue or --abort, count the clean endings.

1. apply: a 300-patch project (kernels 150 + app 150, the app requires the kernels). `--kills` (50) kills of
   ONLY the kpatch pid at a random moment of `kpatch apply` (uniform over the length of a clean run), each
   followed by what a person does: `kpatch status`, then `apply --continue` or `apply --abort` (alternating).
   Clean: exit 0, no git operation or git lock or live git left, worktrees at the reproducible heads
   (--continue) or exactly as before (--abort), kpatch.toml and patches/ unchanged, status and a fresh apply
   work. Kills that land before apply recorded its operation (or after it ended) leave nothing to recover:
   they are counted apart, and must have changed nothing.
2. rebase: a project with a few hundred patches (clean, three-way, already upstream, one conflict that a
   recorded resolution in patches/.rerere resolves). `--rebase-kills` (20) kills of `kpatch rebase`, each
   followed by --continue or --abort: kpatch.toml and patches/ must end byte-identical to the old files
   or to a clean rebase's, worktrees at the matching heads.
3. A stale `packed-refs.lock` (and `index.lock`) planted in the mirrors: a 300-patch apply with and
   without it.

    python3 scripts/bench_kills.py [--kills 50] [--rebase-kills 20] [--seed 1] [--dir DIR] [--only apply|rebase|locks]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: its tests.support package

from tests.support.killing import ApplyKills, Runner, isolated_env
from tests.support.many_patches import make_long_project
from tests.support.rebase_kills import RebaseKills


def timed(runner: Runner, *args: str) -> float:
    started = time.monotonic()
    proc = runner.run(*args)
    if proc.returncode != 0:
        sys.exit(f"kpatch {' '.join(args)} failed: {proc.stderr}")
    return time.monotonic() - started


def apply_kills(root: Path, kills: int, seed: int) -> bool:
    project = make_long_project(root / "apply")
    runner = Runner(project.root, root / "apply" / "cache", isolated_env(root / "apply" / "home"))
    timed(runner, "apply")
    duration = statistics.median(timed(runner, "apply") for _ in range(3))
    names = list(project.counts)
    expected = {n: Runner.head(project.root / "work" / n) for n in names}
    print(f"apply: {project.total} patches, a clean apply takes {duration:.2f} s; killing at uniform(0, "
          f"{duration:.2f}) s")
    harness = ApplyKills(runner=runner, names=names, expected=expected, rng=random.Random(seed), duration=duration,
                         log=print)
    started = time.monotonic()
    result = harness.run(kills)
    print(result.summary("apply"))
    print(f"apply: {len(result.cycles)} kills in {time.monotonic() - started:.0f} s")
    for problem in result.problems():
        print("  " + problem)
    return not result.problems()


def rebase_kills(root: Path, kills: int, seed: int) -> bool:
    harness = RebaseKills.prepare(root / "rebase", random.Random(seed), log=print)
    started = time.monotonic()
    result = harness.run(kills)
    print(result.summary("rebase"))
    print(f"rebase: {len(result.cycles)} kills in {time.monotonic() - started:.0f} s")
    for problem in result.problems():
        print("  " + problem)
    return not result.problems()


def stale_locks(root: Path, reps: int) -> bool:
    """A 300-patch apply with and without stale git locks planted in the mirrors and worktrees."""
    project = make_long_project(root / "locks")
    runner = Runner(project.root, root / "locks" / "cache", isolated_env(root / "locks" / "home"))
    timed(runner, "apply")
    names = list(project.counts)
    planted = ["packed-refs.lock", "HEAD.lock", "config.lock"]
    clean, stale = [], []
    for _ in range(reps):
        clean.append(timed(runner, "apply"))
        for name in names:
            mirror = runner.cache / "mirrors" / f"{name}.git"
            for lock in planted:
                (mirror / lock).write_text("")
            (mirror / "worktrees" / name / "index.lock").write_text("")
        stale.append(timed(runner, "apply"))
        left = list(runner.cache.rglob("*.lock"))
        if left:
            print(f"locks: stale locks still there after the apply: {left}")
            return False
    raw = raw_am_with_stale_lock(runner, names[0])
    c, t = statistics.median(clean), statistics.median(stale)
    print(f"locks: a {project.total}-patch apply takes {c:.2f} s; with a stale packed-refs.lock, HEAD.lock and "
          f"config.lock in each mirror and an index.lock in each worktree {t:.2f} s ({t / c:.2f}x; medians of "
          f"{reps}); every planted lock was removed. Raw `git am` of 10 of the patches with the same stale "
          f"packed-refs.lock: {raw[0]:.1f} s against {raw[1]:.2f} s without it{raw[2]}")
    return t < 1.5 * c + 1


def raw_am_with_stale_lock(runner: Runner, name: str) -> tuple[float, float, str]:
    """What the stale lock costs git itself (what kpatch clears it from): seconds with it, without it, outcome."""
    mirror = runner.cache / "mirrors" / f"{name}.git"
    tree = runner.cache / "raw-am"
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    patches = sorted(str(p) for p in (runner.root / "patches" / name).glob("0*.patch"))[:10]
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(tree), "main"], cwd=mirror, env=env, check=True)
    times, outcome = [], ""
    try:
        for stale in (True, False):
            subprocess.run(["git", "checkout", "-q", "--detach", "main"], cwd=tree, env=env, check=True)
            if stale:
                (mirror / "packed-refs.lock").write_text("")
            started = time.monotonic()
            proc = subprocess.run(["git", "am", "-q", "-3", "--keep-cr", *patches], cwd=tree, env=env,
                                  capture_output=True, text=True)
            times.append(time.monotonic() - started)
            if stale and proc.returncode != 0:
                outcome = f" (and with it git am failed: {proc.stderr.strip().splitlines()[-1]})"
            subprocess.run(["git", "am", "--abort"], cwd=tree, env=env, capture_output=True)
            (mirror / "packed-refs.lock").unlink(missing_ok=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=mirror, env=env, check=True)
    return times[0], times[1], outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--rebase-kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, help="work folder (default: a new temp dir, removed afterwards)")
    parser.add_argument("--only", choices=("apply", "rebase", "locks"))
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="kpatch-kills-"))
    ok = True
    if args.only in (None, "apply"):
        ok &= apply_kills(root, args.kills, args.seed)
    if args.only in (None, "locks"):
        ok &= stale_locks(root, 3)
    if args.only in (None, "rebase"):
        ok &= rebase_kills(root, args.rebase_kills, args.seed)
    if args.dir is None:
        shutil.rmtree(root)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
