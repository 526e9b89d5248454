#!/usr/bin/env python3
"""Benchmark: does kpatch's cost grow with the work? The same rebase and apply at two stack sizes, beside git.

For each size N (default 300 and 1000) it builds, with one `git fast-import`, an upstream of 3,000 files and a
stack of N patches on its base, each changing a few lines of its own file; the new upstream holds half of them
already (the same change, as a merged pull request would) and N/2 commits of churn. Then, in interleaved rounds:
  rebase  raw: git rebase v2                (a worktree at the stack's head; patch-id skipping)
          kpatch: kpatch rebase --json      (the stack applied, its worktree at it; warm mirror)
  apply   raw: git am -3 --keep-cr <the N patches>   (a worktree at v1)
          kpatch: kpatch apply               (a fresh project, the mirror warm)
  status  kpatch status --json and export --check on the applied stack (raw: git status in its worktree)
It prints seconds (median [quartiles]), seconds per patch, and the ratio kpatch / raw per round, then how each
ratio moved from the smallest size to the largest (flat: ~1.0x). No time is asserted.

    python3 scripts/bench_scale.py [--sizes 300,1000] [--reps 3] [--kpatch LABEL=SRC ...] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rebase import RebaseCase
from benchlib import ENV, Kpatch, Upstream, git, kpatches, paired, ratio, spread, timed, write_project

FILES, LINES = 3000, 40


def build(repo: Path, size: int) -> Upstream:
    """The upstream and the stack (refs/heads/stack) described above; the same `size` gives the same commits."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    proc = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=repo, stdin=subprocess.PIPE, env=ENV)
    assert proc.stdin is not None
    out = proc.stdin
    when = 1_700_000_000
    mark = 0
    texts = {f"src/d{i % 50:02d}/f{i:05d}.txt": [f"file {i} line {n}\n" for n in range(LINES)] for i in range(FILES)}

    def commit(ref: str, message: str, changes: dict[str, list[str]], parent: int | None) -> int:
        nonlocal when, mark
        when += 60
        mark += 1
        data = message.encode()
        out.write(f"commit {ref}\nmark :{mark}\nauthor Dev <dev@example.com> {when} +0000\n"
                  f"committer Dev <dev@example.com> {when} +0000\ndata {len(data)}\n".encode() + data + b"\n")
        if parent is not None:
            out.write(f"from :{parent}\n".encode())
        for path, lines in changes.items():
            blob = "".join(lines).encode()
            out.write(f"M 100644 inline {path}\ndata {len(blob)}\n".encode() + blob + b"\n")
        out.write(b"\n")
        return mark

    base = commit("refs/heads/main", "import\n", texts, None)
    paths = sorted(texts)
    changes = []
    for i in range(size):
        path = paths[(i * 7) % FILES]
        texts[path] = [f"patch {i} {line}" if n % 10 == i % 10 else line for n, line in enumerate(texts[path])]
        changes.append({path: list(texts[path])})
    head = base
    for i, change in enumerate(changes):
        head = commit("refs/heads/stack", f"patch {i}: fix {next(iter(change))}\n", change, head)
    main = base
    upstream = set(range(0, size, 2))  # every other patch is merged upstream, each with a commit of churn after
    churn = {p: [f"file {p} line {n}\n" for n in range(LINES)] for p in paths}
    for i in range(size):
        if i in upstream:
            main = commit("refs/heads/main", f"patch {i}: fix {next(iter(changes[i]))} (#{i})\n", changes[i], main)
        else:
            path = f"churn/c{i % 40:02d}.txt"
            churn[path] = [f"churn {i}\n"]
            main = commit("refs/heads/main", f"churn {i}\n", {path: churn[path]}, main)
    out.close()
    if proc.wait() != 0:
        sys.exit("git fast-import failed")
    v1 = git(repo, "rev-list", "--max-parents=0", "main").strip()
    stack = git(repo, "rev-list", "--reverse", f"{v1}..stack").split()
    return Upstream(repo=repo, v1=v1, v2=git(repo, "rev-parse", "main").strip(), stack=stack,
                    classes={i: "upstream" if i in upstream else "clean" for i in range(size)})


