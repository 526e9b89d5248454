#!/usr/bin/env python3
"""Benchmark: kpatch's fixed cost per command, against `python -c pass` and the raw git each command stands for.

On a one-patch project of the upstream of scripts/benchlib.py (the size of real vLLM), applied. Interleaved:
  python -c pass; kpatch --version; kpatch --help; python -c "import kpatch.cli"
  kpatch status --json   vs  the patch-ids of both sides             (raw git)
  kpatch export --check  vs  git format-patch + diff                 (raw git)
  kpatch apply           vs  git checkout --detach v1 && git am -3 --keep-cr
The fixed cost of a command is its median minus its raw git's median minus python -c pass's median: what kpatch
adds on top of starting Python and doing the git work (target: <= 40 ms). The "floor" row is the same figure for
`python -c "import click, dataclasses, json, logging, pathlib, subprocess, tomllib"`: what any click command that
reads TOML, keeps dataclasses, logs, prints JSON and starts git pays before its own code runs. Run it with the
interpreter of a fresh venv (`venv/bin/python scripts/bench_cli.py`) to see what an installed kpatch pays: the
system Python here preloads part of that in its site-packages, which hides it in both figures.

    python3 scripts/bench_cli.py [--reps 21] [--kpatch LABEL=SRC ...] [--dir DIR]
    python3 scripts/bench_cli.py --importtime [--reps 21] [--kpatch LABEL=SRC ...]

--importtime prints, instead, `python -X importtime` of what `kpatch apply` imports (kpatch.cli, the command's
module and the third-party packages), cumulative milliseconds, medians over the rounds.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_status import FORMAT
from benchlib import (
    ENV,
    Kpatch,
    cached_upstream,
    git,
    kpatches,
    paired,
    spread,
    timed,
    upstream_summary,
    write_project,
)

# What any click command that reads a TOML file, keeps its models in dataclasses, logs, prints JSON and starts
# git imports before its own code runs: the floor under every command's fixed cost.
FLOOR = "import click, dataclasses, json, logging, pathlib, subprocess, tomllib"
IMPORTS = ("kpatch.cli", "kpatch.commands.apply", "kpatch.printers", "kpatch.commands._views", "click",
           "rich.console", "git", "packaging", "kpatch.commands.status", "kpatch.commands.export")
_IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)$")


def import_times(kpatches_: list[Kpatch], reps: int) -> None:
    """Cumulative import time (ms) of IMPORTS in `kpatch apply --help`'s interpreter and the command's imports."""
    code = ("import sys; sys.argv = ['kpatch', 'apply', '--help']\n"
            "import kpatch.cli\nimport kpatch.commands.apply, kpatch.commands.status, kpatch.commands.export\n"
            "try:\n    import kpatch.commands._views\nexcept ImportError:  # a kpatch before commands/ held them\n"
            "    import kpatch.printers")
    print(f"{'module (cumulative ms, median of ' + str(reps) + ')':<40}" + "".join(f"{k.label:>10}" for k in kpatches_))
    found: dict[str, dict[str, list[float]]] = {k.label: {} for k in kpatches_}
    for _ in range(reps):
        for kp in kpatches_:
            proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=kp.env(), capture_output=True,
                                  text=True)
            for line in proc.stderr.splitlines():
                match = _IMPORT_LINE.match(line)
                if match and match.group(3) in IMPORTS:
                    found[kp.label].setdefault(match.group(3), []).append(int(match.group(1)) / 1000)
    for name in IMPORTS:
        cells = [statistics.median(found[k.label][name]) if name in found[k.label] else None for k in kpatches_]
        print(f"{name:<40}" + "".join(f"{c:>10.1f}" if c is not None else f"{'-':>10}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="work folder (default: a new temp dir, removed afterwards)")
    parser.add_argument("--reps", type=int, default=21)
    parser.add_argument("--kpatch", action="append", default=[], metavar="LABEL=SRC",
                        help="a kpatch source tree to time (repeatable; default: this checkout)")
    parser.add_argument("--importtime", action="store_true", help="python -X importtime of the command's imports")
    args = parser.parse_args()
    if args.importtime:
        import_times(kpatches(args.kpatch), args.reps)
        return
    root = args.dir or Path(tempfile.mkdtemp(prefix="kpatch-bench-cli-"))
    try:
        up = cached_upstream(root / "upstream")
        print(upstream_summary(up))
        raw_tree = root / "raw-cli"
        shutil.rmtree(raw_tree, ignore_errors=True)
        git(up.repo, "worktree", "prune")
        git(up.repo, "worktree", "add", "-q", "--detach", str(raw_tree), up.v1)
        cases = {"python -c pass": lambda: timed([sys.executable, "-c", "pass"], root),
                 "floor": lambda: timed([sys.executable, "-c", FLOOR], root)}
        commands = {"--version": ("--version",), "--help": ("--help",), "status --json": ("status", "--json"),
                    "export --check": ("export", "--check"), "apply": ("apply",)}
        patches = None
        labels = []
        for kp in kpatches(args.kpatch):
            labels.append(kp.label)
            project = root / f"cli-{kp.label}"
            shutil.rmtree(project, ignore_errors=True)
            patches = write_project(project, up, 1)
            cache = ["--cache-dir", str(root / f"cache-{kp.label}")]
            kp.run(project, "apply", *cache)
            cases[f"import kpatch.cli ({kp.label})"] = (
                lambda kp=kp: timed([sys.executable, "-c", "import kpatch.cli"], root, kp.env()))
            for name, argv in commands.items():
                extra = cache if not name.startswith("--") else []
                cases[f"{name} ({kp.label})"] = (lambda kp=kp, project=project, argv=argv, extra=extra:
                                                 timed(kp.command(*argv, *extra), project, kp.env()))
        assert patches is not None
        am = " ".join(["git am -3 --keep-cr --quiet", *(str(p) for p in sorted(patches.glob("*.patch")))])
        git(raw_tree, "am", "-3", "--keep-cr", "--quiet", *(str(p) for p in sorted(patches.glob("*.patch"))))
        out = root / "raw-cli-export"
        raws = {
            "status --json": f"git log -p --no-color --format='commit %H' {up.v1}..HEAD | git patch-id --verbatim "
                             f">/dev/null && cat {patches}/*.patch | git patch-id --verbatim",
            "export --check": f"rm -rf {out} && git format-patch -q {FORMAT} -o {out} {up.v1}..HEAD && "
                              f"diff -r -x series {out} {patches}",
            "apply": f"git checkout -q --detach {up.v1} && {am}",
        }
        for name, line in raws.items():
            cases[f"raw {name}"] = lambda line=line: timed(["sh", "-c", line], raw_tree, ENV)
        times = paired(cases, args.reps)
        base = statistics.median(times["python -c pass"])
        print(f"{'command':<34} {'median s [quartiles]':>24} {'fixed cost (ms)':>16}")
        print(f"{'python -c pass':<34} {spread(times['python -c pass']):>24}")
        floor = (statistics.median(times["floor"]) - base) * 1000
        print(f"{'floor: click + stdlib (see --help)':<34} {spread(times['floor']):>24} {floor:>16.0f}")
        for name in raws:
            print(f"{'raw git for ' + name:<34} {spread(times[f'raw {name}']):>24}")
        for label in labels:
            for name in ("import kpatch.cli", *commands):
                key = f"{name} ({label})"
                raw = statistics.median(times[f"raw {name}"]) if name in raws else 0.0
                fixed = (statistics.median(times[key]) - raw - base) * 1000
                print(f"{key:<34} {spread(times[key]):>24} {fixed:>16.0f}")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
