"""Kill kpatch (SIGKILL to its pid only) at random moments, recover with --continue or --abort, check the result.

Shared by tests/git/test_kills*.py and scripts/bench_kills.py, so the figure in the README and the CI test measure
the same thing. Every kpatch here is a real process (`python -m kpatch`); git dies with it (parent-death
signal), which the checks verify: no git left running, no git lock file, no git operation in progress.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.cli import KPATCH
from tests.support.gitrepos import mirror_dir

RECOVERIES = ("continue", "abort")  # alternating after kills inside an operation, from a random first one


def isolated_env(home: Path) -> dict[str, str]:
    """The environment of every kpatch started here: no real home, cache, GitHub or network."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KPATCH_", "GITHUB_", "GIT_")) and k not in ("PYTEST_CURRENT_TEST",)}
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[user]\n\tname = Test User\n\temail = test@example.invalid\n")
    return {**env, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "GIT_CONFIG_GLOBAL":
            str(home / ".gitconfig"), "KPATCH_GITHUB_API": "http://127.0.0.1:9", "KPATCH_FETCH_RETRY_DELAY": "0"}


@dataclass
class Runner:
    """kpatch as a separate process in one project, with its own cache folder."""

    root: Path
    cache: Path
    env: dict[str, str]

    def args(self, *args: str) -> list[str]:
        return [*KPATCH, *args, "--cache-dir", str(self.cache)]

    def run(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.args(*args), cwd=self.root, env={**self.env, **(env or {})}, capture_output=True,
                              text=True, timeout=600)

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(self.args(*args), cwd=self.root, env={**self.env, **(env or {})},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)

    @staticmethod
    def head(tree: Path) -> str | None:
        return git_state(tree)[0]

    def status(self) -> tuple[dict[str, object] | None, str]:
        """`kpatch status --json` as data (None and its stderr when it failed)."""
        proc = self.run("status", "--json")
        if proc.returncode != 0:
            return None, proc.stderr.strip()
        return json.loads(proc.stdout)["result"], ""


def tracked_files(root: Path) -> dict[str, str]:
    """sha256 of kpatch.toml and of every file under patches/ (what no kill may change half-way)."""
    files = {"kpatch.toml": hashlib.sha256((root / "kpatch.toml").read_bytes()).hexdigest()}
    for path in sorted((root / "patches").rglob("*")):
        if path.is_file():
            files[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return files


def git_lock_files(folders: Iterable[Path]) -> list[Path]:
    """git lock files (`*.lock`) anywhere in these repositories (mirrors, worktrees' git folders)."""
    found: list[Path] = []
    for folder in folders:
        if folder.exists():
            found += [p for p in folder.rglob("*.lock") if p.is_file()]
    return found


def processes_under(folders: Iterable[Path]) -> list[str]:
    """Live processes whose working folder is inside one of `folders` (this process and its children aside:
    in-process kpatch runs keep GitPython's `git cat-file --batch-check` helpers open)."""
    roots = [str(f.resolve()) for f in folders]
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cwd = str((entry / "cwd").readlink())
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            state, ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):
            continue
        if state == "Z" or os.getpid() in (int(entry.name), int(ppid)):
            continue
        if any(cwd == r or cwd.startswith(r + "/") for r in roots):
            found.append(f"{entry.name}: {cmdline[:120]}")
    return found


def wait_for_no_processes(folders: Iterable[Path], timeout: float = 5.0) -> list[str]:
    """Wait (a little) for processes killed with their parent to be gone; return any that are left."""
    folders = list(folders)
    deadline = time.monotonic() + timeout
    while True:
        left = processes_under(folders)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


def kpatch_lock_busy(paths: Iterable[Path]) -> list[Path]:
    """kpatch's own writer locks that some process still holds."""
    busy = []
    for path in paths:
        if not path.exists():
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            busy.append(path)
        finally:
            os.close(fd)
    return busy


def git_state(tree: Path) -> tuple[str | None, str, bool]:
    """(HEAD, `git status --porcelain` including untracked files, a git operation in progress) of a worktree."""
    if not tree.exists():
        return None, "", False
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_OPTIONAL_LOCKS": "0"}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tree, env=env, capture_output=True, text=True).stdout

    head = git("rev-parse", "HEAD").strip() or None
    status = git("status", "--porcelain", "--untracked-files=all", "--ignore-submodules")
    git_dir = Path(git("rev-parse", "--absolute-git-dir").strip() or tree / ".git")
    busy = any((git_dir / m).exists() for m in ("rebase-apply", "rebase-merge", "MERGE_HEAD", "CHERRY_PICK_HEAD"))
    return head, status, busy


@dataclass
class Cycle:
    """One kill and what followed it."""

    number: int
    delay: float  # seconds after the start of the command (a fraction of the rest, killing inside the operation)
    inside: bool  # an operation (or a journal) was in progress after the kill
    recovery: str  # "continue", "abort" or "none"
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return not self.problems


