"""Every interrupted run recoverable: SIGKILL to the kpatch pid at random moments of a 300-patch apply, each
followed by --continue or --abort, kills at kpatch's named points, and reproducible commits after any --continue
(the rebase's random kills are in test_kills_rebase.py; the two files run side by side).

The kill loops are the ones `scripts/bench_kills.py` runs for the README's figures (tests/killing.py), with
fewer kills here to keep CI fast: KPATCH_TEST_APPLY_KILLS and KPATCH_TEST_REBASE_KILLS raise them.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from kpatch.examples.moves import move_upstreams, ship_resolution
from kpatch.examples.upstreams import ExampleProject, commit
from tests.support.cli import KPATCH, kpatch
from tests.support.gitrepos import (
    Project,
    committer_is_author,
    git,
    kill_inside_git_am,
    make_project,
    mirror_dir,
    mirror_of,
)
from tests.support.killing import ApplyKills, Runner, isolated_env, processes_under
from tests.support.many_patches import make_long_project

APPLY_KILLS = int(os.environ.get("KPATCH_TEST_APPLY_KILLS", "50"))


def test_apply_continue_after_a_conflict_keeps_commits_reproducible(project: Project) -> None:
    """git am --continue forgets --committer-date-is-author-date: the patches after a resolved conflict used to
    get the current time as committer date, so the same resolution gave new SHAs on every run."""
    moved = commit(project.kernels, {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.26)\nproject(kernels)\n"
                                     "set(VLLM_EXT_SRC\n  \"csrc/cache.cpp\"\n  \"csrc/norm.cpp\"\n"
                                     "  \"csrc/torch_bindings.cpp\"\n)\n"}, "rename layernorm", 99)
    assert project.run("apply", "--onto", f"kernels={moved}").exit_code == ExitCode.CONFLICT
    tree = project.workdir / "kernels"
    (tree / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.26)\nproject(kernels)\n"
                                         "set(VLLM_EXT_SRC\n  \"csrc/cache.cpp\"\n  \"csrc/kimi.cpp\"\n"
                                         "  \"csrc/norm.cpp\"\n  \"csrc/torch_bindings.cpp\"\n)\n")
    git(tree, "add", "CMakeLists.txt")
    time.sleep(1.1)  # a committer date taken from the clock would now differ from every author date
    done = project.run("apply", "--continue")
    assert done.exit_code == 0, done.output
    assert committer_is_author(tree, moved)


def test_git_left_running_by_a_killed_kpatch_is_stopped_before_recovery(project: Project, tmp_path: Path) -> None:
    """The parent-death signal kills the git kpatch starts, not what that git starts: `git worktree add` runs
    `git reset --hard`, which would go on writing (and hold index.lock) in the worktree being recovered."""
    assert project.run("apply").exit_code == 0
    heads = {n: git(project.workdir / n, "rev-parse", "HEAD") for n in ("kernels", "app")}
    mirror = mirror_dir(project.root.parent / "home" / ".cache" / "kpatch", "kernels")
    git(mirror, "worktree", "remove", "--force", str(project.workdir / "kernels"))
    marker = tmp_path / "in-checkout"
    git(mirror, "config", "filter.slow.smudge", f"sh -c 'touch {marker}; sleep 2; cat'")
    (mirror / "info").mkdir(exist_ok=True)
    (mirror / "info" / "attributes").write_text("* filter=slow\n")
    proc = subprocess.Popen([*KPATCH, "apply"], cwd=project.root, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "git worktree add never checked out a file"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)  # only kpatch: its `git worktree add` dies, the `git reset --hard` does not
    proc.wait()
    left = processes_under([project.workdir])
    assert any("reset" in p for p in left), left
    git(mirror, "config", "--unset", "filter.slow.smudge")
    (mirror / "info" / "attributes").unlink()
    done = project.run("apply", "--continue")
    assert done.exit_code == 0, done.output
    assert "stopped" in done.stderr and "git process(es) a killed kpatch left running" in done.stderr
    assert processes_under([project.workdir]) == []
    time.sleep(2.5)  # the orphan would have gone on writing by now
    assert {n: git(project.workdir / n, "rev-parse", "HEAD") for n in ("kernels", "app")} == heads
    assert git(project.workdir / "kernels", "status", "--porcelain", "--untracked-files=all") == ""


@pytest.fixture(scope="module")
def long_project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Runner, dict[str, str], float]:
    """The 300-patch project, applied once; (runner, the reproducible heads, how long a clean apply takes)."""
    folder = tmp_path_factory.mktemp("kills-apply")
    project = make_long_project(folder)
    runner = Runner(project.root, folder / "cache", isolated_env(folder / "home"))
    first = runner.run("apply")
    assert first.returncode == 0, first.stderr
    times = []
    for _ in range(2):
        started = time.monotonic()
        assert runner.run("apply").returncode == 0
        times.append(time.monotonic() - started)
    heads = {name: Runner.head(project.root / "work" / name) for name in project.counts}
    return runner, heads, statistics.median(times)  # type: ignore[return-value]


def test_kills_at_random_moments_of_a_300_patch_apply_all_recover(
        long_project: tuple[Runner, dict[str, str], float]) -> None:
    """SIGKILL to the kpatch pid only (its git dies with it), then --continue or --abort: every time a clean
    state (exit 0, no git operation, lock or process left, heads reproducible or exactly as before, patches
    and kpatch.toml untouched; status and a fresh apply work: checked after every 5th kill and the last here,
    after every kill in scripts/bench_kills.py)."""
    runner, heads, duration = long_project
    harness = ApplyKills(runner=runner, names=list(heads), expected=heads, rng=random.Random(8),
                         duration=duration, full_every=5, window="operation")
    result = harness.run(APPLY_KILLS)
    assert result.problems() == [], result.summary("apply")
    assert len(result.inside) == APPLY_KILLS
    assert {c.recovery for c in result.inside} == {"continue", "abort"}


def test_stale_git_locks_a_kill_left_are_removed_before_the_next_apply_runs_git(
        long_project: tuple[Runner, dict[str, str], float]) -> None:
    """A kill can leave packed-refs.lock (and index.lock) behind; the next apply removes them before it runs any
    git (the writer's first step, which says so), instead of git waiting on them for every patch."""
    runner, heads, _ = long_project
    planted = []
    for name in heads:
        planted.append(mirror_dir(runner.cache, name) / "packed-refs.lock")
        git_dir = Path(subprocess.run(["git", "rev-parse", "--absolute-git-dir"], cwd=runner.root / "work" / name,
                                      capture_output=True, text=True, check=True).stdout.strip())
        planted.append(git_dir / "index.lock")
    for lock in planted:
        lock.write_text("")
    result = runner.run("apply")
    assert result.returncode == 0, result.stderr
    assert f"removed {len(planted)} git lock file(s) a killed git left" in result.stderr
    assert {name: Runner.head(runner.root / "work" / name) for name in heads} == heads
    assert not list(runner.cache.rglob("*.lock"))


def test_a_git_lock_a_kill_left_in_a_range_diffs_throwaway_worktree_is_removed_by_the_next_writer(
        long_project: tuple[Runner, dict[str, str], float], tmp_path: Path) -> None:
    """A rebase's review (range-diff) runs git am in a throwaway worktree of the mirror in a temp folder that no
    project owns; a kill there leaves its HEAD.lock in the mirror's worktree record. The next writer clears it
    under the mirror's lock (seen in a random rebase kill before this was handled)."""
    runner, heads, _ = long_project
    name = next(iter(heads))
    mirror = mirror_dir(runner.cache, name)
    dead = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True).stdout.strip()
    where = tmp_path / f"kpatch-stack-{dead}-killed" / "tree"  # named for a kpatch that is gone
    subprocess.run(["git", "worktree", "add", "--detach", str(where), heads[name]], cwd=mirror, check=True,
                   capture_output=True)
    record = Path(subprocess.run(["git", "rev-parse", "--absolute-git-dir"], cwd=where, capture_output=True,
                                 text=True, check=True).stdout.strip())
    (record / "HEAD.lock").write_text("")
    result = runner.run("apply")
    assert result.returncode == 0, result.stderr
    assert "removed 1 git lock file(s) a killed git left" in result.stderr
    assert not (record / "HEAD.lock").exists()


