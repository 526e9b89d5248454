"""How the upstream commits behind a patch read in a rebase's human output: a few, then how many more; an upstream
subject's terminal escapes written out, not obeyed."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpatch.commands._views import show_rebase
from kpatch.engine.evidence import UpstreamCommit
from kpatch.engine.reports import Outcome, PatchReport, RebaseResult, StackReport
from kpatch.output.ui import UI
from kpatch.project.state import PatchClass

SHA = "0123456789abcdef0123456789abcdef01234567"


def _upstream(n: int, subject: str = "Upstream change") -> UpstreamCommit:
    return UpstreamCommit(sha=f"{n:x}" * 40, subject=f"{subject} {n} (#{100 + n})", author=f"Dev {n} <d@x.invalid>",
                          date=f"2026-11-0{n}T10:00:00+00:00", pr=100 + n,
                          link=f"https://github.com/o/r/pull/{100 + n}")


def _shown(capsys: pytest.CaptureFixture[str], commits: tuple[UpstreamCommit, ...]) -> list[str]:
    patch = PatchReport(upstream="kernels", name="0001-x.patch", klass=PatchClass.CONFLICT, applied=False, why="",
                        commit=None, hunks=(),
                        culprit=None, upstream_commits=commits)
    stack = StackReport(name="kernels", old_base=SHA, new_base=SHA, outcome=Outcome.CONFLICT, patches=(patch,))
    show_rebase(UI(), RebaseResult(stacks=(stack,), github=None, committed=False), Path("/p/work/.rebase"))
    out = capsys.readouterr().out.splitlines()
    return out[out.index("  0001-x.patch (conflict): touched upstream by " + f"{len(commits)} commits"):]


def test_a_patch_shows_three_upstream_commits_then_how_many_more(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _shown(capsys, tuple(_upstream(n) for n in range(1, 6)))
    assert lines[1] == f'    {"1" * 12} "Upstream change 1 (#101)" (Dev 1, 2026-11-01) https://github.com/o/r/pull/101'
    assert [line.split()[0] for line in lines[1:4]] == ["1" * 12, "2" * 12, "3" * 12]
    assert lines[4] == "    and 2 more (--json lists them all)"


def test_an_upstream_subjects_terminal_escapes_are_written_out(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _shown(capsys, (_upstream(1, "Fix \x1b]8;;https://evil.invalid\x07c\x1b[2J\u202e"), _upstream(2)))
    assert "\x1b" not in "".join(lines) and "\x07" not in "".join(lines) and "\u202e" not in "".join(lines)
    assert '"Fix \\x1b]8;;https://evil.invalid\\x07c\\x1b[2J\\u202e 1 (#101)"' in lines[1]
