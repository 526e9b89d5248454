"""The nightly's world for tests: the example project as a git checkout with a local bare `origin` (the push is
real), upstreams that move, break and heal, and the fake GitHub whose branches are the origin's."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from kpatch.cli import main
from kpatch.examples.upstreams import KERNEL_FILES, commit
from tests.support.cli import run_kpatch
from tests.support.fake_github import FakeGitHub
from tests.support.gitrepos import Project, git

REPO = "acme/stack"
TOKEN = "ghs_NIGHTLYfake0123456789abcdefTOKEN"  # not a real token: the fake server's write credential
K1 = "0001-Add-the-kimi-op.patch"
BINDINGS = "csrc/torch_bindings.cpp"
SILU = '  ops.impl("silu_and_mul", torch::kXPU, &silu_and_mul);\n}'
# An upstream rework of the very lines the kernels' first patch extends: it no longer applies.
BROKEN = KERNEL_FILES[BINDINGS].replace(SILU, '  ops.impl("silu_and_mul", torch::kXPU, &silu_and_mul_v2);\n'
                                              '  ops.def("gelu(Tensor! out, Tensor input) -> ()");\n}')
CULPRIT_SUBJECT = "Rework the silu registration"


class OriginBranches(dict[str, str]):
    """The fake GitHub's branches, read live from the bare origin: a pull request needs a head really pushed."""

    def __init__(self, bare: Path) -> None:
        super().__init__()
        self.bare = bare

    def _refs(self) -> dict[str, str]:
        listing = subprocess.run(["git", "-C", str(self.bare), "for-each-ref",
                                  "--format=%(refname:short) %(objectname)", "refs/heads"],
                                 capture_output=True, text=True, check=True).stdout
        return dict(line.split(" ", 1) for line in listing.splitlines() if line)

    def __contains__(self, name: object) -> bool:
        return name in self._refs()

    def __getitem__(self, name: str) -> str:
        return self._refs()[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self._refs().get(name, default)


@dataclass
class World:
    """One project checkout, its origin, its cache, the fake GitHub and the environment a night runs in."""

    project: Project
    origin: Path
    cache: Path
    fake: FakeGitHub
    env: dict[str, str | None] = field(default_factory=dict)
    when: int = 500  # upstream commit dates, so every test's upstream history has the same SHAs

    @property
    def root(self) -> Path:
        return self.project.root

    def night(self, *args: str, env: dict[str, str | None] | None = None) -> tuple[Result, dict[str, Any]]:
        """`kpatch nightly --json` from the project folder; the report JSON it printed (its envelope's result, or
        its error when there is none; {} when it printed none)."""
        old = Path.cwd()
        os.chdir(self.root)
        try:
            result = CliRunner().invoke(main, ["nightly", "--json", "--cache-dir", str(self.cache), *args],
                                        env={**self.env, **(env or {})}, catch_exceptions=False)
        finally:
            os.chdir(old)
        try:
            envelope = json.loads(result.stdout) if result.stdout.strip() else {}
            report = envelope.get("result") or envelope.get("error") or {}
        except ValueError:
            report = {}
        return result, report

    def kpatch(self, *args: str) -> Result:
        return run_kpatch(self.root, *args, "--cache-dir", str(self.cache), env=self.env)

    def move(self, upstream: str, files: dict[str, str], message: str) -> str:
        """A new commit on the upstream's main branch; returns its SHA."""
        self.when += 1
        return commit(self.project.kernels if upstream == "kernels" else self.project.app, files, message, self.when)

    def churn(self, upstream: str, count: int = 3) -> None:
        """Upstream commits that touch nothing the stacks patch."""
        for n in range(count):
            self.move(upstream, {"NEWS.txt": f"night {self.when} entry {n}\n"}, f"News {self.when}")

    def branch(self, name: str = "kpatch/nightly") -> str | None:
        """The SHA of `name` in the origin, or None when it was never pushed."""
        proc = subprocess.run(["git", "-C", str(self.origin), "rev-parse", "--verify", "--quiet", name],
                              capture_output=True, text=True)
        return proc.stdout.strip() or None

    def branch_files(self, name: str = "kpatch/nightly") -> list[str]:
        return git(self.origin, "ls-tree", "-r", "--name-only", name).splitlines()


def make_world(project: Project, cache: Path, fake: FakeGitHub) -> World:
    """The example project made a git checkout of branch main with a local bare origin; GitHub knows it."""
    root = project.root
    (root / ".gitignore").write_text("work/\ndist/\nreports/\n")
    git(root, "init", "--quiet", "--initial-branch=main")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "The stacks")
    origin = root.parent / "origin.git"
    git(root.parent, "init", "--quiet", "--bare", str(origin))
    git(root, "remote", "add", "origin", str(origin))
    git(root, "push", "--quiet", "origin", "main")
    fake.grant(TOKEN, "write")
    fake.repo(REPO).branches = OriginBranches(origin)
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": REPO, "KPATCH_GITHUB_API": fake.url,
           "KPATCH_GITHUB_RETRY_DELAY": "0", "GITHUB_ACTIONS": None, "GITHUB_STEP_SUMMARY": None}
    return World(project=project, origin=origin, cache=cache, fake=fake, env=env)


def files_under(*folders: Path) -> Iterator[Path]:
    for folder in folders:
        yield from (p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def git_objects(repo: Path) -> bytes:
    """Every object in a repository, uncompressed: what a pushed branch really carries."""
    listing = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-all-objects", "--batch"],
                             capture_output=True, check=True)
    return listing.stdout
