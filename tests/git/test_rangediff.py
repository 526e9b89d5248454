"""What a rebase did to each patch (unchanged, changed with its interdiff, dropped, new), read from `git range-diff`
itself, on the rebase example: one patch only moves, one gets a real interdiff, two are dropped."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from kpatch import config
from kpatch.errors import ExitCode
from kpatch.examples.upstreams import commit
from kpatch.project.workspace import Workspace
from tests.support.rebase_repos import FILES, RebaseProject, replace_line


def move_d(rp: RebaseProject) -> None:
    """Upstream puts two lines at the top of d.txt (Fix d's line moves) and rewrites line 18 (in Fix d's context)."""
    moved = "d header 1\nd header 2\n" + replace_line(FILES["d"], 18, "d line 18 reworded upstream")
    commit(rp.kernels, {"d.txt": moved}, "Move d", 900)


def rebase_through_the_conflict(rp: RebaseProject, *args: str) -> Any:
    """Rebase; resolve Fix c by hand (its own line changes: a real interdiff); go on."""
    assert rp.run("rebase").exit_code == ExitCode.CONFLICT
    tree = rp.root / "work" / ".rebase" / "kernels"
    (tree / "c.txt").write_text(replace_line(FILES["c"], 15, "c line 15 rewritten upstream, fixed by us"))
    subprocess.run(["git", "add", "c.txt"], cwd=tree, check=True)
    return rp.run("rebase", "--continue", *args)


def review(payload: dict[str, Any], stack: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in payload["stacks"] if s["upstream"] == stack)["review"]
    return found


def mirror(rp: RebaseProject, name: str) -> Path:
    return Workspace.create(config.load(rp.root / "kpatch.toml"), None, None).mirror(name).path


def test_rebase_classes_each_patch_moved_changed_dropped(rp: RebaseProject) -> None:
    move_d(rp)
    result = rebase_through_the_conflict(rp, "--json")
    assert result.exit_code == 0, result.output
    kernels = review(json.loads(result.stdout)["result"], "kernels")
    changes = {p["name"]: p["change"] for p in kernels["patches"]}
    assert changes == {"0001-Fix-a.patch": "dropped", "0002-Fix-b.patch": "dropped", "0003-Fix-c.patch": "changed",
                       "0004-Fix-d.patch": "unchanged"}
    by_name = {p["name"]: p for p in kernels["patches"]}
    interdiff = by_name["0003-Fix-c.patch"]["interdiff"]
    assert "    -+c line 15 fixed by us\n" in interdiff
    assert "    ++c line 15 rewritten upstream, fixed by us\n" in interdiff
    # Fix d's context moved (range-diff shows it with `!`), its own lines did not: unchanged, the interdiff kept.
    assert " ! " in by_name["0004-Fix-d.patch"]["interdiff"].splitlines()[0]
    assert "d line 18 reworded upstream" in by_name["0004-Fix-d.patch"]["interdiff"]
    assert by_name["0001-Fix-a.patch"]["new_commit"] is None
    app = review(json.loads(result.stdout)["result"], "app")
    assert [p["change"] for p in app["patches"]] == ["unchanged", "unchanged"]
    assert all(" = " in p["interdiff"] for p in app["patches"])


def test_rebase_review_is_git_range_diff_byte_for_byte(rp: RebaseProject) -> None:
    move_d(rp)
    result = rebase_through_the_conflict(rp, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)["result"]
    for name in ("kernels", "app"):
        stack = review(payload, name)
        olds = [p["old_commit"] for p in stack["patches"] if p["old_commit"]]
        news = [p["new_commit"] for p in stack["patches"] if p["new_commit"]]
        git = subprocess.run(["git", "range-diff", "--no-color", f"{stack['old_base']}..{olds[-1]}",
                              f"{stack['new_base']}..{news[-1]}"], cwd=mirror(rp, name), capture_output=True,
                             check=True).stdout.decode()
        assert stack["range_diff"] == git
        assert "".join(p["interdiff"] for p in stack["patches"]) == git
        # the new side is the rebased commits themselves, the ones the worktree now holds
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=rp.root / "work" / name, capture_output=True,
                              text=True, check=True).stdout.strip()
        assert news[-1] == head


def test_rebase_prints_the_counts_and_names_the_changed(rp: RebaseProject) -> None:
    move_d(rp)
    result = rebase_through_the_conflict(rp)
    assert result.exit_code == 0, result.output
    assert "kernels patches: 1 unchanged, 1 changed (0003-Fix-c.patch), 2 dropped, 0 new" in result.stdout
    assert "app patches: 2 unchanged, 0 changed, 0 dropped, 0 new" in result.stdout