@dataclass
class KillRun:
    cycles: list[Cycle] = field(default_factory=list)
    finished_before_kill: int = 0  # draws that came after the command had ended (not kills; drawn again)

    @property
    def inside(self) -> list[Cycle]:
        return [c for c in self.cycles if c.inside]

    @property
    def outside(self) -> list[Cycle]:
        return [c for c in self.cycles if not c.inside]

    def summary(self, what: str) -> str:
        inside, outside = self.inside, self.outside
        by = {r: [c for c in inside if c.recovery == r] for r in ("continue", "abort")}
        return (f"{what}: {sum(c.clean for c in inside)}/{len(inside)} kills inside the operation ended clean "
                f"({sum(c.clean for c in by['continue'])}/{len(by['continue'])} --continue, "
                f"{sum(c.clean for c in by['abort'])}/{len(by['abort'])} --abort); "
                f"{sum(c.clean for c in outside)}/{len(outside)} kills outside it (before the operation was "
                f"recorded or after it ended) changed nothing half-way; "
                f"{self.finished_before_kill} draws came after the command had ended")

    def problems(self) -> list[str]:
        return [f"kill {c.number} (at {c.delay:.2f}s, {c.recovery}): {p}" for c in self.cycles for p in c.problems]


def kill_once(runner: Runner, args: list[str], delay: float, env: dict[str, str] | None = None,
              watch: Iterable[Path] = (), *, after: str | None = None, length: float = 0.0) -> tuple[bool, list[str]]:
    """Start kpatch, SIGKILL its pid (only) after `delay` s; (killed, git processes that outlived it).

    With `after` (an operation), `delay` is a fraction (0..1) of the way from the moment the run state records
    that operation to the end of a clean run of `length` s: kills only where the command writes.
    """
    started = time.monotonic()
    proc = runner.start(*args, env=env)
    if after is not None:
        while in_progress(runner.root) != after:
            if proc.poll() is not None:
                return False, []
            time.sleep(0.005)
        delay *= max(0.05, length - (time.monotonic() - started))
    try:
        proc.wait(timeout=delay)
        return False, []
    except subprocess.TimeoutExpired:
        pass
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return True, wait_for_no_processes(watch)


def in_progress(root: Path) -> str | None:
    """What `kpatch status` would say is in progress (read from the run state and the journal directly, to
    save a kpatch start per kill: tests/test_journal.py and test_concurrency.py run status on such states)."""
    journal = root / ".kpatch" / "journal"
    if journal.is_dir():
        try:
            pending = json.loads((journal / "journal.json").read_text())["operation"]
        except (OSError, ValueError, KeyError):
            pending = (journal / "operation").read_text().strip() if (journal / "operation").is_file() else "?"
        state = json.loads((root / ".kpatch" / "state.json").read_text())
        if not (pending == "rebase" and (journal / "journal.json").is_file() and state["operation"] is None):
            return str(pending)
    try:
        operation = json.loads((root / ".kpatch" / "state.json").read_text())["operation"]
    except FileNotFoundError:
        return None
    return str(operation["kind"]) if operation else None


