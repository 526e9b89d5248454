"""Every bad input: a one-line error naming the file (and line), its exit code, and nothing changed on disk."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from tests.support.cli import run_kpatch
from tests.support.gitrepos import Project


def _toml(project: Project, old: str, new: str) -> None:
    path = project.root / "kpatch.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def _toml_bytes(project: Project, old: bytes, new: bytes) -> None:
    path = project.root / "kpatch.toml"
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, new, 1))


def _series(project: Project, stack: str, text: str) -> None:
    (project.root / "patches" / stack / "series").write_text(text)


def _patch(project: Project, stack: str, name: str, edit: Callable[[str], str]) -> None:
    path = project.root / "patches" / stack / name
    path.write_text(edit(path.read_text()))


K1, K2 = "0001-Add-the-kimi-op.patch", "0002-Test-the-kimi-op.patch"
A1 = "0001-Route-k3-to-the-XPU-path.patch"

CASES: dict[str, tuple[Callable[[Project], None], ExitCode, str]] = {
    "unknown key": (lambda p: _toml(p, 'branch = "main"', 'branch = "main"\nbrnch = "x"'), ExitCode.BAD_INPUT,
                    r"kpatch\.toml:7: unknown key 'brnch' in \[\[upstream\]\] \(did you mean 'branch'\?\)$"),
    "missing field": (lambda p: _toml(p, 'branch = "main"\n', ""), ExitCode.BAD_INPUT,
                      r"kpatch\.toml:3: \[\[upstream\]\] is missing 'branch'"),
    "cycle": (lambda p: _toml(p, "requires = []", 'requires = ["app"]'), ExitCode.BAD_INPUT,
              r"kpatch\.toml:3: cycle in 'requires': app -> kernels -> app$"),
    "self cycle": (lambda p: _toml(p, "requires = []", 'requires = ["kernels"]'), ExitCode.BAD_INPUT,
                   r"kpatch\.toml:\d+: cycle in 'requires': kernels -> kernels$"),
    "a byte that is not UTF-8": (lambda p: _toml_bytes(p, b'branch = "main"', b'branch = "main" # caf\xe9'),
                                 ExitCode.BAD_INPUT, r"kpatch\.toml:6: not UTF-8 \(byte 0xe9 at column 22\)"),
    "unknown requires": (lambda p: _toml(p, 'requires = ["kernels"]', 'requires = ["kernelz"]'),
                         ExitCode.BAD_INPUT, r"kpatch\.toml:9: upstream 'app' requires unknown upstream 'kernelz'"),
    "bad toml": (lambda p: _toml(p, "version = 1", "version = = 1"), ExitCode.BAD_INPUT, r"kpatch\.toml: Invalid"),
    "series names a missing file": (lambda p: _series(p, "kernels", f"{K1}\n{K2}\n0003-gone.patch\n"),
                                    ExitCode.BAD_INPUT,
                                    r"kernels/series:3: patch file 0003-gone\.patch does not exist"),
    "a typo on a series line": (lambda p: _series(p, "kernels", f"{K1}\n0002-Test-the-kimi-opp.patch\n"),
                                ExitCode.BAD_INPUT, r"kernels/series:2: patch file 0002-Test-the-kimi-opp\.patch "
                                rf"does not exist \(the nearest file: {K2}\)$"),
    "patch not in series": (lambda p: _series(p, "kernels", f"{K1}\n"), ExitCode.BAD_INPUT,
                            rf"kernels/{K2}: patch file is not listed in .*kernels/series"),
    "duplicate series entry": (lambda p: _series(p, "kernels", f"{K1}\n# c\n{K2}\n{K1}\n"), ExitCode.BAD_INPUT,
                               rf"kernels/series:4: {K1} is listed twice \(first on line 1\)"),
    "series entry with a folder": (lambda p: _series(p, "kernels", f"../{K1}\n{K2}\n"), ExitCode.BAD_INPUT,
                                   r"kernels/series:1: '\.\./0001.*' is not a patch file name"),
    "malformed mbox": (lambda p: _patch(p, "kernels", K2, lambda t: "hello\n" + t), ExitCode.BAD_INPUT,
                       rf"{K2}:1: not a git format-patch mbox"),
    "mbox without diff": (lambda p: _patch(p, "kernels", K2, lambda t: t.split("diff --git")[0]),
                          ExitCode.BAD_INPUT, rf"{K2}: no 'diff --git' section"),
    "dot-dot path": (lambda p: _patch(p, "kernels", K2, lambda t: t.replace("b/tests/test_kimi.py", "b/../evil.py")),
                     ExitCode.BAD_INPUT, rf"{K2}:\d+: patch writes outside the worktree: '\.\./evil\.py'"),
    "absolute path": (lambda p: _patch(p, "kernels", K2, lambda t: t.replace("+++ b/tests/test_kimi.py",
                                                                            "+++ /etc/passwd")),
                      ExitCode.BAD_INPUT, rf"{K2}:\d+: path '/etc/passwd' lacks the a/ or b/ prefix"),
    "bad status trailer": (lambda p: _patch(p, "kernels", K2, lambda t: t.replace("Status: pending", "Status: maybe")),
                           ExitCode.BAD_INPUT, rf"{K2}:\d+: Upstream-Status must be pending, submitted or backport"),
    "requires unknown upstream": (lambda p: _patch(p, "app", A1, lambda t: t.replace("Requires: kernels/",
                                                                                    "Requires: kernelz/")),
                                  ExitCode.BAD_INPUT, rf"{A1}:\d+: Requires names unknown upstream 'kernelz'"),
    "requires unknown patch": (lambda p: _patch(p, "app", A1, lambda t: t.replace(K1, "0009-nope.patch")),
                               ExitCode.BAD_INPUT, rf"{A1}:\d+: Requires kernels/0009-nope\.patch, which is not"),
    "unknown --url name": (lambda p: None, ExitCode.BAD_INPUT, r"unknown upstream 'nope'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_clear_line_and_changes_nothing(project: Project, case: str) -> None:
    assert project.run("apply").exit_code == 0
    break_it, code, message = CASES[case]
    break_it(project)
    before = project.snapshot()
    args = ["apply", "--url", "nope=/x"] if case == "unknown --url name" else ["apply"]
    result = project.run(*args)
    assert result.exit_code == code, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and re.search(message, errors[0]), result.stderr
    assert project.snapshot() == before


def test_patch_through_a_symlink_is_refused(project: Project) -> None:
    from tests.support.gitrepos import git

    (project.kernels / "tests_link").symlink_to("tests")
    git(project.kernels, "add", "tests_link")
    git(project.kernels, "commit", "-q", "-m", "add a symlink")
    new_base = git(project.kernels, "rev-parse", "HEAD")
    _toml(project, project.kernels_base, new_base)
    _patch(project, "kernels", K2, lambda t: t.replace("b/tests/test_kimi.py", "b/tests_link/test_kimi.py"))
    before = project.snapshot()
    result = project.run("apply")
    assert result.exit_code == ExitCode.BAD_INPUT
    assert f"{K2}: patch writes 'tests_link/test_kimi.py' through the symlink 'tests_link'" in result.stderr
    assert project.snapshot() == before


def test_usage_errors(project: Project) -> None:
    assert project.run("apply", "--continue", "--abort").exit_code == ExitCode.BAD_INPUT
    assert project.run("apply", "--onto", "kernels").exit_code == ExitCode.BAD_INPUT
    assert project.run("export", "nope").exit_code == ExitCode.BAD_INPUT
    assert project.run("apply", "--bogus").exit_code == ExitCode.BAD_INPUT  # click's own usage error


def test_missing_config(tmp_path: Path) -> None:
    result = run_kpatch(tmp_path, "status")
    assert result.exit_code == ExitCode.BAD_INPUT and "no kpatch.toml in" in result.stderr
    assert "make one here with 'kpatch init', or see one with 'kpatch demo --keep'" in result.stderr  # next steps


def test_export_without_worktree(project: Project) -> None:
    result = project.run("export")
    assert result.exit_code == ExitCode.WORKTREE and "run 'kpatch apply' first" in result.stderr


@pytest.mark.parametrize("text", ["{not json", '{"version": 2, "workdir": 3}', '{"version": 1, "upstreams": {}}',
                                  "[]", b"\xff\xfe not utf-8"])
def test_corrupt_apply_state_is_a_clear_error(project: Project, text: str | bytes) -> None:
    assert project.run("apply").exit_code == 0
    (project.root / ".kpatch" / "state.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    before = project.snapshot()
    result = project.run("status")
    assert result.exit_code == ExitCode.WORKTREE and "state.json: " in result.stderr
    assert project.snapshot() == before


def test_crash_boundary_writes_a_log_and_exits_70(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug (any exception kpatch did not raise on purpose) becomes exit 70 and a crash log; Ctrl-C is 130."""
    import tempfile

    from kpatch.cli import guarded
    from kpatch.output.ui import UI

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def bug() -> int:
        missing: dict[str, int] = {}
        return missing["missing"]

    def interrupted() -> int:
        raise KeyboardInterrupt

    assert guarded(UI(), bug) == ExitCode.INTERNAL
    crash = next(tmp_path.glob("kpatch-crash-*.log"))
    assert "KeyError: 'missing'" in crash.read_text() and "Python" in crash.read_text()
    assert crash.stat().st_mode & 0o777 == 0o600
    assert guarded(UI(), interrupted) == ExitCode.INTERRUPTED


