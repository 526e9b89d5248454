"""Hostile input, round three (issue 37): the last temp folders a kill left behind (`kpatch-diff-`, `kpatch-check-`,
`kpatch-preimages-`, `kpatch-objects-`, named with no pid, so never swept) are named for their kpatch now, and the
next writer sweeps what a killed one left. Each kill is a real SIGKILL at the seam `scratch:<kind>`.
"""

from __future__ import annotations

from pathlib import Path

from tests.git.test_blobless import mirror, missing, promisor, serve
from tests.git.test_rebase_fastpath import build
from tests.git.test_security_three_weak import _killed_at, _recovers
from tests.support.gitrepos import Project, git
from tests.support.rebase_repos import RebaseProject


def _tmp(tmp_path: Path) -> Path:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return tmp


def test_a_diff_killed_with_the_old_stacks_extracted_leaves_none_after_the_next_writer(project: Project,
                                                                                       tmp_path: Path) -> None:
    """`kpatch diff` extracts kpatch.toml and the patch files of a commit of the project into a temp folder."""
    git(project.root, "init", "-q", "-b", "main")
    git(project.root, "add", "kpatch.toml", "patches")
    git(project.root, "commit", "-q", "-m", "the stacks")
    tmp = _tmp(tmp_path)
    left = _killed_at(project.root, "diff", tmp, "diff")
    assert any(p.name == "kpatch.toml" for p in left.rglob("*")), list(left.rglob("*"))
    said = _recovers(project.root, tmp, "apply")
    assert f"removed 1 temp folder(s) a killed kpatch left (e.g. {left})" in said


def test_a_rebase_killed_during_its_apply_checks_leaves_no_check_index(tmp_path: Path) -> None:
    """The fast path checks a patch whose files moved upstream (and whose file is not its commit's diff) with
    `git apply --check` on a throwaway index."""
    case = build(tmp_path / "case", conflict=False, short_context=True)
    cache = ("--cache-dir", str(case.root.parent / "cache"))
    tmp = _tmp(tmp_path)
    _killed_at(case.root, "check", tmp, "rebase", *cache)
    _recovers(case.root, tmp, "rebase", "--abort", *cache)


def test_an_apply_on_a_blobless_mirror_killed_while_asking_for_objects_leaves_no_probe(rp: RebaseProject,
                                                                                        tmp_path: Path) -> None:
    """A blobless mirror asks which preimages it lacks in a throwaway repository borrowing its objects."""
    serve(rp, filters=True)
    tmp = _tmp(tmp_path)
    env = {"KPATCH_BLOBLESS": "1"}
    _killed_at(rp.root, "objects", tmp, "apply", env=env)
    assert promisor(mirror(rp, "kernels")) and missing(mirror(rp, "kernels"))
    _recovers(rp.root, tmp, "apply", "--abort", env=env)


def test_a_cold_rebase_killed_while_making_a_forks_preimages_leaves_no_index(tmp_path: Path) -> None:
    """Preimages no upstream commit holds (an earlier patch of the stack made them) are made by `git apply
    --cached` on a throwaway index before a cold rebase's am."""
    from tests.support.many_patches import Upstreamed, make_long_project

    project = make_long_project(tmp_path / "cold", {"kernels": 80}, {"kernels": Upstreamed(three_way=(60,))})
    tmp = _tmp(tmp_path)
    env = {"KPATCH_CACHE_DIR": str(tmp_path / "cache")}
    _killed_at(project.root, "preimages", tmp, "rebase", env=env)
    _recovers(project.root, tmp, "rebase", "--abort", env=env)
