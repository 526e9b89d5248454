#!/usr/bin/env python3
"""Benchmark: `kpatch apply` against raw `git am -3` of the same patch files, on an upstream the size of vLLM.

Builds (with git fast-import) an upstream of about 8,500 files / 150 MB with a few thousand commits of history,
then stacks of 1, 50 and 300 patches. For each size it times, in the same run and interleaved:
  raw:    git checkout --detach <base> && git am -3 <patches>    (in a worktree that holds the last result)
  kpatch: kpatch apply                                            (same starting point, via its CLI)
and prints the medians and the ratio kpatch / raw (target: <= 1.15 for every size).

    python3 scripts/bench_apply.py [--dir DIR] [--reps 5] [--files 8500] [--mb 150] [--history 3000]
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

SIZES = (1, 50, 300)
ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
       "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
       "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid"}
WORDS = "tensor kernel queue sycl launch stride token head cache slot rope block device stream".split()


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True, text=True).stdout


def text_file(rng: random.Random, size: int) -> bytes:
    lines = []
    total = 0
    while total < size:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) + f"  # {rng.randint(0, 10**9)}\n"
        lines.append(line)
        total += len(line)
    return "".join(lines).encode()


def build_upstream(repo: Path, files: int, megabytes: int, history: int, stack: int) -> None:
    """main: one big import + `history` small commits; branch stack: `stack` patches on top of main."""
    rng = random.Random(42)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    proc = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=repo, stdin=subprocess.PIPE, env=ENV)
    assert proc.stdin is not None
    out = proc.stdin
    when = 1_700_000_000
    per_file = megabytes * 1024 * 1024 // files
    paths = [f"src/{d:03d}/module_{i:05d}.py" for i, d in ((i, i % 300) for i in range(files))]

    def commit(ref: str, message: str, changes: list[tuple[str, bytes]]) -> None:
        """A commit on `ref`, whose parent is the ref's current tip (fast-import keeps track)."""
        nonlocal when
        when += 60
        msg = message.encode()
        out.write(f"commit {ref}\ncommitter Bench <bench@example.invalid> {when} +0000\n".encode())
        out.write(f"data {len(msg)}\n".encode() + msg + b"\n")
        for path, data in changes:
            out.write(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")

    contents = {p: text_file(rng, per_file) for p in paths}
    commit("refs/heads/main", "import", list(contents.items()))
    logs = [f"docs/changelog_{i:02d}.txt" for i in range(40)]
    for i in range(history):
        log = logs[i % len(logs)]
        commit("refs/heads/main", f"upstream change {i}", [(log, f"entry {i}\n".encode() * (1 + i % 7))])
    out.write(b"reset refs/heads/stack\nfrom refs/heads/main\n\n")
    for i in range(stack):  # each patch inserts a few lines in the middle of a different file
        path = paths[(i * 37) % len(paths)]
        lines = contents[path].splitlines(keepends=True)
        middle = len(lines) // 2
        lines[middle:middle] = [f"fixed_{i} = kernel(queue, stride={i})\n".encode(), b"# keep in sync\n"]
        contents[path] = b"".join(lines)
        commit("refs/heads/stack", f"Fix {i}\n\nUpstream-Status: pending\n", [(path, contents[path])])
    out.close()
    if proc.wait() != 0:
        sys.exit("fast-import failed")


def timed(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=ENV, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="work folder (default: a new temp dir, removed afterwards)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--files", type=int, default=8500)
    parser.add_argument("--mb", type=int, default=150)
    parser.add_argument("--history", type=int, default=3000)
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="kpatch-bench-"))
    upstream = root / "upstream"
    started = time.perf_counter()
    build_upstream(upstream, args.files, args.mb, args.history, max(SIZES))
    size = sum(f.stat().st_size for f in (upstream / ".git").rglob("*") if f.is_file()) / 2**20
    commits = int(git(upstream, "rev-list", "--count", "main"))
    print(f"upstream: {args.files} files, {args.mb} MB of text, {commits} commits, .git {size:.0f} MB "
          f"(built in {time.perf_counter() - started:.0f} s)")
    base = git(upstream, "rev-parse", "main").strip()
    kpatch = [sys.executable, "-m", "kpatch"]
    print(f"{'patches':>8} {'git am -3 (s)':>14} {'kpatch apply (s)':>17} {'ratio':>6}")
    for n in SIZES:
        project = root / f"project-{n}"
        patches = project / "patches" / "up"
        patches.mkdir(parents=True)
        tip = f"stack~{max(SIZES) - n}" if n < max(SIZES) else "stack"
        git(upstream, "format-patch", "-q", "--zero-commit", "--no-signature", "-N", "--full-index",
            "-o", str(patches), f"{base}..{tip}")
        names = sorted(p.name for p in patches.glob("*.patch"))
        (patches / "series").write_text("".join(f"{name}\n" for name in names))
        (project / "kpatch.toml").write_text(
            f'version = 1\n\n[[upstream]]\nname = "up"\nurl = "{upstream}"\nbranch = "main"\n'
            f'base = "{base}"\npatches = "patches/up"\nrequires = []\n')
        cache = ["--cache-dir", str(root / "cache")]
        subprocess.run([*kpatch, "apply", *cache], cwd=project, env=ENV, check=True, capture_output=True)
        raw_tree = root / f"raw-{n}"
        git(upstream, "worktree", "add", "-q", "--detach", str(raw_tree), base)
        raw_am = ["git", "am", "-3", "--quiet", *(str(patches / name) for name in names)]
        subprocess.run(raw_am, cwd=raw_tree, env=ENV, check=True, capture_output=True)
        raw, tool = [], []
        for _ in range(args.reps):  # interleaved, both start from a tree holding the previous result
            started = time.perf_counter()
            subprocess.run(["git", "checkout", "-q", "--detach", base], cwd=raw_tree, env=ENV, check=True)
            subprocess.run(raw_am, cwd=raw_tree, env=ENV, check=True, capture_output=True)
            raw.append(time.perf_counter() - started)
            tool.append(timed([*kpatch, "apply", *cache], project))
        r, k = statistics.median(raw), statistics.median(tool)
        print(f"{n:>8} {r:>14.3f} {k:>17.3f} {k / r:>6.2f}")
    if args.dir is None:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
