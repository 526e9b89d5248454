"""A patch that renames a file: found upstream by its patch-id when upstream made the same rename."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from kpatch.examples.upstreams import commit, init_repo, write_patches
from tests.support.cli import run_kpatch
from tests.support.example_toml import one_upstream
from tests.support.gitrepos import git

OLD = "".join(f"old line {i}\n" for i in range(1, 41))
MOVED = OLD.replace("old line 20\n", "line 20 fixed\n")


def _rename(repo: Path, when: int, message: str) -> str:
    """Rename old.txt to new.txt with one line changed, as one commit."""
    git(repo, "mv", "old.txt", "new.txt")
    return commit(repo, {"new.txt": MOVED}, message, when)


def _project(tmp: Path, *, upstream_renames: bool) -> Path:
    up = tmp / "up"
    init_repo(up)
    base = commit(up, {"old.txt": OLD, "other.txt": "other\n"}, "import", 0)
    scratch = tmp / "scratch"
    shutil.copytree(up, scratch)
    _rename(scratch, 10, "Move old.txt to new.txt")
    commit(scratch, {"other.txt": "other, fixed\n"}, "Fix other", 20)
    root = tmp / "project"
    names = write_patches(scratch, base, root / "patches" / "up")
    (root / "patches" / "up" / "series").write_text("".join(f"{n}\n" for n in names))
    for i in range(1, 6):
        commit(up, {f"churn{i}.txt": f"{i}\n"}, f"churn {i}", 100 + i)
        if i == 3 and upstream_renames:
            _rename(up, 103, "Move old.txt to new.txt (#7)")
        if i == 4 and upstream_renames:  # then changes the line again: only the patch-id tells it was merged
            commit(up, {"new.txt": MOVED.replace("line 20 fixed\n", "line 20 reworded\n")}, "Reword 20", 104)
    (root / "kpatch.toml").write_text(one_upstream(up, base))
    return root


def test_a_rename_upstream_made_too_is_classed_upstream_by_patch_id(tmp_path: Path) -> None:
    """Upstream merged the patch (a rename with an edit) and later changed that line again: a 3-way apply of the
    patch conflicts, so only its patch-id, computed with rename detection on both sides, finds it upstream."""
    root = _project(tmp_path, upstream_renames=True)
    assert run_kpatch(root, "apply").exit_code == 0
    result = run_kpatch(root, "rebase", "--json")
    assert result.exit_code == 0, result.output
    patches = json.loads(result.stdout)["result"]["stacks"][0]["patches"]
    assert [p["class"] for p in patches] == ["upstream", "clean"]
    assert "same patch-id as upstream" in patches[0]["why"]
    assert not (root / "patches" / "up" / "0001-Move-old.txt-to-new.txt.patch").exists()


def test_a_rename_upstream_did_not_make_is_still_applied(tmp_path: Path) -> None:
    root = _project(tmp_path, upstream_renames=False)
    assert run_kpatch(root, "apply").exit_code == 0
    result = run_kpatch(root, "rebase", "--json")
    assert result.exit_code == 0, result.output
    assert [p["class"] for p in json.loads(result.stdout)["result"]["stacks"][0]["patches"]] == ["clean", "clean"]
    assert (root / "work" / "up" / "new.txt").read_text() == MOVED