def cases(kps: list[Kpatch], root: Path, size: int) -> dict[str, Callable[[], float]]:
    """The timed runs of one size, by `SIZE kind: label`; each is checked once against git first."""
    up = build(root / f"up-{size}", size)
    wanted = Counter(up.classes.values())
    raw_tree = root / f"raw-{size}"
    git(up.repo, "worktree", "add", "-q", "--detach", str(raw_tree), up.stack[-1])
    patches = root / f"patches-{size}"
    git(up.repo, "format-patch", "-q", "--zero-commit", "--no-signature", "-N", "--full-index", "-o", str(patches),
        f"{up.v1}..{up.stack[-1]}")
    mails = [str(p) for p in sorted(patches.glob("*.patch"))]

    def raw_rebase() -> float:
        git(raw_tree, "checkout", "-q", "--detach", up.stack[-1])
        return timed(["git", "rebase", "--quiet", up.v2], raw_tree)

    def raw_apply() -> float:
        git(raw_tree, "checkout", "-q", "--detach", up.v1)
        return timed(["git", "am", "-3", "--keep-cr", "--quiet", *mails], raw_tree)

    def raw_status() -> float:
        return timed(["git", "status", "--porcelain"], raw_tree)

    raw_rebase()
    git_tree = git(raw_tree, "rev-parse", "HEAD^{tree}").strip()
    runs: dict[str, Callable[[], float]] = {f"{size} rebase: git": raw_rebase, f"{size} apply: git": raw_apply,
                                           f"{size} status: git": raw_status}
    for kp in kps:
        project, cache = root / f"rebase-{size}-{kp.label}", root / f"cache-{size}-{kp.label}"
        write_project(project, up, size)
        case = RebaseCase(kp, project, cache)
        found = case.classes()
        tree = git(case.tree, "rev-parse", "HEAD^{tree}").strip()
        if found != wanted or tree != git_tree:
            sys.exit(f"{kp.label}: kpatch rebase of {size} patches does not give git's result ({dict(found)})")
        fresh = root / f"apply-{size}-{kp.label}"
        write_project(fresh, up, size)

        def apply(kp: Kpatch = kp, fresh: Path = fresh, cache: Path = cache) -> float:
            shutil.rmtree(fresh / "work", ignore_errors=True)
            shutil.rmtree(fresh / ".kpatch", ignore_errors=True)
            return timed(kp.command("apply", "--cache-dir", str(cache)), fresh, kp.env())

        def status(kp: Kpatch = kp, fresh: Path = fresh, cache: Path = cache) -> float:
            return (timed(kp.command("status", "--json", "--cache-dir", str(cache)), fresh, kp.env()) +
                    timed(kp.command("export", "--check", "--cache-dir", str(cache)), fresh, kp.env()))

        runs[f"{size} rebase: {kp.label}"] = case.time
        runs[f"{size} apply: {kp.label}"] = apply
        runs[f"{size} status: {kp.label}"] = status
        apply()
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300,1000", help="stack sizes, comma-separated")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="work folder (default: a new temp dir, removed afterwards)")
    parser.add_argument("--kpatch", action="append", default=[], metavar="LABEL=SRC",
                        help="a kpatch source tree to time (repeatable; default: this checkout)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    root = (args.dir or Path(tempfile.mkdtemp(prefix="kpatch-bench-scale-"))).resolve()
    if root.exists() and any(root.iterdir()):
        sys.exit(f"{root}: not empty (give a new --dir)")
    root.mkdir(parents=True, exist_ok=True)
    try:
        kps = kpatches(args.kpatch)
        timed_cases: dict[str, Callable[[], float]] = {}
        for size in sizes:
            print(f"building the {size}-patch case", flush=True)
            timed_cases.update(cases(kps, root, size))
        times = paired(timed_cases, args.reps)
        print(f"\n{args.reps} interleaved rounds; seconds: median [quartiles]; ratio kpatch / git per round; load "
              f"average {os.getloadavg()[0]:.1f} at the end")
        growth: dict[str, list[float]] = {}
        for size in sizes:
            print(f"\n{size} patches")
            for kind in ("rebase", "apply", "status"):
                raw = times[f"{size} {kind}: git"]
                print(f"  {kind + ': git':<24} {spread(raw):>24} {statistics.median(raw) / size * 1000:>8.2f} ms/patch")
                for kp in kps:
                    mine = times[f"{size} {kind}: {kp.label}"]
                    per = [m / r for m, r in zip(mine, raw, strict=True)]
                    growth.setdefault(f"{kind}: {kp.label}", []).append(statistics.median(per))
                    print(f"  {kind + ': ' + kp.label:<24} {spread(mine):>24} "
                          f"{statistics.median(mine) / size * 1000:>8.2f} ms/patch {ratio(mine, raw):>22}")
        if len(sizes) > 1:
            print(f"\nratio at {sizes[-1]} / ratio at {sizes[0]} (flat: 1.0x)")
            for key, values in growth.items():
                print(f"  {key:<24} {values[-1] / values[0]:.2f}x")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
