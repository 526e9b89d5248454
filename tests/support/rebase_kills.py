"""Kills of `kpatch rebase` on a 250-patch project whose one conflict a recorded resolution resolves
(tests/git/test_kills_rebase.py and scripts/bench_kills.py)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tests.support.gitrepos import mirror_dir
from tests.support.killing import (
    RECOVERIES,
    Cycle,
    KillRun,
    Runner,
    common_checks,
    copy_tree,
    isolated_env,
    kill_once,
    random_delay,
    recover,
    tracked_files,
)
from tests.support.many_patches import Upstreamed, make_long_project

REBASE_LATER = {"kernels": Upstreamed(merged=(10, 50, 90, 130), three_way=(20, 60, 100), conflict=75),
                "app": Upstreamed(merged=(15, 55), three_way=(30, 70))}
REBASE_COUNTS = {"kernels": 150, "app": 100}


def resolve_conflicts(tree: Path) -> None:
    """Resolve every conflicted file in `tree` by keeping both sides' lines (upstream's first), then stage it."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull}
    listing = subprocess.run(["git", "diff", "--name-only", "--diff-filter=U"], cwd=tree, env=env, check=True,
                             capture_output=True, text=True).stdout.split()
    for name in listing:
        path = tree / name
        kept = [line for line in path.read_bytes().splitlines(keepends=True)
                if not line.startswith((b"<<<<<<< ", b"=======", b">>>>>>> ", b"||||||| "))]
        path.write_bytes(b"".join(kept))
        subprocess.run(["git", "add", "--", name], cwd=tree, env=env, check=True)


