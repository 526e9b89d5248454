"""Shared by the scripts/bench_*.py benchmarks: an upstream the size of real vLLM, its patch stack, projects
that point kpatch at it, and paired, interleaved timing with medians and spreads.

The upstream (built with git fast-import, deterministic):
  v1    an import of FILES files (MB of text) plus HISTORY small commits: the stack's base;
  stack 300 patches on v1, each inserting two lines in the middle of a different file;
  main  v1 plus NEW_COMMITS commits (tag v2): churn over other files, and for the stack's patches
        - 60 get an upstream change to a line of their context (so `git am -3` needs its 3-way fallback),
        - 5 are merged verbatim (same change, so they are empty after a 3-way apply: already upstream),
        - 100 of the clean ones get a line added at the top of their file (they still apply, at an offset).
  So a rebase of the stack from v1 to v2 has the mix of real vLLM v0.32.0 -> v0.33.0: 235 clean, 60 three-way,
  5 already upstream.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C",
       "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
       "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid"}
ENV.pop("PYTHONDONTWRITEBYTECODE", None)  # kpatch runs from bytecode, as an installed one does
WORDS = ["tensor", "kernel", "queue", "sycl", "launch", "stride", "token", "head", "cache", "slot", "rope", "block",
         "device", "stream"]
STACK, THREE_WAY, MERGED, OFFSET = 300, 60, 5, 100


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True, text=True).stdout


def _text(rng: random.Random, size: int) -> list[bytes]:
    lines, total = [], 0
    while total < size:
        line = (" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) +
                f"  # {rng.randint(0, 10**9)}\n").encode()
        lines.append(line)
        total += len(line)
    return lines


@dataclass(frozen=True)
class Upstream:
    repo: Path
    v1: str  # the stack's base
    v2: str  # the new upstream head (branch main)
    stack: list[str]  # the stack's commits on v1, oldest first
    classes: dict[int, str]  # patch index -> what a rebase onto v2 should find (clean, three-way, upstream)


def build_upstream(repo: Path, *, files: int = 8500, mb: int = 150, history: int = 3000,
                   new_commits: int = 1500) -> Upstream:
    """The upstream described in the module docstring (about 1-2 minutes on a 2-core machine)."""
    rng = random.Random(42)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    proc = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=repo, stdin=subprocess.PIPE, env=ENV)
    assert proc.stdin is not None
    out = proc.stdin
    when = 1_700_000_000
    per_file = mb * 1024 * 1024 // files
    paths = [f"src/d{i % 300:03d}/module_{i:05d}.py" for i in range(files)]
    contents = {p: _text(rng, per_file) for p in paths}

    def commit(ref: str, message: str, changes: Sequence[str]) -> None:
        nonlocal when
        when += 60
        msg = message.encode()
        out.write(f"commit {ref}\nauthor Bench <bench@example.invalid> {when} +0000\n"
                  f"committer Bench <bench@example.invalid> {when} +0000\n".encode())
        out.write(f"data {len(msg)}\n".encode() + msg + b"\n")
        for path in changes:
            data = b"".join(contents[path])
            out.write(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")

    commit("refs/heads/main", "import", paths)
    logs = [f"docs/changelog_{i:02d}.txt" for i in range(40)]
    for log in logs:
        contents[log] = []
    for i in range(history):
        log = logs[i % len(logs)]
        contents[log] = [*contents[log][-50:], f"entry {i}\n".encode()]
        commit("refs/heads/main", f"upstream change {i}", [log])
    out.write(b"reset refs/tags/v1\nfrom refs/heads/main\n\n")
    # The stack: patch i inserts two lines in the middle of file targets[i].
    targets = [paths[(i * 37) % files] for i in range(STACK)]
    at = {path: len(contents[path]) // 2 for path in targets}
    old = {path: list(contents[path]) for path in targets}
    out.write(b"reset refs/heads/stack\nfrom refs/tags/v1\n\n")
    insert = {}
    for i, path in enumerate(targets):
        insert[i] = [f"fixed_{i} = kernel(queue, stride={i})\n".encode(), b"# keep in sync\n"]
        contents[path][at[path]:at[path]] = insert[i]
        commit("refs/heads/stack", f"Fix {i}: stride of module {path.rsplit('_', 1)[1][:5]}\n\n"
               f"Upstream-Status: pending\n", [path])
    # The new upstream: first the stack's files as v1 had them, then the changes that give the mix.
    for path in targets:
        contents[path] = list(old[path])
    order = list(range(STACK))
    rng.shuffle(order)
    classes = {i: "clean" for i in range(STACK)}
    for i in order[:THREE_WAY]:
        classes[i] = "three-way"
    for i in order[THREE_WAY:THREE_WAY + MERGED]:
        classes[i] = "upstream"
    offsets = set(order[THREE_WAY + MERGED:THREE_WAY + MERGED + OFFSET])

    def special(i: int) -> tuple[str, list[str]]:
        """The upstream commit that gives patch i its class."""
        path, kind = targets[i], classes[i]
        if kind == "three-way":  # the farthest line of the leading context: a 3-way merge takes it cleanly
            contents[path][at[path] - 3] = f"reworded = upstream({i})\n".encode()
            return f"Rework module {i}", [path]
        if kind == "upstream":  # the same change, merged under another message
            contents[path][at[path]:at[path]] = insert[i]
            return f"Merge the stride fix for {i} (#{1000 + i})", [path]
        contents[path].insert(0, f"# header {i}\n".encode())  # still applies, at an offset
        return f"Header for module {i}", [path]

    todo = [i for i in order if classes[i] != "clean" or i in offsets]
    taken = set(targets)
    others = [p for p in paths if p not in taken]
    slots = sorted(rng.sample(range(new_commits), len(todo)))
    for n in range(new_commits):
        if slots and n == slots[0]:
            slots.pop(0)
            message, changed = special(todo.pop(0))
        else:  # churn: a line rewritten in 1-3 files the stack does not touch
            changed = rng.sample(others, rng.randint(1, 3))
            for path in changed:
                lines = contents[path]
                lines[rng.randrange(len(lines))] = f"churn_{n} = refresh(block={n})\n".encode()
            message = f"upstream work {n}"
        commit("refs/heads/main", message, changed)
    out.write(b"reset refs/tags/v2\nfrom refs/heads/main\n\n")
    out.close()
    if proc.wait() != 0:
        sys.exit("fast-import failed")
    git(repo, "repack", "-adq")
    v1, v2 = git(repo, "rev-parse", "v1^{commit}").strip(), git(repo, "rev-parse", "v2^{commit}").strip()
    stack = git(repo, "rev-list", "--reverse", f"{v1}..stack").split()
    return Upstream(repo=repo, v1=v1, v2=v2, stack=stack, classes=classes)


# where --real looks for vllm-0.32.0.tar.gz and vllm-0.33.0.tar.gz
SDISTS = Path(tempfile.gettempdir()) / "rebase-bench" / "sdists"
RELEASES = ("0.32.0", "0.33.0")


def _sdist_files(tarball: Path) -> dict[str, tuple[bytes, bool]]:
    """{path: (bytes, executable)} of a release sdist, its top folder (vllm-X.Y.Z/) stripped."""
    found: dict[str, tuple[bytes, bool]] = {}
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            if not member.isfile() or "/" not in member.name:
                continue
            data = tar.extractfile(member)
            assert data is not None
            found[member.name.split("/", 1)[1]] = (data.read(), bool(member.mode & 0o111))
    return found


def build_real_upstream(repo: Path, sdists: Path = SDISTS) -> Upstream:
    """Real vLLM history from its release sdists: v1 = the v0.32.0 tree, then one commit that makes it the
    v0.33.0 tree (the real release delta), then the commits that give a 300-patch stack on v1 the mix of issue 14
    (60 three-way, 5 already upstream, 100 of the clean ones moved by an added line); tag v2.

    The stack's patches each insert two lines in the middle of a different text file the release delta leaves
    alone (so a patch's class is the one its special commit gives it, as in build_upstream)."""
    tarballs = [sdists / f"vllm-{version}.tar.gz" for version in RELEASES]
    missing = [t.name for t in tarballs if not t.is_file()]
    if missing:
        sys.exit(f"--real: {', '.join(missing)} not in {sdists}: download them first with "
                 f"'pip download --no-deps --no-binary :all: vllm==X' (it installs the sdist's build dependencies to "
                 "read its metadata: the file's link on its PyPI page is quicker) into that folder")
    old, new = (_sdist_files(t) for t in tarballs)
    rng = random.Random(42)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    proc = subprocess.Popen(["git", "fast-import", "--quiet"], cwd=repo, stdin=subprocess.PIPE, env=ENV)
    assert proc.stdin is not None
    out = proc.stdin
    when = 1_700_000_000

    def commit(ref: str, message: str, files: dict[str, tuple[bytes, bool]], *, replace: bool = False) -> None:
        nonlocal when
        when += 60
        msg = message.encode()
        out.write(f"commit {ref}\nauthor Bench <bench@example.invalid> {when} +0000\n"
                  f"committer Bench <bench@example.invalid> {when} +0000\n".encode())
        out.write(f"data {len(msg)}\n".encode() + msg + b"\n")
        if replace:
            out.write(b"deleteall\n")
        for path, (data, executable) in sorted(files.items()):
            mode = "100755" if executable else "100644"
            out.write(f"M {mode} inline {path}\ndata {len(data)}\n".encode() + data + b"\n")

    commit("refs/heads/main", f"vLLM v{RELEASES[0]} (its sdist)", old)
    out.write(b"reset refs/tags/v1\nfrom refs/heads/main\n\n")

    def lines_of(data: bytes) -> list[bytes] | None:
        """The file's lines when a patch in its middle has context found nowhere else in it: `git apply` would
        otherwise take a three-way patch's hunk at another place that matches (am's answer, not the mix's)."""
        if b"\0" in data or b"\r" in data or not data.endswith(b"\n"):
            return None
        lines = data.splitlines(keepends=True)
        middle = len(lines) // 2
        context = lines[middle - 3:middle + 3]
        if len(lines) < 40 or any(lines.count(line) > 1 or not line.strip() for line in context):
            return None
        return lines

    candidates = sorted(p for p, (data, _) in old.items() if p.endswith(".py") and new.get(p) == old[p]
                        and lines_of(data) is not None)
    targets = rng.sample(candidates, STACK)
    contents = {p: lines_of(old[p][0]) or [] for p in targets}
    at = {p: len(contents[p]) // 2 for p in targets}
    insert = {i: [f"fixed_{i} = kernel(queue, stride={i})\n".encode(), b"# keep in sync\n"]
              for i in range(STACK)}
    out.write(b"reset refs/heads/stack\nfrom refs/tags/v1\n\n")
    for i, path in enumerate(targets):
        lines = list(contents[path])
        lines[at[path]:at[path]] = insert[i]
        commit("refs/heads/stack", f"Fix {i}: stride in {path.rsplit('/', 1)[1]}\n\nUpstream-Status: pending\n",
               {path: (b"".join(lines), old[path][1])})
    commit("refs/heads/main", f"vLLM v{RELEASES[1]} (its sdist)", new, replace=True)
    order = list(range(STACK))
    rng.shuffle(order)
    classes = {i: "clean" for i in range(STACK)}
    for i in order[:THREE_WAY]:
        classes[i] = "three-way"
    for i in order[THREE_WAY:THREE_WAY + MERGED]:
        classes[i] = "upstream"
    for i in order[:THREE_WAY + MERGED + OFFSET]:
        path, kind, lines = targets[i], classes[i], contents[targets[i]]
        if kind == "three-way":  # the farthest line of the leading context: a 3-way merge takes it cleanly
            lines[at[path] - 3] = f"reworded = upstream({i})\n".encode()
            message = f"Rework {path}"
        elif kind == "upstream":
            lines[at[path]:at[path]] = insert[i]
            message = f"Merge the stride fix for {i} (#{1000 + i})"
        else:
            lines.insert(0, f"# header {i}\n".encode())
            message = f"Header for {path}"
        commit("refs/heads/main", message, {path: (b"".join(lines), old[path][1])})
    out.write(b"reset refs/tags/v2\nfrom refs/heads/main\n\n")
    out.close()
    if proc.wait() != 0:
        sys.exit("fast-import failed")
    git(repo, "repack", "-adq")
    v1, v2 = git(repo, "rev-parse", "v1^{commit}").strip(), git(repo, "rev-parse", "v2^{commit}").strip()
    stack = git(repo, "rev-list", "--reverse", f"{v1}..stack").split()
    return Upstream(repo=repo, v1=v1, v2=v2, stack=stack, classes=classes)


def cached_upstream(repo: Path, *, real: Path | None = None) -> Upstream:
    """The benchmark upstream at `repo`: built once (from the vLLM sdists in `real`, else generated), then
    reused (its facts kept next to it)."""
    facts = repo.parent / ("bench-upstream.json" if repo.name == "upstream" else f"bench-{repo.name}.json")
    if facts.is_file() and repo.is_dir():
        raw = json.loads(facts.read_text())
        return Upstream(repo=repo, v1=raw["v1"], v2=raw["v2"], stack=raw["stack"],
                        classes={int(k): v for k, v in raw["classes"].items()})
    shutil.rmtree(repo, ignore_errors=True)
    started = time.perf_counter()
    up = build_real_upstream(repo, real) if real else build_upstream(repo)
    print(f"built the upstream in {time.perf_counter() - started:.0f} s")
    facts.write_text(json.dumps({"v1": up.v1, "v2": up.v2, "stack": up.stack, "classes": up.classes}))
    return up


def upstream_summary(up: Upstream) -> str:
    size = sum(f.stat().st_size for f in (up.repo / ".git").rglob("*") if f.is_file()) / 2**20
    files = len(git(up.repo, "ls-tree", "-r", "--name-only", "v1").splitlines())
    commits = int(git(up.repo, "rev-list", "--count", "main"))
    mix = {k: sum(1 for c in up.classes.values() if c == k) for k in ("clean", "three-way", "upstream")}
    return (f"upstream: {files} files, {commits} commits ({commits - int(git(up.repo, 'rev-list', '--count', 'v1'))}"
            f" after the stack's base), .git {size:.0f} MB; stack of {len(up.stack)}: "
            + ", ".join(f"{n} {k}" for k, n in mix.items()))


def write_project(root: Path, up: Upstream, count: int) -> Path:
    """A kpatch project whose one stack ("up") holds the first `count` patches of the stack, on v1."""
    patches = root / "patches" / "up"
    patches.mkdir(parents=True)
    if count:
        git(up.repo, "format-patch", "-q", "--zero-commit", "--no-signature", "-N", "--full-index", "--stat=72",
            "-o", str(patches), f"{up.v1}..{up.stack[count - 1]}")
    names = sorted(p.name for p in patches.glob("*.patch"))
    (patches / "series").write_text("".join(f"{name}\n" for name in names))
    (root / "kpatch.toml").write_text(
        f'version = 1\n\n[[upstream]]\nname = "up"\nurl = "{up.repo}"\nbranch = "main"\n'
        f'base = "{up.v1}"\npatches = "patches/up"\nrequires = []\n')
    return patches


@dataclass(frozen=True)
class Kpatch:
    """One kpatch to time: a label and the source tree it runs from (PYTHONPATH)."""

    label: str
    source: Path

    def compile(self) -> None:
        """Write the bytecode once (pip does at install), so no timed run compiles kpatch's sources."""
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(self.source / "kpatch")], env=ENV, check=True)

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "kpatch", *args]

    def env(self) -> dict[str, str]:
        return {**ENV, "PYTHONPATH": str(self.source), "KPATCH_GITHUB_API": "http://127.0.0.1:9"}

    def run(self, cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(self.command(*args), cwd=cwd, env=self.env(), capture_output=True, text=True)
        if check and proc.returncode != 0:
            sys.exit(f"{self.label}: kpatch {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
        return proc


def kpatches(values: Sequence[str]) -> list[Kpatch]:
    """`--kpatch LABEL=DIR` options (default: this checkout, labelled kpatch)."""
    found = []
    for value in values:
        label, _, folder = value.partition("=")
        found.append(Kpatch(label, Path(folder).resolve()) if folder else Kpatch(Path(label).name, Path(label)))
    for kp in found or [Kpatch("kpatch", ROOT)]:
        kp.compile()
    return found or [Kpatch("kpatch", ROOT)]


def timed(command: Sequence[str], cwd: Path, env: dict[str, str] | None = None, *, ok: Sequence[int] = (0,)) -> float:
    started = time.perf_counter()
    proc = subprocess.run(list(command), cwd=cwd, env=env or ENV, capture_output=True)
    took = time.perf_counter() - started
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr.decode()[-2000:]}")
    return took


def paired(cases: dict[str, Callable[[], float]], reps: int) -> dict[str, list[float]]:
    """Run every case once per round, rounds interleaved (order rotated), so drift hits all cases alike."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for rep in range(reps):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            times[name].append(cases[name]())
    return times


def spread(values: Sequence[float]) -> str:
    """median [lowest-highest quartile] as text, in seconds."""
    if len(values) < 4:
        return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):.3f} [{q[0]:.3f}-{q[2]:.3f}]"


def ratio(tool: Sequence[float], raw: Sequence[float]) -> str:
    """The median of the per-round ratios tool/raw, with their quartiles."""
    ratios = [t / r for t, r in zip(tool, raw, strict=True)]
    if len(ratios) < 4:
        return f"{statistics.median(ratios):.2f}x"
    q = statistics.quantiles(ratios, n=4)
    return f"{statistics.median(ratios):.2f}x [{q[0]:.2f}-{q[2]:.2f}]"