def _resolve_cmake(tree: Path) -> None:
    (tree / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.26)\nproject(kernels)\n"
                                         "set(VLLM_EXT_SRC\n  \"csrc/cache.cpp\"\n  \"csrc/kimi.cpp\"\n"
                                         "  \"csrc/norm.cpp\"\n  \"csrc/torch_bindings.cpp\"\n)\n")
    git(tree, "add", "CMakeLists.txt")


def _stopped_at_a_conflict(project: Project) -> str:
    moved = commit(project.kernels, {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.26)\nproject(kernels)\n"
                                     "set(VLLM_EXT_SRC\n  \"csrc/cache.cpp\"\n  \"csrc/norm.cpp\"\n"
                                     "  \"csrc/torch_bindings.cpp\"\n)\n"}, "rename layernorm", 99)
    assert project.run("apply", "--onto", f"kernels={moved}").exit_code == ExitCode.CONFLICT
    _resolve_cmake(project.workdir / "kernels")
    return moved


@pytest.mark.parametrize("recovery", ["continue", "abort"])
def test_kill_during_apply_continue_after_a_resolved_conflict(tmp_path: Path, example_template: Path,
                                                              monkeypatch: pytest.MonkeyPatch, recovery: str) -> None:
    """Killed in the `git am --continue` that commits a person's resolution and applies the rest: --continue
    keeps the resolution and ends where an uninterrupted --continue ends; --abort puts everything back."""
    monkeypatch.setenv("KPATCH_CACHE_DIR", str(tmp_path / "reference-cache"))
    reference = make_project(tmp_path / "reference", example_template)
    _stopped_at_a_conflict(reference)
    assert reference.run("apply", "--continue").exit_code == 0
    expected = {n: git(reference.workdir / n, "rev-parse", "HEAD") for n in ("kernels", "app")}
    monkeypatch.setenv("KPATCH_CACHE_DIR", str(tmp_path / "cache"))
    project = make_project(tmp_path / "killed", example_template)
    _stopped_at_a_conflict(project)
    mirror = mirror_dir(tmp_path / "cache", "kernels")
    kill_inside_git_am([*KPATCH, "apply", "--continue"], project.root, mirror,
                       tmp_path / "in-am")
    done = project.run("apply", f"--{recovery}")
    assert done.exit_code == 0, done.output
    heads = {n: Runner.head(project.workdir / n) for n in ("kernels", "app")}
    if recovery == "continue":
        assert heads == expected
    else:
        assert heads == {"kernels": None, "app": None}  # the first apply made them: --abort removes them
    assert json.loads(project.run("status", "--json").stdout)["result"]["operation"] is None