def recover(runner: Runner, command: str, cycle: Cycle, choice: str) -> subprocess.CompletedProcess[str] | None:
    """After a kill: what a person would do. If something is in progress (as `kpatch status` says), `choice`
    (--continue or --abort); if not, there is nothing to recover and the kpatch state must be untouched."""
    pending = in_progress(runner.root)
    if not pending:
        cycle.inside, cycle.recovery = False, "none"
        return None
    if pending != command:
        cycle.problems.append(f"status says a {pending} is in progress, not a {command}")
    cycle.inside = True
    cycle.recovery = choice
    proc = runner.run(command, f"--{cycle.recovery}")
    if proc.returncode != 0:
        cycle.problems.append(f"{command} --{cycle.recovery} exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return proc


def common_checks(runner: Runner, cycle: Cycle, trees: dict[str, Path], files_before: dict[str, str],
                  mirrors: Iterable[Path], *, with_status: bool = True) -> dict[str, tuple[str | None, str, bool]]:
    """The checks every recovered state passes; returns each worktree's (HEAD, status, busy). Without
    `with_status`, what `kpatch status` would say is in progress is read from the files directly."""
    states = {name: git_state(path) for name, path in trees.items()}
    for name, (_, porcelain, busy) in states.items():
        if busy:
            cycle.problems.append(f"{name}: a git operation is still in progress")
        if porcelain.strip():
            cycle.problems.append(f"{name}: worktree not clean: {porcelain.strip().splitlines()[:3]}")
    git_dirs = [Path(m) for m in mirrors]
    locks = git_lock_files(git_dirs)
    if locks:
        cycle.problems.append(f"git lock files left: {[str(p) for p in locks[:5]]}")
    held = kpatch_lock_busy([runner.root / ".kpatch" / "lock", *(runner.cache / "locks").glob("*")])
    if held:
        cycle.problems.append(f"kpatch lock still held: {held}")
    if tracked_files(runner.root) != files_before:
        cycle.problems.append("kpatch.toml or patches/ changed")
    if not with_status:
        left = in_progress(runner.root)
        if left:
            cycle.problems.append(f"a {left} is still in progress")
        return states
    status, error = runner.status()
    if status is None:
        cycle.problems.append(f"status failed: {error}")
    elif status.get("operation") or status.get("journal"):
        cycle.problems.append(f"status still shows {status.get('operation') or status.get('journal')} in progress")
    return states


def random_delay(rng: random.Random, duration: float) -> float:
    return rng.uniform(0.0, duration)


@dataclass
class ApplyKills:
    """50 kills of `kpatch apply` on a long project (see tests/git/test_kills.py and scripts/bench_kills.py)."""

    runner: Runner
    names: list[str]
    expected: dict[str, str]  # the reproducible heads of a clean apply
    rng: random.Random
    duration: float  # of a clean apply from a state like the ones the kills start from
    full_every: int = 1  # `kpatch status` and a fresh `kpatch apply` after every n-th kill (and the last)
    window: str = "run"  # kill moments over the whole run, or only once it recorded its operation ("operation")
    log: Callable[[str], None] = lambda line: None

    @property
    def trees(self) -> dict[str, Path]:
        return {n: self.runner.root / "work" / n for n in self.names}

    @property
    def mirrors(self) -> list[Path]:
        return [mirror_dir(self.runner.cache, n) for n in self.names]

    def heads(self) -> dict[str, str | None]:
        return {name: git_state(path)[0] for name, path in self.trees.items()}

    def run(self, kills: int) -> KillRun:
        result = KillRun()
        files = tracked_files(self.runner.root)
        number, first = 0, self.rng.randint(0, 1)
        while len(result.inside) < kills:
            self.perturb()
            before = self.heads()
            started = time.monotonic()
            watch = [self.runner.root, self.runner.cache]
            if self.window == "operation":
                delay = self.rng.random()
                killed, survivors = kill_once(self.runner, ["apply"], delay, watch=watch, after="apply",
                                              length=self.duration)
            else:
                delay = random_delay(self.rng, self.duration)
                killed, survivors = kill_once(self.runner, ["apply"], delay, watch=watch)
            if not killed:
                result.finished_before_kill += 1
                continue
            cycle = Cycle(number=number, delay=delay, inside=False, recovery="none")
            number += 1
            if survivors:
                cycle.problems.append(f"processes outlived the killed kpatch: {survivors}")
            recover(self.runner, "apply", cycle, RECOVERIES[(len(result.inside) + first) % 2])
            count = len(result.inside) + cycle.inside
            full = count % self.full_every == 0 or count == kills
            states = common_checks(self.runner, cycle, self.trees, files, self.mirrors, with_status=full)
            after = {name: state[0] for name, state in states.items()}
            if cycle.recovery == "continue" and after != self.expected:
                cycle.problems.append(f"after --continue the heads are {after}, not the reproducible {self.expected}")
            elif cycle.recovery == "abort" and after != before:
                cycle.problems.append(f"after --abort the heads are {after}, not as before {before}")
            elif cycle.recovery == "none" and after not in (before, self.expected):
                cycle.problems.append(f"a kill outside the operation moved the heads: {before} -> {after}")
            if cycle.clean and full:
                fresh = self.runner.run("apply")
                if fresh.returncode != 0 or self.heads() != self.expected:
                    cycle.problems.append(f"a fresh apply failed ({fresh.returncode}): {fresh.stderr.strip()[-300:]}")
            cycle.seconds = time.monotonic() - started
            result.cycles.append(cycle)
            self.log(f"kill {cycle.number:>3} at {delay:5.2f}s {'inside ' if cycle.inside else 'outside'} "
                     f"{cycle.recovery:<8} {'clean' if cycle.clean else 'NOT CLEAN: ' + '; '.join(cycle.problems)}"
                     f" ({cycle.seconds:.1f}s)")
        return result

    def perturb(self) -> None:
        """Vary the state the next apply starts from: worktrees moved back a random number of patches, or
        removed (the apply adds them again), or the whole cache gone too (it fetches the mirrors again)."""
        draw = self.rng.random()
        env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull}
        if draw < 0.05:
            for tree in self.trees.values():
                shutil.rmtree(tree, ignore_errors=True)
            shutil.rmtree(self.runner.cache / "mirrors", ignore_errors=True)
        elif draw < 0.2:
            for name, tree in self.trees.items():
                if tree.exists():
                    subprocess.run(["git", "worktree", "remove", "--force", "--force", str(tree)], env=env,
                                   cwd=mirror_dir(self.runner.cache, name), check=True, capture_output=True)
        elif draw < 0.55:
            for tree in self.trees.values():
                if git_state(tree)[0] is not None:
                    subprocess.run(["git", "checkout", "--quiet", "--detach", f"HEAD~{self.rng.randint(1, 40)}"],
                                   cwd=tree, check=True, env=env, capture_output=True)


def copy_tree(source: Path, target: Path) -> None:
    """Replace `target` by a copy of `source` (symlinks kept, modes kept)."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, symlinks=True)
