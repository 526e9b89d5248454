"""The rebase's scratch worktree: sparse (the stack's files) while git am runs, whole once a person resolves."""

from __future__ import annotations

import re
from pathlib import Path

from kpatch.errors import ExitCode
from tests.support.gitrepos import Project, git


def _rename_and_change(app: Path) -> None:
    git(app, "mv", "app/models/k3/nvidia/metadata.py", "app/models/k3/metadata.py")
    moved = app / "app/models/k3/metadata.py"
    moved.write_text(moved.read_text().replace("assert t.is_cuda", "assert t.is_cuda, 'cuda only'"))
    git(app, "add", "-A")
    git(app, "commit", "-qm", "move metadata", date=500)


def test_rebase_resolution_may_touch_a_file_no_patch_touched(project: Project) -> None:
    """The scratch is sparse (the stack's files) until a patch stops: then it holds every file, so a resolution
    that also edits a file no patch touches is committed (sparse, `git add -A` skipped it without a word)."""
    assert project.run("apply").exit_code == 0
    _rename_and_change(project.app)
    assert project.run("rebase").exit_code == ExitCode.CONFLICT
    scratch = project.workdir / ".rebase" / "app"
    meta = scratch / "app/models/k3/metadata.py"
    meta.write_text(re.sub(r"<<<<<<< .*?\n.*?=======\n(.*?)>>>>>>> .*?\n", r"\1", meta.read_text(), flags=re.S))
    ops = scratch / "app/ops.py"
    assert ops.exists(), "the scratch holds only the stack's paths: app/ops.py is not on disk"
    ops.write_text(ops.read_text() + "XPU_OK = True\n")
    git(scratch, "add", "-A")
    done = project.run("rebase", "--continue")
    assert done.exit_code == 0, done.output
    assert "XPU_OK" in git(project.workdir / "app", "show", "HEAD:app/ops.py")