# --- kills at named points (KPATCH_TEST_KILL_AT, kpatch/killseam.py): no timing, the state a kill there leaves ---


def _cache(project: Project) -> Path:
    return project.root.parent / "home" / ".cache" / "kpatch"


def _locked_records(project: Project) -> list[Path]:
    return list((_cache(project) / "mirrors").glob("*.git/worktrees/*/locked"))


def _heads(project: Project) -> dict[str, str | None]:
    return {n: Runner.head(project.workdir / n) for n in ("kernels", "app")}


def test_a_kill_while_the_first_mirror_is_made_leaves_nothing_half_made(project: Project) -> None:
    """Killed right after `git init --bare` of the first mirror (3 of 30 random kills hit it): the mirror is made
    in a folder of its own and renamed into place, so the next apply starts from no mirror, not half of one."""
    killed = kpatch(project.root, "apply", env={"KPATCH_TEST_KILL_AT": "mirror:init"})
    assert killed.exit_code == -signal.SIGKILL
    assert not mirror_dir(_cache(project), "kernels").exists()
    for command in (["status"], ["apply"], ["status"]):
        ran = kpatch(project.root, *command)
        assert ran.exit_code == 0, ran.output
    assert not list((_cache(project) / "mirrors").glob("*.new-*"))


def test_a_mirror_an_interrupted_git_init_left_half_made_is_made_again(project: Project) -> None:
    """`git init` writes HEAD before the objects folder and the config: `Mirror.exists` looked only at HEAD, and
    apply and status failed (exit 5) every time after."""
    mirror = mirror_of(_cache(project), project.kernels)
    subprocess.run(["git", "init", "-q", "--bare", str(mirror)], check=True)
    shutil.rmtree(mirror / "objects")
    (mirror / "config").unlink()
    assert kpatch(project.root, "status").exit_code == 0
    ran = kpatch(project.root, "apply")
    assert ran.exit_code == 0, ran.output
    assert (mirror / "objects").is_dir() and "bare = true" in (mirror / "config").read_text()
    assert kpatch(project.root, "status").exit_code == 0


