#!/usr/bin/env python3
"""Benchmark on real histories: kpatch against the git (or dpkg) command it stands for, side by side.

Every case is built from real data, runs kpatch and the raw tool in interleaved rounds, checks that both give the
same trees (and classes), and prints medians with quartiles and the ratio kpatch / raw per round:

  rebase   a 150-patch stack of real vllm-xpu-kernels commits (copies of the last 150 commits of its main, on the
           commit before them) rebased onto the commit halfway along it, so 75 are already upstream:
             raw:    git rebase M                    (patch-id skipping; in a worktree at the stack's head)
             kpatch: kpatch rebase --json            (the stack applied, its worktree at it; warm mirror)
           both must end at the tree of the real last commit, kpatch classing 75 upstream and 75 clean.
  import   a fork branch of those 150 commits made a stack (the upstream at the stack's base):
             raw:    git fetch FORK stack && git format-patch BASE..FETCHED
             kpatch: kpatch import kernels --from FORK@stack   (a fresh project, the mirror warm)
           both must give 150 patches with the same patch-ids, in order.
  quilt    Debian's openssh 9.2p1 source package (53 quilt patches) imported and applied:
             raw:    dpkg-source -x openssh_*.dsc
             kpatch: kpatch import openssh --series debian/patches && kpatch apply  (the upstream a git repository
                     of the orig tarball; a fresh project and cache each round: the clone is timed)
           both must give the same tree (debian/ and .pc/ aside).

The data: --kernels, a clone or bare snapshot of vllm-project/vllm-xpu-kernels (default: the one under
/work/.mirror, if there); --debsrc, a folder holding openssh's .dsc, orig tarball and debian tarball (made with a
deb-src line for bookworm main, `apt-get update` and `apt-get source --download-only openssh` in that folder;
--fetch-debsrc runs that `apt-get source` for you). A case whose data is missing is skipped, saying why.

    python3 scripts/bench_real.py [--reps 5] [--only rebase,import,quilt] [--kernels DIR] [--debsrc DIR]
                                  [--fetch-debsrc] [--kpatch LABEL=SRC ...] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rebase import RebaseCase
from benchlib import ENV, Kpatch, Upstream, git, kpatches, paired, ratio, spread, timed, write_project

SNAPSHOT = Path("/work/.mirror/vllm-project+vllm-xpu-kernels/repo")
STACK, UPSTREAM = 150, 75
Case = tuple[str, Callable[[], float], dict[str, Callable[[], float]]]  # raw label, raw, kpatch label -> run


def rows(title: str, raw_label: str, times: dict[str, list[float]], labels: dict[str, str]) -> None:
    print(f"\n{title}")
    print(f"  {raw_label:<44} {spread(times[raw_label]):>24}")
    for label, key in labels.items():
        print(f"  {label:<44} {spread(times[key]):>24} {ratio(times[key], times[raw_label]):>22}")


# --- the kernels' history ----------------------------------------------------------------------------------------


def kernels_history(snapshot: Path, root: Path) -> tuple[Path, Upstream, str]:
    """A local clone of the snapshot holding: main = the upstream at M (the 75th of the stack's real commits),
    branch `stack` = copies of the last 150 commits of main on their base B (same trees, messages and authors;
    another committer date, so other SHAs). Returns (clone, the Upstream the rebase case reads, the real last
    commit's tree)."""
    repo = root / "kernels"
    facts = root / "kernels.json"
    if facts.is_file() and repo.is_dir():
        raw = json.loads(facts.read_text())
        up = Upstream(repo=repo, v1=raw["base"], v2=raw["upstream"], stack=raw["stack"], classes={})
        return repo, up, raw["tree"]
    shutil.rmtree(repo, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", "--no-checkout", "--single-branch", "--branch", "main", str(snapshot),
                    str(repo)], env=ENV, check=True)
    real = git(repo, "rev-list", "--reverse", "--first-parent", "main").split()
    if len(real) < STACK + 1 or git(repo, "rev-list", "--merges", f"{real[-STACK - 1]}..main").strip():
        sys.exit(f"{snapshot}: main needs {STACK + 1} commits with no merge among the last {STACK}")
    base, tip = real[-STACK - 1], real[-1]
    parent, copies = base, []
    listing = git(repo, "log", "--reverse", "--format=%H%x00%T%x00%an%x00%ae%x00%ad%x00%B%x00", "--date=raw",
                  f"{base}..{tip}").split("\0")
    for at in range(0, len(listing) - 5, 6):
        _sha, tree, name, email, date, message = listing[at:at + 6]
        env = {**ENV, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date,
               "GIT_COMMITTER_DATE": "1800000000 +0000"}
        parent = subprocess.run(["git", "commit-tree", tree, "-p", parent, "-F", "-"], cwd=repo, env=env,
                                input=message.lstrip("\n"), capture_output=True, text=True, check=True).stdout.strip()
        copies.append(parent)
    upstream = real[-STACK - 1 + UPSTREAM]
    git(repo, "update-ref", "refs/heads/stack", copies[-1])
    git(repo, "update-ref", "refs/heads/main", upstream)
    git(repo, "symbolic-ref", "HEAD", "refs/heads/main")
    last_tree = git(repo, "rev-parse", f"{tip}^{{tree}}").strip()
    facts.write_text(json.dumps({"base": base, "upstream": upstream, "stack": copies, "tree": last_tree}))
    return repo, Upstream(repo=repo, v1=base, v2=upstream, stack=copies, classes={}), last_tree


def rebase_case(kps: list[Kpatch], root: Path, snapshot: Path) -> Case:
    repo, up, last_tree = kernels_history(snapshot, root)
    print(f"rebase: {STACK} real commits {up.v1[:12]}..{up.stack[-1][:12]} (copies) onto {up.v2[:12]}, "
          f"the {UPSTREAM}th of them upstream")
    raw_tree = root / "raw-rebase"
    shutil.rmtree(raw_tree, ignore_errors=True)
    git(repo, "worktree", "prune")
    git(repo, "worktree", "add", "-q", "--detach", str(raw_tree), up.stack[-1])

    def raw() -> float:
        git(raw_tree, "checkout", "-q", "--detach", up.stack[-1])
        took = timed(["git", "rebase", "--quiet", up.v2], raw_tree)
        kept = int(git(raw_tree, "rev-list", "--count", f"{up.v2}..HEAD"))
        assert kept == STACK - UPSTREAM, f"git rebase kept {kept} commits"
        assert git(raw_tree, "rev-parse", "HEAD^{tree}").strip() == last_tree, "git rebase: another tree"
        return took

    runs: dict[str, Callable[[], float]] = {}
    for kp in kps:
        project = root / f"rebase-{kp.label}"
        for old in (project, root / f"rebase-{kp.label}-saved", root / f"cache-{kp.label}"):
            shutil.rmtree(old, ignore_errors=True)
        write_project(project, up, len(up.stack))
        case = RebaseCase(kp, project, root / f"cache-{kp.label}")
        found = case.classes()
        tree = git(case.tree, "rev-parse", "HEAD^{tree}").strip()
        print(f"  {kp.label}: classes " + ", ".join(f"{n} {k}" for k, n in sorted(found.items())) +
              f"; tree {'the same as git' if tree == last_tree else 'DIFFERENT from git: ' + tree}")
        if found != Counter({"upstream": UPSTREAM, "clean": STACK - UPSTREAM}) or tree != last_tree:
            sys.exit(f"{kp.label}: kpatch rebase does not give git's result")
        runs[kp.label] = case.time
    return "git rebase M", raw, runs


# --- import of the fork branch -----------------------------------------------------------------------------------


def import_case(kps: list[Kpatch], root: Path, snapshot: Path) -> Case:
    fork, up, _ = kernels_history(snapshot, root)
    upstream = root / "import-upstream"  # the upstream as the import sees it: main at the stack's base
    if not upstream.is_dir():
        subprocess.run(["git", "clone", "-q", "--bare", "--no-local", "--single-branch", "--branch", "main",
                        str(fork), str(upstream)], env=ENV, check=True)
        git(upstream, "update-ref", "refs/heads/main", up.v1)
        git(upstream, "gc", "-q", "--prune=now")
    print(f"import: branch `stack` of {fork} ({STACK} commits), the upstream at its base {up.v1[:12]}")
    raw_repo = root / "raw-import"
    out = root / "raw-import-patches"
    if not raw_repo.is_dir():
        subprocess.run(["git", "clone", "-q", str(upstream), str(raw_repo)], env=ENV, check=True)
    fetched = "refs/fork/stack"

    def raw() -> float:
        shutil.rmtree(out, ignore_errors=True)
        git(raw_repo, "update-ref", "-d", fetched)
        took = timed(["sh", "-c", 'git fetch -q --no-tags "$1" "+refs/heads/stack:$2" && '
                      'git format-patch -q --zero-commit -N --full-index -o "$3" "$4..$2"', "-",
                      str(fork), fetched, str(out), up.v1], raw_repo)
        return took

    raw()
    wanted = ids(raw_repo, sorted(out.glob("*.patch")))
    assert len(wanted) == STACK, f"format-patch wrote {len(wanted)} patches"
    runs: dict[str, Callable[[], float]] = {}
    for kp in kps:
        saved, cache = root / f"import-{kp.label}-saved", root / f"import-cache-{kp.label}"
        project = root / f"import-{kp.label}"
        for old in (saved, cache):
            shutil.rmtree(old, ignore_errors=True)
        empty_project(saved, "kernels", upstream, up.v1)

        def run(kp: Kpatch = kp, project: Path = project, saved: Path = saved, cache: Path = cache) -> float:
            shutil.rmtree(project, ignore_errors=True)
            shutil.copytree(saved, project)
            return timed(kp.command("import", "kernels", "--from", f"{fork}@stack", "--json", "--cache-dir",
                                    str(cache)), project, kp.env())

        kp.run(saved, "status", "--cache-dir", str(cache))  # the mirror, as an import finds it after init
        run()
        series = (project / "patches" / "kernels" / "series").read_text().split()
        got = ids(raw_repo, [project / "patches" / "kernels" / name for name in series])
        same = got == wanted
        print(f"  {kp.label}: {len(got)} patches, patch-ids {'the same as' if same else 'DIFFERENT from'} "
              "format-patch's, in order")
        if not same:
            sys.exit(f"{kp.label}: kpatch import does not give format-patch's patches")
        runs[kp.label] = run
    return "git fetch + format-patch", raw, runs


def ids(repo: Path, files: list[Path]) -> list[str]:
    """The stable patch-id of each file, in order."""
    out = []
    for path in files:
        text = subprocess.run(["git", "patch-id", "--stable"], cwd=repo, env=ENV, input=path.read_bytes(),
                              capture_output=True, check=True).stdout.decode()
        out.append(text.split()[0] if text.split() else "")
    return out


def empty_project(root: Path, name: str, url: Path, base: str) -> None:
    """A kpatch project whose one stack (`name`) is empty, on `base` of the upstream at `url`."""
    (root / "patches" / name).mkdir(parents=True)
    (root / "patches" / name / "series").write_text("")
    (root / "kpatch.toml").write_text(
        f'version = 1\n\n[[upstream]]\nname = "{name}"\nurl = "{url}"\nbranch = "main"\n'
        f'base = "{base}"\npatches = "patches/{name}"\nrequires = []\n')


# --- Debian's quilt series -----------------------------------------------------------------------------------------


def quilt_case(kps: list[Kpatch], root: Path, debsrc: Path) -> Case:
    (dsc,) = sorted(debsrc.glob("openssh_*.dsc"))
    orig = next(p for p in debsrc.glob("openssh_*.orig.tar.*") if not p.name.endswith(".asc"))
    debian = next(p for p in debsrc.glob("openssh_*.debian.tar.*") if not p.name.endswith(".asc"))
    upstream = root / "openssh-upstream"
    patches = root / "openssh-debian"
    if not (upstream / "HEAD").is_file():
        shutil.rmtree(upstream, ignore_errors=True)
        tree = root / "openssh-orig"
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir()
        with tarfile.open(orig) as tar:
            tar.extractall(tree, filter="data")
        (top,) = tree.iterdir()
        git(top, "init", "-q", "-b", "main")
        git(top, "add", "--all", "--force")
        git(top, "commit", "-q", "-m", f"openssh {orig.name}")
        subprocess.run(["git", "clone", "-q", "--bare", str(top), str(upstream)], env=ENV, check=True)
        shutil.rmtree(tree)
        shutil.rmtree(patches, ignore_errors=True)
        patches.mkdir()
        with tarfile.open(debian) as tar:
            tar.extractall(patches, filter="data")
    series = patches / "debian" / "patches"
    count = len([line for line in (series / "series").read_text().splitlines() if line.strip()
                 and not line.startswith("#")])
    base = git(upstream, "rev-parse", "main").strip()
    print(f"quilt: {dsc.name}, {count} patches in its series")
    out = root / "raw-dpkg"

    def raw() -> float:
        shutil.rmtree(out, ignore_errors=True)
        return timed(["dpkg-source", "--no-check", "-x", str(dsc), str(out)], root)

    raw()
    wanted = tree_of(out)
    runs: dict[str, Callable[[], float]] = {}
    for kp in kps:
        saved, cache = root / f"quilt-{kp.label}-saved", root / f"quilt-cache-{kp.label}"
        project = root / f"quilt-{kp.label}"
        shutil.rmtree(saved, ignore_errors=True)
        empty_project(saved, "openssh", upstream, base)

        def run(kp: Kpatch = kp, project: Path = project, saved: Path = saved, cache: Path = cache) -> float:
            shutil.rmtree(project, ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
            shutil.copytree(saved, project)
            command = ["sh", "-c", 'series=$1 cache=$2 && shift 2 && "$@" import openssh --series "$series" '
                       '--author "Debian <debian@example.invalid>" --json --cache-dir "$cache" >/dev/null && '
                       '"$@" apply --json --cache-dir "$cache" >/dev/null', "-", str(series), str(cache),
                       *kp.command()]
            return timed(command, project, kp.env())

        run()
        got = git(project / "work" / "openssh", "rev-parse", "HEAD^{tree}").strip()
        written = len(list((project / "patches" / "openssh").glob("*.patch")))
        print(f"  {kp.label}: {written} patches written; tree "
              f"{'the same as dpkg-source' if got == wanted else 'DIFFERENT from dpkg-source: ' + got}")
        if got != wanted:
            sys.exit(f"{kp.label}: kpatch import + apply does not give dpkg-source's tree")
        runs[kp.label] = run
    return "dpkg-source -x", raw, runs


def tree_of(folder: Path) -> str:
    """The git tree of a folder's files, debian/ and .pc/ aside (what dpkg-source adds to the patched tree)."""
    with tempfile.TemporaryDirectory() as scratch:
        env = {**ENV, "GIT_DIR": str(Path(scratch) / "git"), "GIT_WORK_TREE": str(folder),
               "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        subprocess.run(["git", "init", "-q"], env=env, check=True, capture_output=True)
        subprocess.run(["git", "add", "--all", "--force", "--", ".", ":(exclude)debian", ":(exclude).pc"],
                       cwd=folder, env=env, check=True)
        return subprocess.run(["git", "write-tree"], env=env, check=True, capture_output=True,
                              text=True).stdout.strip()


def fetch_debsrc(folder: Path) -> None:
    """apt-get source --download-only openssh into `folder` (needs a deb-src line and `apt-get update`)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["apt-get", "source", "--download-only", "openssh"], cwd=folder, capture_output=True,
                          text=True)
    if done.returncode != 0:
        print(f"apt-get source openssh failed: {done.stderr.strip().splitlines()[-1:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="work folder, kept (default: a new temp dir, removed afterwards)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--only", default="rebase,import,quilt", help="the cases, comma-separated")
    parser.add_argument("--kernels", type=Path, default=SNAPSHOT, help="a clone or snapshot of vllm-xpu-kernels")
    parser.add_argument("--debsrc", type=Path, help="a folder with openssh's .dsc and tarballs")
    parser.add_argument("--fetch-debsrc", action="store_true", help="apt-get source openssh into --debsrc first")
    parser.add_argument("--kpatch", action="append", default=[], metavar="LABEL=SRC",
                        help="a kpatch source tree to time (repeatable; default: this checkout)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    root = (args.dir or Path(tempfile.mkdtemp(prefix="kpatch-bench-real-"))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    debsrc = (args.debsrc or root / "debsrc").resolve()
    if args.fetch_debsrc:
        fetch_debsrc(debsrc)
    try:
        kps = kpatches(args.kpatch)
        cases: dict[str, Case] = {}
        has_kernels = (args.kernels / "HEAD").is_file() or (args.kernels / ".git").exists()
        for name, build in (("rebase", rebase_case), ("import", import_case)):
            if name not in only:
                continue
            if not has_kernels:
                print(f"{name}: skipped: no vllm-xpu-kernels history at {args.kernels} (give --kernels DIR)")
                continue
            cases[name] = build(kps, root, args.kernels.resolve())
        if "quilt" in only:
            if not list(debsrc.glob("openssh_*.dsc")):
                print(f"quilt: skipped: no openssh_*.dsc in {debsrc} (give --debsrc DIR, or --fetch-debsrc with a "
                      "deb-src line for bookworm main and `apt-get update` done)")
            elif shutil.which("dpkg-source") is None:
                print("quilt: skipped: no dpkg-source on PATH (Debian's dpkg-dev)")
            else:
                cases["quilt"] = quilt_case(kps, root, debsrc)
        timed_cases: dict[str, Callable[[], float]] = {}
        for name, (raw_label, raw, runs) in cases.items():
            timed_cases[f"{name}: {raw_label}"] = raw
            timed_cases.update({f"{name}: {label}": run for label, run in runs.items()})
        times = paired(timed_cases, args.reps)
        print(f"\n{args.reps} interleaved rounds; seconds: median [quartiles]; ratio: kpatch / raw per round, median "
              f"[quartiles]; load average {os.getloadavg()[0]:.1f} at the end")
        titles = {"rebase": f"rebase {STACK} real patches, {UPSTREAM} already upstream",
                  "import": f"import a fork branch of {STACK} real commits",
                  "quilt": "import Debian's openssh quilt series and apply it"}
        for name, (raw_label, _raw, runs) in cases.items():
            rows(titles[name], f"{name}: {raw_label}", times,
                 {f"kpatch ({label})": f"{name}: {label}" for label in runs})
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
