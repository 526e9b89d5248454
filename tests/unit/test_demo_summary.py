"""The demo's summary names only what is still there: a folder the demo removed takes its lock and report along."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kpatch.commands.demo import finish, show
from kpatch.dashboard.night import StageStatus
from kpatch.demo.pipeline import Backend, BackendChoice, DemoResult, Step
from kpatch.demo.scrolling import ScrollResult
from kpatch.output.ui import UI

LOCAL = BackendChoice(Backend.LOCAL, None, "--backend local: the wheels are built and tested on this host")
STEPS = (Step(name="example", seconds=0.1, status=StageStatus.PASSED, summary="two upstreams"),)


def _named_paths(text: str, under: Path) -> list[str]:
    return re.findall(re.escape(str(under)) + r"[^\s:;,)']*", text)


def _demo(folder: Path, *, kept: bool) -> DemoResult:
    lock = folder / "project" / "dist" / "pylock.toml"
    return DemoResult(folder=folder, kept=kept, backend=LOCAL, steps=STEPS, applied=None, moves=(), rebase=None,
                      build=None, verify=None, test=None, release=None, lock=lock,
                      wheels=(lock.parent / "app-1.0-py3-none-any.whl",), seconds=1.0)


def _scroll(folder: Path, *, kept: bool) -> ScrollResult:
    return ScrollResult(folder=folder, kept=kept, backend=LOCAL, steps=STEPS, applied=None, moves=(),
                        outcome="failed", summary="red", scroll=None,
                        report=folder / "project" / "reports" / "nightly" / "report.md", seconds=1.0)


def test_a_removed_demo_folder_is_named_once_as_removed_and_none_of_its_files_as_there(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gone = tmp_path / "kpatch-demo-gone"  # as the demo leaves it: removed
    show(UI(), _demo(gone, kept=False))
    plain = capsys.readouterr().out
    assert "lock:" not in plain and "look around" not in plain
    assert _named_paths(plain, gone) == [str(gone)]  # the folder, said to be removed
    assert f"{gone} was removed with all of it (the worktrees, the wheels and their lock, the reports)" in plain
    assert finish(UI(), _scroll(gone, kept=False), "scrolling demo") == 0
    scrolled = capsys.readouterr().out
    assert "report.md" not in scrolled and "the night's report:" not in scrolled
    assert f"{gone} was removed with all of it (the night's report with it): 'kpatch demo --scroll --keep'" in scrolled


def test_a_kept_demo_folder_names_its_lock_and_report_and_says_look_around(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    show(UI(), _demo(tmp_path, kept=True))
    plain = capsys.readouterr().out
    assert f"lock:    {tmp_path / 'project' / 'dist' / 'pylock.toml'}" in plain
    assert f"everything is in {tmp_path}; look around: cd {tmp_path / 'project'}" in plain
    finish(UI(), _scroll(tmp_path, kept=True), "scrolling demo")
    assert f"the night's report: {tmp_path / 'project' / 'reports' / 'nightly' / 'report.md'}" in \
        capsys.readouterr().out
