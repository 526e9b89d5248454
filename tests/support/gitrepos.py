"""The example project (real git upstreams in a temp dir) driven through the CLI, and a git helper for tests."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from click.testing import Result

from kpatch.examples.upstreams import make_example_project
from kpatch.gitx import Repository
from tests.support.cli import run_kpatch

AUTHOR = {"GIT_AUTHOR_NAME": "Up Stream", "GIT_AUTHOR_EMAIL": "up@example.invalid",
          "GIT_COMMITTER_NAME": "Up Stream", "GIT_COMMITTER_EMAIL": "up@example.invalid"}


def git(cwd: Path, *args: str, date: int = 0) -> str:
    env = {**os.environ, **AUTHOR, "GIT_AUTHOR_DATE": f"@{1_700_000_000 + date} +0000",
           "GIT_COMMITTER_DATE": f"@{1_700_000_000 + date} +0000"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@dataclass
class Project:
    root: Path
    kernels: Path
    app: Path
    kernels_base: str
    app_base: str

    @property
    def workdir(self) -> Path:
        return self.root / "work"

    def run(self, *args: str) -> Result:
        return run_kpatch(self.root, *args)

    def snapshot(self) -> dict[str, str]:
        """Hash of every file in the project and worktrees (git internals excluded): 'nothing changed' checks.

        kpatch's writer lock (`.kpatch/lock`, empty when free) and the `.gitignore` of its private folder are
        left out: the run state (`.kpatch/state.json`) is in.
        """
        result = {}
        for path in sorted(self.root.rglob("*")):
            if path.relative_to(self.root).as_posix() in (".kpatch/lock", ".kpatch/.gitignore"):
                continue
            if path.is_file() and ".git" not in path.parts:
                result[str(path.relative_to(self.root))] = hashlib.sha256(path.read_bytes()).hexdigest()
        for tree in (self.workdir / "kernels", self.workdir / "app"):
            if tree.exists():
                result[f"HEAD:{tree.name}"] = Repository(tree).head()
        return result


def mirror_dir(cache: Path, name: str) -> Path:
    """The mirror in `cache` of the one upstream repository whose folder is called `name` (a mirror is keyed by
    its URL: `mirrors/<name>-<hash>.git`); a path that does not exist when there is none yet."""
    found = sorted((cache / "mirrors").glob(f"{name}-{'[0-9a-f]' * 16}.git"))
    assert len(found) <= 1, f"more than one mirror of a repository called {name} in {cache}: {found}"
    return found[0] if found else cache / "mirrors" / f"{name}-(none yet).git"


def mirror_of(cache: Path, url: Path | str) -> Path:
    """The folder of the mirror of `url` in `cache` (there or not)."""
    from kpatch.gitx.urls import mirror_folder

    return cache / "mirrors" / mirror_folder(str(url))


def make_project(tmp_path: Path, template: Path | None = None) -> Project:
    """The example project in `tmp_path`: built, or copied from `template` (built once per test run)."""
    if template is None:
        example = make_example_project(tmp_path)
        return Project(root=example.root, kernels=example.kernels, app=example.app,
                       kernels_base=example.kernels_base, app_base=example.app_base)
    for name in ("upstreams", "project"):
        shutil.copytree(template / name, tmp_path / name, symlinks=True)
    toml = tmp_path / "project" / "kpatch.toml"
    toml.write_text(toml.read_text().replace(str(template), str(tmp_path)))
    bases = (template / "bases").read_text().split()
    return Project(root=tmp_path / "project", kernels=tmp_path / "upstreams" / "kernels",
                   app=tmp_path / "upstreams" / "app", kernels_base=bases[0], app_base=bases[1])


def build_template(folder: Path) -> Path:
    """Build the example upstreams and project once, for tests to copy."""
    example = make_example_project(folder)
    (folder / "bases").write_text(f"{example.kernels_base} {example.app_base}\n")
    return folder


def forget_held_files(root: Path) -> None:
    """Drop the run state's record that the worktrees' commits hold exactly the patch files, so that the next
    `kpatch apply` runs git am again instead of taking those commits (engine/reuse.py), and the next `kpatch
    rebase` picks in a scratch worktree and goes on with git am there (engine/fastpath.py): for tests of what
    happens inside that am."""
    path = root / ".kpatch" / "state.json"
    state = json.loads(path.read_text())
    for settled in state["settled"].values():
        settled["stack_hash"] = None
    path.write_text(json.dumps(state))


def kill_inside_git_am(command: list[str], cwd: Path, mirror: Path, marker: Path) -> None:
    """Run `command` in its own process group and SIGKILL the whole group (kpatch, git am and all) while
    git am is in the middle of a patch: an applypatch-msg hook in the mirror marks the moment and waits."""
    import signal
    import time

    hook = mirror / "hooks" / "applypatch-msg"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\ntouch '{marker}'\nsleep 60\n")
    hook.chmod(0o755)
    proc = subprocess.Popen(command, cwd=cwd, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, "the command ended before git am ran"
            assert time.monotonic() < deadline, "git am never started"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        hook.unlink()


def committer_is_author(tree: Path, since: str) -> bool:
    """Every commit since `since` has its author date as committer date (reproducible commits)."""
    log = git(tree, "log", "--format=%ad|%cd", "--date=raw", f"{since}..HEAD").splitlines()
    return bool(log) and all(line.split("|")[0] == line.split("|")[1] for line in log)
