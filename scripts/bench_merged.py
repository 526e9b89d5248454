#!/usr/bin/env python3
"""Benchmark: kpatch's already-merged detection against one raw `git log -p | git patch-id --stable` pass.

Builds (git fast-import) an upstream whose range after the base has 5,000 commits (then 20,000), of which
a few carry patches of a 50-patch stack verbatim and the rest touch other paths. Times, in the same run:
  raw:    git log -p base..new | git patch-id --stable          (every commit in the range hashed)
  kpatch: the patch-ids of the commits touching the stack's paths + the patch files' ids (what rebase does)
and prints the medians, the ratio kpatch / raw (target <= 1.5) and how each grows with the history.

    python3 scripts/bench_merged.py [--reps 5]
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kpatch.gitx import Repository, commit_patch_ids, file_patch_ids

ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
FILES, STACK, MERGED = 2000, 50, 5


def build(repo: Path, history: int) -> tuple[str, list[Path]]:
    """Return (base, patch files); main = base + `history` commits, MERGED of which carry stack patches."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=ENV)
    proc = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=repo, stdin=subprocess.PIPE, env=ENV)
    assert proc.stdin is not None
    when = 1_700_000_000

    def commit(ref: str, message: str, changes: dict[str, bytes]) -> None:
        nonlocal when
        when += 60
        msg = message.encode()
        proc.stdin.write(f"commit {ref}\ncommitter B <b@example.invalid> {when} +0000\ndata {len(msg)}\n".encode()
                         + msg + b"\n")
        for path, data in changes.items():
            proc.stdin.write(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")

    def body(i: int, extra: str = "") -> bytes:
        return "".join(f"module {i} line {j}{extra if j == 20 else ''}\n" for j in range(40)).encode()

    commit("refs/heads/main", "import", {f"src/m{i:04d}.py": body(i) for i in range(FILES)})
    proc.stdin.write(b"reset refs/heads/stack\nfrom refs/heads/main\n\n")
    for k in range(STACK):
        commit("refs/heads/stack", f"fix {k}", {f"src/m{k:04d}.py": body(k, "  # fixed")})
    merged_at = {history * (m + 1) // (MERGED + 1): m for m in range(MERGED)}
    for i in range(history):
        if i in merged_at:  # a stack patch merged verbatim
            k = merged_at[i]
            commit("refs/heads/main", f"upstream merge of fix {k}", {f"src/m{k:04d}.py": body(k, "  # fixed")})
        else:  # churn outside the stack's paths
            commit("refs/heads/main", f"churn {i}", {f"other/c{i % 500:03d}.py": f"churn {i}\n".encode() * 30})
    proc.stdin.close()
    if proc.wait() != 0:
        sys.exit("fast-import failed")
    base = subprocess.run(["git", "rev-parse", f"main~{history}"], cwd=repo, env=ENV, check=True,
                          capture_output=True, text=True).stdout.strip()
    # As kpatch's mirrors have after every fetch: a commit-graph with changed-path Bloom filters.
    subprocess.run(["git", "commit-graph", "write", "--reachable", "--changed-paths", "--split"], cwd=repo,
                   env=ENV, check=True)
    patches = repo.parent / f"patches-{history}"
    subprocess.run(["git", "format-patch", "-q", "--zero-commit", "--full-index", "-o", str(patches),
                    f"{base}..stack"], cwd=repo, env=ENV, check=True)
    return base, sorted(patches.glob("*.patch"))


def raw_pass(repo: Path, base: str) -> int:
    log = subprocess.Popen(["git", "log", "-p", f"{base}..main"], cwd=repo, env=ENV, stdout=subprocess.PIPE)
    ids = subprocess.run(["git", "patch-id", "--stable"], cwd=repo, env=ENV, stdin=log.stdout,
                         capture_output=True, check=True).stdout
    log.wait()
    return len(ids.splitlines())


def kpatch_pass(repo: Path, base: str, patches: list[Path]) -> int:
    from kpatch.stack import parse_patch

    paths = sorted({p for f in patches for p in parse_patch(f).paths})
    upstream = set(commit_patch_ids(Repository(repo), base, "main", paths).values())
    return sum(1 for pid in file_patch_ids(Repository(repo), patches) if pid in upstream)


def median_time(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kpatch-bench-merged-"))
    print(f"{'commits':>8} {'raw pass (s)':>13} {'kpatch (s)':>11} {'ratio':>6} {'found':>6}")
    try:
        for history in (5000, 20000):
            repo = root / f"up-{history}"
            base, patches = build(repo, history)
            found = kpatch_pass(repo, base, patches)
            raw = median_time(functools.partial(raw_pass, repo, base), args.reps)
            mine = median_time(functools.partial(kpatch_pass, repo, base, patches), args.reps)
            print(f"{history:>8} {raw:>13.3f} {mine:>11.3f} {mine / raw:>6.2f} {found:>4}/{MERGED}")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
