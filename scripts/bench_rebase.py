#!/usr/bin/env python3
"""Benchmark: `kpatch rebase` of a 300-patch stack against raw git doing the same, warm and cold.

The upstream is either generated at the size of real vLLM (scripts/benchlib.py: 8.5k files, 150 MB of text, 4.5k
commits) or, with --real, real vLLM: the v0.32.0 and v0.33.0 release sdists as two commits (the real release delta,
3k files), then the commits that give the stack its mix. Either way the rebase from v1 to v2 has real vLLM
v0.32.0 -> v0.33.0's mix: 235 clean, 60 three-way, 5 already upstream.
  warm: both start from a worktree that holds the applied stack (a warm mirror and run state for kpatch):
    raw:    git rebase --onto v2 v1                          (in a worktree at the stack's head)
    kpatch: kpatch rebase --json                             (the project's stack applied, its worktree at it)
  cold: a fresh project checkout (kpatch.toml and patches/ only), the mirror cached, no worktree, no run state:
    raw:    git checkout v2 && git am -3 --keep-cr <the 300 patches>   (in a worktree at v1)
    kpatch: kpatch rebase --json
Rounds are interleaved; it prints medians with quartiles, and the ratios kpatch / raw (targets: warm <= 1.5x,
cold <= 1.2x). --real needs vllm-0.32.0.tar.gz and vllm-0.33.0.tar.gz in --sdists (`pip download --no-deps
--no-binary :all: vllm==0.32.0`, or their PyPI pages); the upstream built from them is kept next to them.

    python3 scripts/bench_rebase.py [--real] [--sdists DIR] [--reps 5] [--only warm|cold] [--kpatch LABEL=SRC ...]
                                    [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (
    SDISTS,
    Kpatch,
    Upstream,
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


class ColdCase:
    """One kpatch's fresh project checkout: kpatch.toml and patches/ only, the mirror in a cache kept between
    rounds, no worktree and no run state; each round starts from a new copy."""

    def __init__(self, kp: Kpatch, root: Path, up: Upstream, cache: Path) -> None:
        self.kp, self.root, self.cache = kp, root, cache
        self.saved = root.parent / f"{root.name}-saved"
        write_project(self.saved, up, len(up.stack))
        # The cache's mirror is made by the first run (classes(), untimed): a night restores it from CI's cache.

    def reset(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.copytree(self.saved, self.root)

    def time(self) -> float:
        self.reset()
        return timed(self.kp.command("rebase", "--json", "--cache-dir", str(self.cache)), self.root, self.kp.env())

    def classes(self) -> Counter[str]:
        self.reset()
        proc = self.kp.run(self.root, "rebase", "--json", "--cache-dir", str(self.cache))
        payload = json.loads(proc.stdout)["result"]
        return Counter(p["class"] for s in payload["stacks"] for p in s["patches"])


def table(title: str, raw_label: str, times: dict[str, list[float]], labels: list[str]) -> None:
    print(f"{title:<30} {'median s [quartiles]':>26} {'ratio to raw [quartiles]':>26}")
    print(f"{raw_label:<30} {spread(times[raw_label]):>26}")
    for label in labels:
        print(f"{'kpatch rebase (' + label + ')':<30} {spread(times[label]):>26} "
              f"{ratio(times[label], times[raw_label]):>26}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="work folder (default: a new temp dir, removed afterwards)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--real", action="store_true", help="real vLLM history from its release sdists")
    parser.add_argument("--sdists", type=Path, default=SDISTS, help=f"where the sdists are (default: {SDISTS})")
    parser.add_argument("--only", choices=("warm", "cold"), help="time one case only (default: both)")
    parser.add_argument("--kpatch", action="append", default=[], metavar="LABEL=SRC",
                        help="a kpatch source tree to time (repeatable; default: this checkout)")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="kpatch-bench-rebase-"))
    try:
        # The real upstream is kept next to the sdists (built once, about 30 s), the generated one in the work folder.
        up = cached_upstream(args.sdists.parent / "vllm-real", real=args.sdists) if args.real \
            else cached_upstream(root / "upstream")
        print(upstream_summary(up))
        raw_tree = root / "raw-rebase"
        shutil.rmtree(raw_tree, ignore_errors=True)
        git(up.repo, "worktree", "prune")
        git(up.repo, "worktree", "add", "-q", "--detach", str(raw_tree), up.stack[-1])
        mails = root / "raw-patches"
        shutil.rmtree(mails, ignore_errors=True)
        git(up.repo, "format-patch", "-q", "--zero-commit", "--no-signature", "-N", "--full-index", "-o", str(mails),
            f"{up.v1}..{up.stack[-1]}")

        def raw() -> float:
            git(raw_tree, "checkout", "-q", "--detach", up.stack[-1])
            took = timed(["git", "rebase", "--quiet", "--onto", up.v2, up.v1], raw_tree)
            assert int(git(raw_tree, "rev-list", "--count", f"{up.v2}..HEAD")) == 295
            return took

        def raw_cold() -> float:
            git(raw_tree, "checkout", "-q", "--detach", up.v1)
            took = timed(["sh", "-c", 'git checkout -q --detach "$1" && shift && git am -q -3 --keep-cr "$@"', "-",
                          up.v2, *map(str, sorted(mails.glob("*.patch")))], raw_tree)
            assert int(git(raw_tree, "rev-list", "--count", f"{up.v2}..HEAD")) == 295
            return took

        warm, cold = {}, {}
        for kp in kpatches(args.kpatch):
            if args.only != "cold":
                project = root / f"rebase-{kp.label}"
                for old in (project, root / f"rebase-{kp.label}-saved", root / f"cache-{kp.label}"):
                    shutil.rmtree(old, ignore_errors=True)
                write_project(project, up, len(up.stack))
                case = RebaseCase(kp, project, root / f"cache-{kp.label}")
                found = case.classes()
                print(f"{kp.label} warm: classes " + ", ".join(f"{n} {k}" for k, n in sorted(found.items())))
                warm[kp.label] = case.time
            if args.only != "warm":
                project = root / f"cold-{kp.label}"
                for old in (project, root / f"cold-{kp.label}-saved", root / f"cold-cache-{kp.label}"):
                    shutil.rmtree(old, ignore_errors=True)
                fresh = ColdCase(kp, project, up, root / f"cold-cache-{kp.label}")
                found = fresh.classes()
                print(f"{kp.label} cold: classes " + ", ".join(f"{n} {k}" for k, n in sorted(found.items())))
                cold[kp.label] = fresh.time
        cases: dict[str, Callable[[], float]] = {}
        if warm:
            cases.update({"git rebase --onto": raw, **{f"warm {k}": v for k, v in warm.items()}})
        if cold:
            cases.update({"git checkout + am -3": raw_cold, **{f"cold {k}": v for k, v in cold.items()}})
        times = paired(cases, args.reps)
        if warm:
            table("warm rebase, 300 patches", "git rebase --onto",
                  {**times, **{k: times[f"warm {k}"] for k in warm}}, list(warm))
        if cold:
            table("cold rebase, 300 patches", "git checkout + am -3",
                  {**times, **{k: times[f"cold {k}"] for k in cold}}, list(cold))
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