@dataclass
class RebaseKills:
    """Kills of `kpatch rebase` on a long project whose one conflict a recorded resolution resolves."""

    runner: Runner
    pristine: Path  # copies of the project (with its worktrees) and the cache, before the rebase
    names: list[str]
    old: tuple[dict[str, str], dict[str, str | None]]  # files and heads before the rebase
    new: tuple[dict[str, str], dict[str, str | None]]  # files and heads after a clean rebase
    rng: random.Random
    duration: float
    log: Callable[[str], None] = lambda line: None

    @classmethod
    def prepare(cls, folder: Path, rng: random.Random, log: Callable[[str], None] = lambda line: None) -> RebaseKills:
        """Build the project, record the conflict's resolution once, then time a clean rebase (the reference)."""
        project = make_long_project(folder, REBASE_COUNTS, REBASE_LATER)
        runner = Runner(project.root, folder / "cache", isolated_env(folder / "home"))
        original = folder / "original"
        shutil.copytree(project.root, original)
        _must(runner.run("apply"))
        stopped = runner.run("rebase")
        if stopped.returncode != 1:
            raise RuntimeError(f"the first rebase should stop at the conflict ({stopped.returncode}): {stopped.stderr}")
        resolve_conflicts(project.root / "work" / ".rebase" / "kernels")
        _must(runner.run("rebase", "--continue"))
        rerere = project.root / "patches" / ".rerere"
        if not rerere.is_dir():
            raise RuntimeError("rebase --continue recorded no resolution")
        # The old project again, now with the recorded resolution beside its patches, freshly applied.
        shutil.copytree(rerere, folder / "rerere")
        shutil.rmtree(project.root)
        shutil.rmtree(runner.cache)
        shutil.copytree(original, project.root)
        shutil.copytree(folder / "rerere", project.root / "patches" / ".rerere")
        _must(runner.run("apply"))
        pristine = folder / "pristine"
        copy_tree(project.root, pristine / "project")
        copy_tree(runner.cache, pristine / "cache")
        names = list(project.counts)
        trees = [project.root / "work" / n for n in names]
        old = (tracked_files(project.root), {t.name: Runner.head(t) for t in trees})
        started = time.monotonic()
        _must(runner.run("rebase"))
        duration = time.monotonic() - started
        new = (tracked_files(project.root), {t.name: Runner.head(t) for t in trees})
        log(f"rebase: {project.total} patches, a clean rebase (one conflict resolved by the recorded resolution) "
            f"takes {duration:.2f} s")
        return cls(runner=runner, pristine=pristine, names=names, old=old, new=new, rng=rng, duration=duration,
                   log=log)

    def cold(self) -> RebaseKills:
        """The same rebase from a fresh checkout, as every night in CI: kpatch.toml and patches/, the mirrors
        cached, no worktree and no run state (the worktrees are then checked out beside git am). It ends with the
        same files and commits; before it there is no worktree."""
        pristine = self.pristine.parent / "pristine-cold"
        copy_tree(self.pristine, pristine)
        shutil.rmtree(pristine / "project" / "work")
        shutil.rmtree(pristine / "project" / ".kpatch")
        for mirror in (pristine / "cache" / "mirrors").glob("*.git"):
            shutil.rmtree(mirror / "worktrees", ignore_errors=True)
        return replace(self, pristine=pristine, old=(self.old[0], dict.fromkeys(self.names)))

    def restore(self) -> None:
        """The project, its worktrees and the cache exactly as before the rebase (same paths)."""
        copy_tree(self.pristine / "project", self.runner.root)
        copy_tree(self.pristine / "cache", self.runner.cache)

    def run(self, kills: int) -> KillRun:
        result = KillRun()
        trees = {n: self.runner.root / "work" / n for n in self.names}
        mirrors = [mirror_dir(self.runner.cache, n) for n in self.names]
        number, first = 0, self.rng.randint(0, 1)
        while len(result.inside) < kills:
            self.restore()
            delay = random_delay(self.rng, self.duration)
            started = time.monotonic()
            killed, survivors = kill_once(self.runner, ["rebase"], delay, watch=[self.runner.root, self.runner.cache])
            if not killed:
                result.finished_before_kill += 1
                continue
            cycle = Cycle(number=number, delay=delay, inside=False, recovery="none")
            number += 1
            if survivors:
                cycle.problems.append(f"processes outlived the killed kpatch: {survivors}")
            recover(self.runner, "rebase", cycle, RECOVERIES[(len(result.inside) + first) % 2])
            files = tracked_files(self.runner.root)
            states = common_checks(self.runner, cycle, trees, files, mirrors)
            heads = {name: state[0] for name, state in states.items()}
            now = (files, heads)
            if files not in (self.old[0], self.new[0]):
                changed = sorted(k for k in set(files) | set(self.old[0]) if files.get(k) != self.old[0].get(k))
                cycle.problems.append(f"kpatch.toml and patches/ are neither old nor new: {changed[:5]}")
            expected = {"continue": [self.new], "abort": [self.old], "none": [self.old, self.new]}[cycle.recovery]
            if now not in expected:
                which = "old" if files == self.old[0] else "new" if files == self.new[0] else "mixed"
                cycle.problems.append(f"{which} files with heads {heads}: not what --{cycle.recovery} must leave")
            if (self.runner.root / "work" / ".rebase").exists():
                cycle.problems.append("scratch worktrees left in work/.rebase")
            locked = [str(p.parent) for m in mirrors for p in m.glob("worktrees/*/locked")]
            if locked:
                cycle.problems.append(f"worktree records left locked: {locked}")
            check = self.runner.run("export", "--check") if all(heads.values()) else None  # none: nothing to check
            if check is not None and check.returncode != 0:
                cycle.problems.append(f"export --check exited {check.returncode}: {check.stderr.strip()[-300:]}")
            cycle.seconds = time.monotonic() - started
            result.cycles.append(cycle)
            self.log(f"kill {cycle.number:>3} at {delay:5.2f}s {'inside ' if cycle.inside else 'outside'} "
                     f"{cycle.recovery:<8} {'clean' if cycle.clean else 'NOT CLEAN: ' + '; '.join(cycle.problems)}"
                     f" ({cycle.seconds:.1f}s)")
        return result


def _must(proc: subprocess.CompletedProcess[str]) -> None:
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(proc.args[2:])} failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
