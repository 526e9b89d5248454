#!/usr/bin/env python3
"""Benchmark: making a journal's staged patch files durable, kpatch against the raw tools, with and without other
dirty data on the file system.

kpatch's journal (kpatch/project/journal.py) makes its staged files durable before its commit point with
`kpatch.files.sync_files`: an fsync of each file and folder, side by side. The raw tools it is set against:

  sync FILES...   coreutils: an fsync of each named file, one after another
  sync -f DIR     coreutils: syncfs(2) of DIR's file system, which also writes back every other process's
                  dirty data (what kpatch did before: its cost grows with the machine's work, not the write's)

Each case writes N patch-sized files (3 KB) in a fresh folder; with `--dirty MB`, that many MB of 32 KB files
are written (and not synced) beside them first, as a checkout or a build leaves them. Prints medians with
quartiles and the ratios kpatch / raw per round.

    python3 scripts/bench_sync.py [--files 150,1000] [--dirty 0,512] [--reps 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kpatch.files import sync_files


def _files(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True)
    paths = []
    for index in range(count):
        path = folder / f"{index:04d}.patch"
        path.write_bytes(os.urandom(3072))
        paths.append(path)
    return paths


def _dirty(folder: Path, megabytes: int) -> None:
    """`megabytes` of files of 32 KB each, not synced: what a checkout beside (or a build) leaves dirty."""
    other = folder / "other"
    other.mkdir()
    for index in range(megabytes * 32):
        (other / f"{index}.c").write_bytes(os.urandom(32 << 10))


def _round(root: Path, count: int, megabytes: int, how: str) -> float:
    folder = root / f"{how}-{time.monotonic_ns()}"
    paths = _files(folder / "new", count)
    subprocess.run(["sync"], check=True)  # every round starts from a clean file system
    _dirty(folder, megabytes)
    start = time.perf_counter()
    if how == "kpatch":
        sync_files([*paths, folder / "new"])
    elif how == "sync FILES":
        subprocess.run(["sync", "--", *map(str, paths), str(folder / "new")], check=True)
    else:
        subprocess.run(["sync", "-f", str(folder)], check=True)
    took = time.perf_counter() - start
    shutil.rmtree(folder)
    return took


def _summary(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{statistics.median(values):7.3f} [{q[0]:.3f}-{q[2]:.3f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", default="150,1000")
    parser.add_argument("--dirty", default="0,512", help="MB of other dirty data per round (comma-separated)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp folder)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-sync-", dir=args.dir))
    try:
        print(f"{args.reps} interleaved rounds in {root}; seconds: median [quartiles]; ratio kpatch / raw per round")
        for count in map(int, args.files.split(",")):
            for megabytes in map(int, args.dirty.split(",")):
                times: dict[str, list[float]] = {"kpatch": [], "sync FILES": [], "sync -f": []}
                for _ in range(args.reps):
                    for how in times:
                        times[how].append(_round(root, count, megabytes, how))
                print(f"\n{count} files, {megabytes} MB of other dirty data")
                for how, values in times.items():
                    ratios = [k / r for k, r in zip(times["kpatch"], values, strict=True)]
                    tail = "" if how == "kpatch" else f"   kpatch / {how}: {_summary(ratios)}x"
                    print(f"  {how:<11} {_summary(values)}{tail}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
