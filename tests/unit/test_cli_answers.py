"""The CLI says what is true: usage hints, counts and articles, tables without trailing spaces, colour when asked,
the environment variables the docs document, and the commit of a checkout in --version."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kpatch.cli import main
from kpatch.commands import doctor as doctor_command
from kpatch.commands import status as status_command
from kpatch.commands._views import show_rebase
from kpatch.doctor import DoctorReport, Finding, Level
from kpatch.engine.reports import Outcome, PatchReport, RebaseResult, StackReport
from kpatch.engine.status import StatusResult, UpstreamReport
from kpatch.gitx.checkout import git_dir, head_commit
from kpatch.output.ui import UI, article, count, styled_columns
from kpatch.project.state import Culprit, PatchClass
from tests.support.cli import all_commands
from tests.support.readme import all_text

SHA = "0123456789abcdef0123456789abcdef01234567"


def test_a_mistyped_command_points_at_kpatch_help_not_a_group_named_main() -> None:
    result = CliRunner().invoke(main, ["aply"])
    assert result.exit_code == 2
    assert "Did you mean 'apply'? (see 'kpatch --help')" in result.output
    assert "kpatch main" not in result.output


@pytest.mark.parametrize(("typed", "meant"), [("stauts", "status"), ("build-wheel", "build-wheels"),
                                              ("rebsae", "rebase"), ("reprot", "report")])
def test_a_misspelt_command_is_answered_with_the_nearest_one(typed: str, meant: str) -> None:
    result = CliRunner().invoke(main, [typed])
    assert result.exit_code == 2
    assert f"error: No such command '{typed}'. Did you mean '{meant}'? (see 'kpatch --help')" in result.output
    far = CliRunner().invoke(main, ["xyzzy"])
    assert far.exit_code == 2 and "Did you mean" not in far.output


def test_a_misspelt_config_key_is_answered_with_the_key_it_meant(tmp_path: Path) -> None:
    toml = tmp_path / "kpatch.toml"
    toml.write_text('version = 1\n\n[[upstream]]\nname = "k"\nurl = "/nowhere"\nbranc = "main"\n'
                    'base = "' + "a" * 40 + '"\npatches = "patches/k"\n')
    result = CliRunner().invoke(main, ["status", "--config", str(toml)])
    assert result.exit_code == 2
    assert f"error: {toml}:6: unknown key 'branc' in [[upstream]] (did you mean 'branch'?)" in result.output
    toml.write_text(toml.read_text().replace("branc", "branch") + '[github]\nrepositry = "o/r"\n')
    again = CliRunner().invoke(main, ["status", "--config", str(toml)])
    assert "unknown key 'repositry' in [github] (did you mean 'repository'?)" in again.output


def test_a_bad_option_points_at_its_command_help() -> None:
    result = CliRunner().invoke(main, ["apply", "--bogus"])
    assert result.exit_code == 2 and "(see 'kpatch apply --help')" in result.output


def test_counts_and_articles_read_as_english() -> None:
    assert [count(n, "commit") for n in (0, 1, 2)] == ["0 commits", "1 commit", "2 commits"]
    assert count(1, "trial apply", "trial applies") == "1 trial apply"
    assert count(3, "trial apply", "trial applies") == "3 trial applies"
    assert [article(w) for w in ("apply", "rebase", "export")] == ["an apply", "a rebase", "an export"]


def _status(behind: int, operation: str | None) -> StatusResult:
    report = UpstreamReport(name="k", url="/u", branch="main", base=SHA, base_commit=SHA, mirror_head=SHA,
                            behind=behind, worktree=Path("/w"), head=SHA, unexported=1, patches=())
    return StatusResult(upstreams=(report,), operation=operation, journal=None)


def test_status_says_one_commit_behind_and_an_apply_in_progress(capsys: pytest.CaptureFixture[str]) -> None:
    status_command.show(UI(), _status(1, "apply"))
    out = capsys.readouterr().out
    assert "; 1 commit behind" in out and "an apply is in progress" in out
    assert "1 worktree commit not in the patch files" in out
    assert "commits behind" not in out and "a apply" not in out and "(s)" not in out


def test_a_culprit_found_in_one_trial_over_one_commit_is_said_in_the_singular(
        capsys: pytest.CaptureFixture[str]) -> None:
    culprit = Culprit(sha=SHA, subject="Rewrite c", author="A", date="2026-01-01", trials=1, commits=1)
    patch = PatchReport(upstream="kernels", name="0001-x.patch", klass=PatchClass.CONFLICT, applied=False, why="",
                        commit=None, hunks=(), culprit=culprit)
    stack = StackReport(name="kernels", old_base=SHA, new_base=SHA, outcome=Outcome.CONFLICT, patches=(patch,))
    show_rebase(UI(), RebaseResult(stacks=(stack,), github=None, committed=False), Path("/p/work/.rebase"))
    out, err = capsys.readouterr()
    assert "found in 1 trial apply over 1 commit" in out and "commits" not in out
    assert "resolve it in /p/work/.rebase/kernels," in err and "<name>" not in err


def test_doctor_counts_what_is_missing_in_the_singular(capsys: pytest.CaptureFixture[str]) -> None:
    doctor_command.show(UI(), DoctorReport(findings=(Finding("git", Level.FAIL, "no git", "install git"),)))
    assert capsys.readouterr().out.splitlines()[-1] == "doctor: 1 thing needed is missing"


def test_columns_with_a_style_keep_no_trailing_spaces() -> None:
    lines = styled_columns([["", "check", "detail"], ["pass", "wheel", "ok"], ["", "", "next: x"]],
                           [None, "green", None])
    assert lines == ["      check  detail", "[green]pass[/]  wheel  ok", "             next: x"]
    assert all(line == line.rstrip() for line in lines)


def test_force_color_colours_a_pipe_and_no_color_wins(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    UI().line("[green]passed[/]")
    assert "\x1b[" in capsys.readouterr().out
    monkeypatch.setenv("NO_COLOR", "1")
    UI().line("[green]passed[/]")
    assert capsys.readouterr().out == "passed\n"


def _environment_table() -> dict[str, str]:
    """Every `KPATCH_X` the README or docs/ say sets an option where the option is not given: {option: variable}."""
    text = all_text()
    found = {option: var for var, option in re.findall(r"`(KPATCH_[A-Z_]+)` where `(--[a-z-]+)`", text)}
    found.update({option: var for option, var in re.findall(r"`(--[a-z-]+)` \([^)]*?default `\$(KPATCH_[A-Z_]+)`",
                                                            text)})
    return found


ENVIRONMENT = _environment_table()
CASES = [(name, option, var) for option, var in sorted(ENVIRONMENT.items())
         for name, command in sorted(all_commands().items())
         if any(option in param.opts for param in command.params)]


def test_the_readme_names_the_environment_variables_it_documents() -> None:
    assert ENVIRONMENT == {"--cache-dir": "KPATCH_CACHE_DIR", "--base-image": "KPATCH_BASE_IMAGE"}
    assert {option for _, option, _ in CASES} == set(ENVIRONMENT)


@pytest.mark.parametrize(("name", "option", "var"), CASES, ids=[f"{n}{o}" for n, o, _ in CASES])
def test_every_command_reads_the_environment_variable_the_readme_names(name: str, option: str, var: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(var, "from-the-environment")
    command = all_commands()[name]
    param = next(p for p in command.params if option in p.opts)
    with command.make_context(name, [], resilient_parsing=True) as ctx:
        value = ctx.params[param.name or ""]
        assert str(value) == "from-the-environment", f"kpatch {name} {option} ignores ${var}"
        assert ctx.get_parameter_source(param.name or "") is click.core.ParameterSource.ENVIRONMENT


def _git_folder(root: Path, head: str) -> Path:
    gitdir = root / ".git"
    (gitdir / "refs" / "heads").mkdir(parents=True)
    (gitdir / "HEAD").write_text(head)
    return gitdir


def test_head_commit_reads_a_loose_a_packed_and_a_detached_head(tmp_path: Path) -> None:
    loose = _git_folder(tmp_path / "loose", "ref: refs/heads/main\n")
    (loose / "refs" / "heads" / "main").write_text(SHA + "\n")
    packed = _git_folder(tmp_path / "packed", "ref: refs/heads/main\n")
    (packed / "packed-refs").write_text(f"# pack-refs with: peeled\n{SHA[::-1]} refs/heads/main\n")
    detached = _git_folder(tmp_path / "detached", SHA + "\n")
    assert [head_commit(g) for g in (loose, packed, detached)] == [SHA, SHA[::-1], SHA]
    assert head_commit(tmp_path / "nothing") is None


def test_head_commit_follows_a_linked_worktree_to_its_main_folder(tmp_path: Path) -> None:
    main_git = _git_folder(tmp_path / "main", "ref: refs/heads/main\n")
    (main_git / "refs" / "heads" / "topic").write_text(SHA + "\n")
    linked = main_git / "worktrees" / "topic"
    linked.mkdir(parents=True)
    (linked / "HEAD").write_text("ref: refs/heads/topic\n")
    (linked / "commondir").write_text("../..\n")
    tree = tmp_path / "topic"
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {linked}\n")
    found = git_dir(tree / "sub" / "folder", above=True)
    assert found is not None and head_commit(found) == SHA
