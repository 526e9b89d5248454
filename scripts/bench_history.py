#!/usr/bin/env python3
"""Cost that grows with the work: the carry history after many nights (issue #44 item 3).

Each size is a history of NIGHTS nights x PATCHES patches (default 30, 120 and 365 nights of 300 patches), made of
the records a night appends (`NightRecord`, a `PatchRecord` per patch, a `PullRecord` per Upstream-PR) and
written with kpatch's own writer (`history.to_line`), as a year of nightlies leaves it. Then, per size, in
interleaved rounds:

  report --html   `kpatch report --html DIR --history FILE` (a new process: what a person or CI runs)
  nightly read    what a night does with the history, in process: `read_records` (the check before any step),
                  `append` of one more night (read, then an append or a compacting rewrite), and the dashboard
                  issue's `summarise(read(...))`
  replay          what `nightly --replay` does with the history over as many steps as the size has nights (one
                  night's records a step, from an empty file): the mean seconds of its last tenth of the steps

It prints each median with quartiles, the time per 1,000 records (for the replay: the seconds of its last
steps), and how that moved from the smallest size to the largest (flat is 1.0x: the cost grows with the history,
not faster; a replay step's cost should not grow at all). It asserts no time.

    python3 scripts/bench_history.py [--nights 30,120,365] [--patches 300] [--reps 5] [--dir DIR]
                                     [--kpatch LABEL=SRC ...]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Kpatch, kpatches, paired, spread

EPOCH = datetime.date(2026, 1, 1)
CLASSES = ("clean",) * 8 + ("three-way", "three-way", "conflict", "upstream")


def make_history(path: Path, nights: int, patches: int) -> int:
    """A history of `nights` nights x `patches` patches, written with kpatch's writer; returns its records."""
    from kpatch.dashboard import history as h

    lines: list[str] = []
    for night in range(nights):
        day = EPOCH + datetime.timedelta(days=night)
        date, started = day.isoformat(), f"{day.isoformat()}T02:00:00Z"
        lines.append(h.to_line(h.NightRecord(
            date=date, started=started, outcome="passed" if night % 9 else "failed", summary=f"night {night}",
            behind=(h.Behind("vllm", "main", 20 + night % 40, f"{night:040x}"),
                    h.Behind("kernels", "main", night % 7, f"{night + 1:040x}")),
            stages=tuple(h.StageLine(stage, "passed", 1.5, f"{stage} done") for stage in
                         ("fetch", "rebase", "build", "verify", "test", "report")),
            suites=(h.SuiteLine("vllm", "passed", 1200, 0, 0, 14, ""),))))
        for index in range(patches):
            klass = CLASSES[(index + night) % len(CLASSES)]
            upstream = "vllm" if index % 3 else "kernels"
            prs = (f"vllm-project/{upstream}#{1000 + index}",) if index % 5 == 0 else ()
            conflict = klass == "conflict"
            lines.append(h.to_line(h.PatchRecord(
                date=date, started=started, upstream=upstream, behind=20 + night % 40,
                patch=f"{index + 1:04d}-fix-the-op-number-{index}.patch", subject=f"Fix the op number {index}",
                klass=klass, conflict=conflict, culprit=f"{night:040x}" if conflict else None,
                culprit_subject="Move the op" if conflict else None, lines=10 + index % 200, files=1 + index % 4,
                age_days=night + index % 30, prs=prs, pr_state="not merged" if prs else None,
                tests="passed", change="unchanged" if index % 4 else "changed")))
            lines.extend(h.to_line(h.PullRecord(date=date, started=started, pr=pr, upstream=upstream,
                                                patch=f"{index + 1:04d}-fix-the-op-number-{index}.patch",
                                                state="open, checks green")) for pr in prs)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)


