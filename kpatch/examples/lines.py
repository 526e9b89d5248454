"""A release line on the example upstreams: each cut a release branch from an older commit, the kernels' release
branch changed a file one of main's newer patches touches (so backporting that patch conflicts, that release
commit the culprit), and main's kernels stack gained two fixes the line lacks (one backports cleanly).

The line ("0.9") follows `release/0.9` of both upstreams from their tag `v0.9` (on the branch: the kernels' after
the release commit); its stacks, in
`patches/0.9/<upstream>/`, start as main's first stacks (the same patches, rebased by nothing: they apply there).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from kpatch.examples.upstreams import (
    KERNEL_CHANGES,
    KERNEL_FILES,
    Change,
    ExampleProject,
    commit,
    make_example_project,
    write_stack,
)
from kpatch.gitx import out, run

LINE = "0.9"
BRANCH = "release/0.9"
TAG = "v0.9"  # the release tag on each release branch: the line's base
CUT = 10  # the commit of each upstream's history the release branch is cut from (main's base is commit 15)


def _lines(text: str, numbers: range, new: str) -> str:
    """`text` with each of the given (0-based) lines replaced by `new` and its number."""
    rows = text.splitlines(keepends=True)
    for number in numbers:
        rows[number] = f"{new} {number}\n"
    return "".join(rows)


# Main's newer kernels fixes: one the release branch lets through, one that touches the cache kernel's lines the
# release branch rewrote.
FIXES: list[Change] = [
    ({"csrc/layernorm.cpp": _lines(KERNEL_FILES["csrc/layernorm.cpp"], range(3, 4), "// layernorm: guard fixed")},
     "Guard the layernorm kernel\n\nUpstream-Status: submitted\nUpstream-PR: vllm-project/vllm-xpu-kernels#601\n"),
    ({"csrc/cache.cpp": _lines(KERNEL_FILES["csrc/cache.cpp"], range(20, 23), "// cache: widened by us")},
     "Widen the cache kernel\n\nUpstream-Status: pending\n"),
]
RELEASE_CHANGE = _lines(KERNEL_FILES["csrc/cache.cpp"], range(20, 23), "// cache: reworked for the release")


@dataclass(frozen=True)
class LineProject:
    example: ExampleProject
    culprit: str  # the kernels' release-branch commit the second fix conflicts with
    kernels_cut: str  # the commit each release branch starts at
    app_cut: str

    @property
    def root(self) -> Path:
        return self.example.root


def cut_release(repo: Path) -> str:
    """Branch `release/0.9` at the CUT-th commit of main's history; return it."""
    sha = out(["rev-list", "--reverse", "main"], repo).split()[CUT]
    run(["branch", BRANCH, sha], repo)
    return sha


def line_tables(upstreams: tuple[str, ...] = ("kernels", "app")) -> str:
    """The release line's kpatch.toml tables (the documented form): each upstream's release branch, from v0.9."""
    return (f'\n# The release line: both upstreams\' {BRANCH} branches, from their tag {TAG}.\n'
            + "\n".join(f'[line."{LINE}".{name}]\nbranch = "{BRANCH}"\nbase = "{TAG}"\n' for name in upstreams))


def release_commit(repo: Path, files: dict[str, str], message: str, when: int) -> str:
    """A commit on the release branch (main stays checked out)."""
    run(["checkout", "--quiet", BRANCH], repo)
    try:
        return commit(repo, files, message, when)
    finally:
        run(["checkout", "--quiet", "main"], repo)


def make_line_project(root: Path) -> LineProject:
    """The example project with the release line "0.9" declared in its kpatch.toml (see the module)."""
    example = make_example_project(root)
    kernels_cut, app_cut = cut_release(example.kernels), cut_release(example.app)
    culprit = release_commit(example.kernels, {"csrc/cache.cpp": RELEASE_CHANGE}, "Rework the cache kernel for 0.9",
                             500)
    for repo in (example.kernels, example.app):  # the release is tagged on its branch, after the cut
        run(["tag", "v0.9", BRANCH], repo)
    patches = example.root / "patches"
    for name in ("kernels", "app"):  # the line starts with main's first stacks
        shutil.copytree(patches / name, patches / LINE / name)
    write_stack(example.kernels, example.kernels_base, patches / "kernels", [*KERNEL_CHANGES, *FIXES])
    with (example.root / "kpatch.toml").open("a", encoding="utf-8") as toml:
        toml.write(line_tables())
    return LineProject(example=example, culprit=culprit, kernels_cut=kernels_cut, app_cut=app_cut)
