#!/usr/bin/env python3
"""Benchmark: does a `kpatch nightly --replay` step cost the same at step 1,000 as at step 1?

For each length C (default 100 and 1000) it builds, with one `git fast-import`, an upstream of 2,000 files and a
stack of 50 patches on its base (patch i changes line 20 of its own file), then C upstream commits where work keeps
landing, most of it churn on other files, some on the stack's files:
  every 10th commit   a line of a patch's context changes upstream (that step rebases it with a three-way merge
                      and writes the patch again);
  twice in 50 commits a patch's own line changes upstream (the step conflicts: a night a person would be needed,
                      its culprit bisected); 5 commits later upstream reverts it (the pins move again): both
                      tenths of the steps hold such nights;
  every 200th commit  a patch's change lands upstream as it is (merged: the step drops it as upstream).
Then it runs `kpatch nightly --replay up=v1..main --step 1` (one step per upstream commit, the rebase stage only:
no build, no Docker; offline) on a project whose mirror is warm, timestamps each step's line on stderr as it comes,
and prints the seconds per step of the first and the last tenth of the steps (median [quartiles]), wall clock and CPU
(kpatch's and its git processes', from /proc: Linux), the steps that stopped at a conflict apart, and last tenth /
first tenth (flat: ~1.0x). No time is asserted.

    python3 scripts/bench_replay.py [--lengths 100,1000] [--reps 1] [--kpatch LABEL=SRC ...] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import ENV, Kpatch, Upstream, git, kpatches, spread, write_project

FILES, LINES, STACK = 2000, 40, 50
AT, NEAR = 20, 17  # the line each patch changes; a line of its context (a change there: a three-way merge)
THREE_WAY_EVERY, CONFLICT_EVERY, CONFLICT_AT, REVERT_AFTER, MERGED_EVERY, MERGED_AT = 10, 50, (7, 43), 5, 200, 50
STEP = re.compile(r"^step (\d+)/(\d+) ")


def build(repo: Path, length: int) -> Upstream:
    """The upstream and the stack described above (refs/heads/stack on v1; main = v1 + `length` commits)."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    proc = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=repo, stdin=subprocess.PIPE, env=ENV)
    assert proc.stdin is not None
    out = proc.stdin
    when = 1_700_000_000
    texts = {f"src/d{i % 50:02d}/f{i:05d}.txt": [f"file {i} line {n}\n" for n in range(LINES)] for i in range(FILES)}
    paths = sorted(texts)

    def commit(ref: str, message: str, changes: dict[str, list[str]]) -> None:
        nonlocal when
        when += 3600  # 24 commits a day: with --step 1, a day's steps rewrite its records in the history
        data = message.encode()
        out.write(f"commit {ref}\nauthor Dev <dev@example.com> {when} +0000\n"
                  f"committer Dev <dev@example.com> {when} +0000\ndata {len(data)}\n".encode() + data + b"\n")
        for path, lines in changes.items():
            texts[path] = lines
            blob = "".join(lines).encode()
            out.write(f"M 100644 inline {path}\ndata {len(blob)}\n".encode() + blob + b"\n")
        out.write(b"\n")

    commit("refs/heads/main", "import\n", dict(texts))
    out.write(b"reset refs/tags/v1\nfrom refs/heads/main\n\n")
    targets = [paths[(i * 7) % FILES] for i in range(STACK)]
    original = {path: texts[path] for path in targets}
    patched = {}
    out.write(b"reset refs/heads/stack\nfrom refs/tags/v1\n\n")
    for i, path in enumerate(targets):
        lines = list(texts[path])
        lines[AT] = f"patch {i}: {lines[AT]}"
        patched[i] = lines
        commit("refs/heads/stack", f"patch {i}: fix {path}\n", {path: lines})
    texts.update(original)  # main goes on from v1's files
    merged = list(range(STACK - 1, -1, -1))[:length // MERGED_EVERY + 1]  # the last first: 90% stay
    others = [i for i in range(STACK) if i not in merged]
    churn = [p for p in paths if p not in set(targets)]
    reverts: dict[int, tuple[str, str]] = {}
    classes = {i: "clean" for i in range(STACK)}
    for n in range(1, length + 1):
        if n in reverts:
            path, line = reverts.pop(n)
            lines = list(texts[path])
            lines[AT] = line
            commit("refs/heads/main", f"Revert the rework of {path} (#{n})\n", {path: lines})
        elif n % MERGED_EVERY == MERGED_AT:
            i = merged.pop(0)
            lines = list(texts[targets[i]])
            lines[AT] = patched[i][AT]
            classes[i] = "upstream"
            commit("refs/heads/main", f"patch {i}: fix {targets[i]} (#{n})\n", {targets[i]: lines})
        elif n % CONFLICT_EVERY in CONFLICT_AT:
            path = targets[others[(n // CONFLICT_EVERY * 13 + 1) % len(others)]]
            lines = list(texts[path])
            reverts[n + REVERT_AFTER] = (path, lines[AT])
            lines[AT] = f"reworked {n}: {lines[AT]}"
            commit("refs/heads/main", f"Rework {path} (#{n})\n", {path: lines})
        elif n % THREE_WAY_EVERY == 3:
            path = targets[others[(n // THREE_WAY_EVERY * 7) % len(others)]]
            lines = list(texts[path])
            lines[NEAR] = f"touched {n}: {lines[NEAR]}"
            commit("refs/heads/main", f"Touch {path} (#{n})\n", {path: lines})
        else:
            changed = {}
            for k in range(1 + n % 3):
                path = churn[(n * 31 + k * 977) % len(churn)]
                lines = list(texts[path])
                lines[n % LINES] = f"churn {n}\n"
                changed[path] = lines
            commit("refs/heads/main", f"Work {n}\n", changed)
    out.close()
    if proc.wait() != 0:
        sys.exit("git fast-import failed")
    v1 = git(repo, "rev-parse", "v1^{commit}").strip()
    stack = git(repo, "rev-list", "--reverse", f"{v1}..stack").split()
    return Upstream(repo=repo, v1=v1, v2=git(repo, "rev-parse", "main").strip(), stack=stack, classes=classes)


@dataclass(frozen=True)
class Run:
    """One replay: each step's seconds (from the previous step's line to its own), the CPU seconds kpatch and the
    git processes it waited for spent in them, whether it stopped."""

    seconds: list[float]
    cpu: list[float]
    person: list[bool]
    total: float


def cpu_seconds(pid: int) -> float:
    """user + system time of the process and of the children it waited for (Linux: /proc/PID/stat): the work a step
    did, which a shared machine's load does not stretch as it stretches the wall clock."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def replay(kp: Kpatch, root: Path, up: Upstream, length: int) -> Run:
    """A fresh copy of the project (its mirror warm in the cache), replayed over v1..main one commit a step."""
    project, cache = root / f"p-{length}-{kp.label}", root / f"cache-{length}-{kp.label}"
    shutil.rmtree(project, ignore_errors=True)
    write_project(project, up, STACK)
    history = project / "history.jsonl"
    command = kp.command("nightly", "--json", "--replay", f"up={up.v1}..main", "--step", "1", "--max-steps",
                         str(length), "--history", str(history), "--cache-dir", str(cache))
    started = time.perf_counter()
    stamps: list[float] = []
    cpu: list[float] = []
    result = root / f"result-{length}-{kp.label}.json"  # a file, not a pipe: the result of 1,000 steps outgrows
    with result.open("w") as stdout:                     # a pipe's buffer while stderr is still being read
        proc = subprocess.Popen(command, cwd=project, env=kp.env(), stdout=stdout, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    tail: list[str] = []
    with (root / f"steps-{length}-{kp.label}.log").open("a") as log:  # read while a long replay runs
        for line in proc.stderr:
            tail = [*tail[-40:], line]
            if STEP.match(line.strip()):
                stamps.append(time.perf_counter())
                cpu.append(cpu_seconds(proc.pid))
                log.write(f"{stamps[-1] - started:.3f} {cpu[-1]:.2f} {line}")
                log.flush()
    if proc.wait() != 0:
        sys.exit(f"{kp.label}: kpatch nightly --replay failed ({proc.returncode}):\n{''.join(tail)}")
    total = time.perf_counter() - started
    payload = json.loads(result.read_text())["result"]
    steps = payload["steps"]
    if len(steps) != length or len(stamps) != length:
        sys.exit(f"{kp.label}: {len(steps)} steps in the result, {len(stamps)} step lines; {length} expected")
    # The first step's time also holds the start (the process, the scratch copy, its mirror seeded, the fetch).
    seconds = [b - a for a, b in zip([started, *stamps], stamps, strict=False)]
    spent = [b - a for a, b in zip([0.0, *cpu], cpu, strict=False)]
    return Run(seconds=seconds, cpu=spent, person=[s["person"] for s in steps], total=total)


def tenth(run: Run, values: list[float], last: bool, person: bool) -> list[float]:
    n = max(1, len(values) // 10)
    picked = range(len(values) - n, len(values)) if last else range(1, n + 1)  # step 1 holds the start
    return [values[i] for i in picked if run.person[i] is person]


def describe(values: Sequence[float]) -> str:
    return spread(values) if values else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="100,1000", help="upstream commits (= steps), comma-separated")
    parser.add_argument("--reps", type=int, default=1, help="replays per kpatch and length (rounds interleaved)")
    parser.add_argument("--dir", type=Path, help="work folder (default: a new temp dir, removed afterwards)")
    parser.add_argument("--kpatch", action="append", default=[], metavar="LABEL=SRC",
                        help="a kpatch source tree to time (repeatable; default: this checkout)")
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]
    root = (args.dir or Path(tempfile.mkdtemp(prefix="kpatch-bench-replay-"))).resolve()
    if root.exists() and any(root.iterdir()):
        sys.exit(f"{root}: not empty (give a new --dir)")
    root.mkdir(parents=True, exist_ok=True)
    try:
        kps = kpatches(args.kpatch)
        ups = {}
        for length in lengths:
            ups[length] = build(root / f"up-{length}", length)
            for kp in kps:  # the project's mirror, warm (a replay seeds its scratch mirror from it)
                warm = root / f"warm-{length}-{kp.label}"
                write_project(warm, ups[length], STACK)
                kp.run(warm, "apply", "--cache-dir", str(root / f"cache-{length}-{kp.label}"))
        runs: dict[tuple[int, str], list[Run]] = {}
        for rep in range(args.reps):
            order = [(length, kp) for length in lengths for kp in kps]
            for length, kp in order[rep % len(order):] + order[:rep % len(order)]:
                print(f"round {rep + 1}: {kp.label}, {length} steps", flush=True)
                runs.setdefault((length, kp.label), []).append(replay(kp, root, ups[length], length))
        print(f"\n{args.reps} round(s); seconds per step (wall clock; CPU of kpatch and its git): median "
              "[quartiles] of the first and the last tenth of the steps (step 1, which holds the start, left out); "
              f"load average {os.getloadavg()[0]:.1f} at the end")
        for (length, label), done in runs.items():
            person = sum(done[0].person)
            print(f"\n{label}, {length} upstream commits, {length} steps ({person} stopped at a conflict); whole "
                  f"replay {statistics.median(r.total for r in done):.1f} s")
            for stopped, what in ((False, "steps that rebased"), (True, "steps that stopped")):
                for kind in ("wall", "cpu"):
                    first = [s for r in done for s in tenth(r, getattr(r, "seconds" if kind == "wall" else kind),
                                                             False, stopped)]
                    last = [s for r in done for s in tenth(r, getattr(r, "seconds" if kind == "wall" else kind),
                                                            True, stopped)]
                    growth = f"{statistics.median(last) / statistics.median(first):.2f}x" if first and last else "-"
                    print(f"  {what + ', ' + kind:<25} first tenth {describe(first):>22}  last tenth "
                          f"{describe(last):>22}  last / first {growth}")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
