#!/usr/bin/env python3
"""Benchmark: the first fetch of an upstream the size of real vLLM into a blobless mirror against a full one, and
the nightly's rebase afterwards (the cold case: a fresh project at the old base, no worktree, the mirror cached).

The upstream is scripts/benchlib.py's (8.5k files, 150 MB of text, 4.5k commits, a 300-patch stack v1 -> v2),
served by `git daemon` on 127.0.0.1 with uploadpack.allowFilter=true. For each mode, with a fresh cache:
  first fetch:  kpatch's Mirror.fetch of git://127.0.0.1:PORT/upstream (KPATCH_BLOBLESS=1, or 0 for full)
  rebase:       kpatch rebase --json of the 300-patch stack from v1 to v2 (it applies at v1 first, fetching the
                blobs the worktree, merged detection and the culprits need when the mirror is blobless)
It prints seconds and the mirror's size on disk after each step (its packs: what was received).

    python3 scripts/bench_fetch.py [--dir DIR] [--reps 1]
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import ENV, cached_upstream, git, kpatches, timed, upstream_summary, write_project


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_daemon(base: Path) -> tuple[subprocess.Popen[bytes], int]:
    """`git daemon` serving the repositories under `base` (read-only, upload-pack only) on a free port."""
    port = free_port()
    proc = subprocess.Popen(["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}", "--export-all",
                             f"--base-path={base}", str(base)], env=ENV, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("git daemon did not start")


def size_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in (folder / "objects").rglob("*") if f.is_file()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="work folder; the upstream is built once there and reused "
                        "(default: a new temp dir, removed afterwards)")
    parser.add_argument("--reps", type=int, default=1, help="rounds per mode (medians are printed)")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="kpatch-bench-fetch-"))
    work.mkdir(parents=True, exist_ok=True)
    kp = kpatches([])[0]
    up = cached_upstream(work / "upstream")
    git(up.repo, "config", "uploadpack.allowFilter", "true")
    print(upstream_summary(up))
    daemon, port = start_daemon(work)
    url = f"git://127.0.0.1:{port}/upstream"
    results: dict[str, dict[str, list[float]]] = {}
    try:
        for rep in range(args.reps):
            for mode, flag in (("blobless", "1"), ("full", "0")):
                env = {**kp.env(), "KPATCH_BLOBLESS": flag}
                cache = work / f"cache-{mode}"
                shutil.rmtree(cache, ignore_errors=True)
                mirror = cache / "mirrors" / "up.git"
                fetch = [sys.executable, "-c", "import sys; from pathlib import Path; from kpatch.gitx.mirror import "
                         "Mirror; Mirror(Path(sys.argv[1]), 'up').fetch(sys.argv[2])", str(mirror), url]
                fetch_s = timed(fetch, work, env)
                fetch_mb = size_mb(mirror)
                partial = git(mirror, "config", "--get", "remote.upstream.promisor", ) if mode == "blobless" else ""
                root = work / f"project-{mode}"
                shutil.rmtree(root, ignore_errors=True)
                write_project(root, up, len(up.stack))
                toml = root / "kpatch.toml"
                toml.write_text(toml.read_text().replace(f'url = "{up.repo}"', f'url = "{url}"'))
                started = time.perf_counter()
                proc = subprocess.run(kp.command("rebase", "--json", "--cache-dir", str(cache)), cwd=root, env=env,
                                      capture_output=True, text=True)
                rebase_s = time.perf_counter() - started
                if proc.returncode not in (0, 1):
                    sys.exit(f"kpatch rebase ({mode}) failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
                payload = json.loads(proc.stdout)["result"]
                mix = Counter(p["class"] for s in payload["stacks"] for p in s["patches"])
                row = results.setdefault(mode, {})
                for key, value in (("fetch_s", fetch_s), ("fetch_mb", fetch_mb), ("rebase_s", rebase_s),
                                   ("after_mb", size_mb(mirror))):
                    row.setdefault(key, []).append(value)
                print(f"round {rep + 1} {mode:8s} first fetch {fetch_s:6.1f} s {fetch_mb:7.1f} MB   rebase "
                      f"{rebase_s:6.1f} s, mirror then {size_mb(mirror):7.1f} MB   "
                      f"({'promisor ' + partial.strip() if partial else 'full'}; {dict(mix)})", flush=True)
    finally:
        daemon.kill()
        daemon.wait()
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print("\nmedians            first fetch            rebase afterwards      mirror after both")
    for mode, row in results.items():
        med = {k: statistics.median(v) for k, v in row.items()}
        print(f"{mode:18s} {med['fetch_s']:6.1f} s {med['fetch_mb']:7.1f} MB    {med['rebase_s']:6.1f} s"
              f"               {med['after_mb']:7.1f} MB")
    if {"blobless", "full"} <= results.keys():
        b, f = ({k: statistics.median(v) for k, v in results[m].items()} for m in ("blobless", "full"))
        print(f"blobless / full: first fetch {b['fetch_s'] / f['fetch_s']:.2f}x time, "
              f"{b['fetch_mb'] / f['fetch_mb']:.2f}x bytes; fetch + rebase "
              f"{(b['fetch_s'] + b['rebase_s']) / (f['fetch_s'] + f['rebase_s']):.2f}x time")


if __name__ == "__main__":
    main()