@pytest.mark.parametrize("recovery", ["continue", "abort"])
def test_a_kill_inside_git_worktree_add_of_an_apply_recovers(project: Project, tmp_path: Path, example_template: Path,
                                                             recovery: str) -> None:
    """Killed while `git worktree add` made a worktree (locked "initializing", nothing checked out): --continue,
    --abort and a new apply used to fail on git's "use 'add -f -f' to override, or 'unlock' and 'prune'"."""
    killed = kpatch(project.root, "apply", env={"KPATCH_TEST_KILL_AT": "worktree:add"})
    assert killed.exit_code == -signal.SIGKILL
    assert [p.read_text().strip() for p in _locked_records(project)] == ["initializing"]
    ran = kpatch(project.root, "apply", f"--{recovery}")
    assert ran.exit_code == 0, ran.output
    assert _locked_records(project) == []
    if recovery == "abort":
        assert _heads(project) == {"kernels": None, "app": None}
    fresh = kpatch(project.root, "apply")
    assert fresh.exit_code == 0, fresh.output
    reference = make_project(tmp_path / "reference", example_template)
    assert kpatch(reference.root, "apply", env={"KPATCH_CACHE_DIR": str(tmp_path / "reference-cache")}).exit_code == 0
    assert _heads(project) == _heads(reference)
    assert git(project.workdir / "kernels", "status", "--porcelain", "--untracked-files=all") == ""


@pytest.mark.parametrize("recovery", ["continue", "abort"])
def test_a_kill_inside_git_worktree_add_of_a_rebase_recovers(project: Project, recovery: str) -> None:
    """The same in a rebase, whose scratch worktree was being made: git am needs one (a run state without the
    stack hash, as an older kpatch wrote it, lets nothing be picked without a worktree)."""
    assert kpatch(project.root, "apply").exit_code == 0
    state = project.root / ".kpatch" / "state.json"
    raw = json.loads(state.read_text())
    for settled in raw["settled"].values():
        settled["stack_hash"] = None
    state.write_text(json.dumps(raw))
    before = _heads(project), (project.root / "kpatch.toml").read_bytes()
    killed = kpatch(project.root, "rebase", env={"KPATCH_TEST_KILL_AT": "worktree:add"})
    assert killed.exit_code == -signal.SIGKILL
    assert [p.read_text().strip() for p in _locked_records(project)] == ["initializing"]
    ran = kpatch(project.root, "rebase", f"--{recovery}")
    assert ran.exit_code == 0, ran.output
    assert _locked_records(project) == [] and not (project.workdir / ".rebase").exists()
    after = _heads(project), (project.root / "kpatch.toml").read_bytes()
    assert (after == before) == (recovery == "abort")
    assert json.loads(kpatch(project.root, "status", "--json").stdout)["result"]["operation"] is None