def nightly_read(path: Path, kp: Kpatch) -> float:
    """A night's three reads of the history (in a process of its own, timed inside it), on a copy."""
    script = """
import shutil, sys, time
from pathlib import Path
import kpatch
assert kpatch.__file__.startswith(sys.argv[2]), kpatch.__file__
from kpatch.dashboard import history
from kpatch.dashboard.summary import summarise
copy = Path(sys.argv[1]).with_suffix(".night")
shutil.copyfile(sys.argv[1], copy)
old = history.read_records(copy)
last = [r for r in old if r.date == old[-1].date]
new = [type(r)(**{**r.__dict__, "date": "2099-01-01"}) for r in last]
started = time.perf_counter()
history.read_records(copy)
history.append(copy, new)
summarise(history.read(copy), str(copy))
print(time.perf_counter() - started)
"""
    done = subprocess.run([sys.executable, "-c", script, str(path), str(kp.source)], cwd=path.parent,  # no checkout
                          env=kp.env(), capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


def replay_steps(path: Path, kp: Kpatch) -> float:
    """What `nightly --replay` does with the history over as many steps as `path` has nights: one step's records
    (a night and its patches) added per step, from an empty file; the mean seconds of the last tenth of the steps
    (timed inside a process of its own). Flat from the smallest size to the largest: a step costs its own records,
    not the steps before it (`history.append` reads only the file's last days)."""
    script = """
import sys, time
from pathlib import Path
import kpatch
assert kpatch.__file__.startswith(sys.argv[2]), kpatch.__file__
from kpatch.dashboard import history
records = history.read_records(Path(sys.argv[1]))
steps = {}
for record in records:
    steps.setdefault(record.date, []).append(record)
out = Path(sys.argv[1]).with_suffix(".replay")
out.unlink(missing_ok=True)
took = []
for step in steps.values():
    started = time.perf_counter()
    history.append(out, step)
    took.append(time.perf_counter() - started)
last = took[-max(1, len(took) // 10):]
print(sum(last) / len(last))
"""
    done = subprocess.run([sys.executable, "-c", script, str(path), str(kp.source)], cwd=path.parent,
                          env=kp.env(), capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


def report_html(path: Path, out: Path, kp: Kpatch) -> float:
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    subprocess.run(kp.command("report", "--html", str(out), "--history", str(path)), cwd=path.parent, env=kp.env(),
                   capture_output=True, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", default="30,120,365")
    parser.add_argument("--patches", type=int, default=300)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", type=Path, help="work folder, kept (default: a temp dir, removed)")
    parser.add_argument("--kpatch", action="append", default=[], metavar="LABEL=SRC",
                        help="a kpatch source tree to time (repeatable; default: this checkout)")
    args = parser.parse_args()
    root = (args.dir or Path(tempfile.mkdtemp(prefix="kpatch-bench-history-"))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    sizes = [int(n) for n in args.nights.split(",")]
    try:
        kps = kpatches(args.kpatch)
        sys.path.insert(0, str(kps[0].source))
        records: dict[int, int] = {}
        cases: dict[str, Callable[[], float]] = {}
        for nights in sizes:
            path = root / f"history-{nights}.jsonl"
            records[nights] = make_history(path, nights, args.patches)
            print(f"{nights} nights x {args.patches} patches: {records[nights]:,} records, "
                  f"{path.stat().st_size / 2**20:.1f} MiB")
            for kp in kps:
                cases[f"report --html, {nights} nights ({kp.label})"] = \
                    functools.partial(report_html, path, root / f"page-{nights}-{kp.label}", kp)
                cases[f"nightly read, {nights} nights ({kp.label})"] = functools.partial(nightly_read, path, kp)
                cases[f"replay's last steps, {nights} steps ({kp.label})"] = functools.partial(replay_steps, path, kp)
        times = paired(cases, args.reps)
        print(f"\n{args.reps} interleaved rounds; seconds: median [quartiles]; per 1,000 records: the median's")
        for kp in kps:
            for what in ("report --html", "nightly read"):
                per = []
                for nights in sizes:
                    values = times[f"{what}, {nights} nights ({kp.label})"]
                    per.append(sorted(values)[len(values) // 2] / records[nights] * 1000)
                    print(f"  {what + f', {nights} nights ({kp.label})':<44} {spread(values):>24}   "
                          f"{per[-1]:.4f} s per 1,000 records")
                print(f"  {what} ({kp.label}): per record, {sizes[-1]} nights against {sizes[0]}: "
                      f"{per[-1] / per[0]:.2f}x (flat: 1.0x)")
            last = [statistics.median(times[f"replay's last steps, {n} steps ({kp.label})"]) for n in sizes]
            for nights in sizes:
                label = f"replay's last steps, {nights} steps ({kp.label})"
                print(f"  {label:<44} {spread(times[label]):>24}")
            print(f"  replay's last steps ({kp.label}): {sizes[-1]} steps against {sizes[0]}: "
                  f"{last[-1] / last[0]:.2f}x (flat: 1.0x)")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
