"""The journal makes its staged files durable with fsyncs side by side (no syncfs): a kill at any step still ends
fully old or new."""

from __future__ import annotations

import pytest

from kpatch.examples.upstreams import commit
from kpatch.project.journal import KILL_HOOK
from tests.support.cli import Ran
from tests.support.cli import kpatch as run
from tests.support.gitrepos import Project


def patch_files(project: Project) -> dict[str, bytes]:
    folder = project.root / "patches"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def kpatch(project: Project, *args: str, kill_at: str | None = None) -> Ran:
    return run(project.root, *args, env={KILL_HOOK: kill_at} if kill_at else None)


@pytest.mark.parametrize("step", [0, 1, 3])
def test_an_export_killed_at_a_journal_step_continues_to_new_or_aborts_to_old(project: Project, step: int) -> None:
    assert kpatch(project, "apply").exit_code == 0
    tree = project.workdir / "kernels"
    for n, name in enumerate(("more", "most")):
        commit(tree, {f"tests/test_{name}.py": f"def test_{name}():\n    assert True\n"},
               f"Test {name}\n\nUpstream-Status: pending\n", 2000 + n)
    old = patch_files(project)
    killed = kpatch(project, "export", kill_at=f"journal:{step}")
    assert killed.exit_code == -9
    assert kpatch(project, "export", "--abort").exit_code == 0
    assert patch_files(project) == old
    assert kpatch(project, "export", kill_at=f"journal:{step}").exit_code == -9
    done = kpatch(project, "export", "--continue")
    assert done.exit_code == 0, done.stderr
    new = patch_files(project)
    assert new != old and "0003-Test-more.patch" in new["kernels/series"].decode()
    assert kpatch(project, "export", "--check").exit_code == 0