def test_a_kill_once_a_rebase_recorded_its_end_leaves_no_scratch_worktree(project: Project) -> None:
    """Killed between recording the end and dropping work/.rebase, a rebase left scratch worktrees behind with
    nothing in progress to clean them (test_kills_of_a_rebase_end_fully_old_or_fully_new failed once on that)."""
    assert kpatch(project.root, "apply").exit_code == 0
    toml = (project.root / "kpatch.toml").read_bytes()
    killed = kpatch(project.root, "rebase", env={"KPATCH_TEST_KILL_AT": "rebase:finished"})
    assert killed.exit_code == -signal.SIGKILL
    assert not (project.workdir / ".rebase").exists()
    status = json.loads(kpatch(project.root, "status", "--json").stdout)["result"]
    assert status["operation"] is None and not status.get("journal")
    assert (project.root / "kpatch.toml").read_bytes() != toml
    assert kpatch(project.root, "export", "--check").exit_code == 0


def test_a_worktree_a_kill_left_locked_before_its_head_is_forgotten_and_made_again(tmp_path: Path) -> None:
    """Killed between writing `locked` ("initializing") and HEAD, `git worktree add` leaves a record `git worktree
    prune` skips: removing the folder and adding it again failed on git's "use 'add -f -f' to override"."""
    from kpatch.gitx import Mirror

    upstream = tmp_path / "upstream"
    subprocess.run(["git", "init", "-q", "--initial-branch=main", str(upstream)], check=True)
    sha = commit(upstream, {"a.txt": "a\n"}, "first", 0)
    mirror = Mirror(tmp_path / "mirror.git", "x")
    mirror.fetch(str(upstream))
    path = tmp_path / "work" / "x"
    mirror.run(["worktree", "add", "--quiet", "--no-checkout", "--lock", "--reason", "initializing", "--detach",
                "--", str(path), sha])
    [record] = (mirror.path / "worktrees").iterdir()
    (record / "HEAD").unlink()
    (path / ".git").unlink()
    assert mirror.half_made(path) and not mirror.owns(path)
    mirror.remove_worktree(path)
    assert not path.exists() and not list((mirror.path / "worktrees").glob("*"))
    mirror.add_worktree(path, sha)
    assert mirror.owns(path) and (path / "a.txt").read_text() == "a\n"


def test_a_rebase_killed_before_its_recorded_resolutions_were_loaded_still_replays_them(project: Project) -> None:
    """Killed after the scratch worktree was made but before patches/.rerere went into the mirror's rr-cache (a
    random kill of CI hit it): --continue found the scratch made and skipped the copy, so the conflict a recorded
    resolution resolves stopped for a person."""
    assert kpatch(project.root, "apply").exit_code == 0
    example = ExampleProject(root=project.root, kernels=project.kernels, app=project.app,
                             kernels_base=project.kernels_base, app_base=project.app_base)
    move_upstreams(example)
    ship_resolution(example)
    killed = kpatch(project.root, "rebase", env={"KPATCH_TEST_KILL_AT": "rebase:scratch:app"})
    assert killed.exit_code == -signal.SIGKILL
    ran = kpatch(project.root, "rebase", "--continue", "--json")
    assert ran.exit_code == 0, ran.output
    stacks = {s["upstream"]: s for s in json.loads(ran.stdout)["result"]["stacks"]}
    assert [p["class"] for p in stacks["app"]["patches"]] == ["clean", "three-way"]
    assert stacks["app"]["patches"][1]["why"] == "conflict resolved by a recorded resolution"