def test_crash_log_never_writes_through_a_planted_symlink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old predictable name `kpatch-crash-<pid>.log` planted as a symlink: its target stays untouched."""
    import os
    import tempfile

    from kpatch.cli import guarded
    from kpatch.output.ui import UI

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / f"kpatch-crash-{os.getpid()}.log").symlink_to(victim)
    assert guarded(UI(), lambda: int({}["x"])) == ExitCode.INTERNAL  # type: ignore[index]
    assert victim.read_text() == "precious\n"
    logs = [p for p in tmp_path.glob("kpatch-crash-*.log") if not p.is_symlink()]
    assert len(logs) == 1 and "KeyError" in logs[0].read_text()


def test_a_rebase_tells_a_broken_patch_before_an_upstream_it_cannot_fetch(project: Project) -> None:
    """The stack is read while git fetches the upstream: when both fail, the patch's error is the one told, as when
    the stack was read before anything was fetched."""
    assert project.run("apply").exit_code == 0
    _patch(project, "kernels", K2, lambda t: "hello\n" + t)
    before = project.snapshot()
    result = project.run("rebase", "--url", f"kernels={project.root / 'no-such-upstream'}")
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    assert len(errors) == 1 and re.search(rf"{K2}:1: not a git format-patch mbox", errors[0]), result.stderr
    assert project.snapshot() == before
