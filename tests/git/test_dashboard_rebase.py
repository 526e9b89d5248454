"""Every `kpatch rebase` (not only the nightly's) appends to the carry history (kpatch.toml's, else the default
one): real repositories, a real conflict with its culprit, then the person's --continue."""

from __future__ import annotations

from pathlib import Path

from kpatch.dashboard import history
from kpatch.errors import ExitCode
from tests.git.test_rebase import resolve_c
from tests.support.rebase_repos import RebaseProject


def _configure(rp: RebaseProject, value: str = "carry/history.jsonl") -> Path:
    toml = rp.root / "kpatch.toml"
    toml.write_text(toml.read_text() + f'\n[dashboard]\nhistory = "{value}"\n')
    return rp.root / value


def test_a_conflicting_rebase_appends_each_patch_its_class_and_the_culprit(rp: RebaseProject) -> None:
    path = _configure(rp)
    result = rp.run("rebase")
    assert result.exit_code == ExitCode.CONFLICT, result.output
    held = history.read(path)
    assert held.nights == ()  # a rebase is no night: its patches only
    kernels = [(p.patch, p.klass) for p in held.patches if p.upstream == "kernels"]
    assert [k for _, k in kernels] == ["upstream", "upstream", "conflict", "clean"]
    (conflict,) = [p for p in held.patches if p.conflict]
    assert conflict.culprit == rp.culprit and conflict.culprit_subject == "Rewrite c"
    assert conflict.behind == 70 and conflict.lines and conflict.pr_state is None
    assert "carry history:" in result.output


def test_the_continue_that_resolves_it_replaces_the_days_records_with_the_resolved_classes(
        rp: RebaseProject) -> None:
    path = _configure(rp)
    assert rp.run("rebase").exit_code == ExitCode.CONFLICT
    resolve_c(rp)
    result = rp.run("rebase", "--continue")
    assert result.exit_code == 0, result.output
    held = history.read(path)
    kernels = [p.klass for p in held.patches if p.upstream == "kernels"]
    assert kernels == ["upstream", "upstream", "three-way", "clean"]  # one record per patch per day: the last
    assert not any(p.conflict for p in held.patches)


def test_without_a_configured_history_rebases_keep_the_default_one_and_report_reads_it(
        rp: RebaseProject, tmp_path: Path) -> None:
    """README: "the nightly and every rebase append to a carry history" with no [dashboard] table: the default
    reports/nightly/history.jsonl, which `kpatch report` reads (the page, and bare: a summary)."""
    assert rp.run("rebase").exit_code == ExitCode.CONFLICT
    default = rp.root / "reports" / "nightly" / history.NAME
    assert [p.klass for p in history.read(default).patches if p.upstream == "kernels"] == \
        ["upstream", "upstream", "conflict", "clean"]
    resolve_c(rp)
    assert rp.run("rebase", "--continue").exit_code == 0
    page = rp.run("report", "--html", str(tmp_path / "site"))
    assert page.exit_code == 0, page.output
    assert (tmp_path / "site" / "index.html").is_file()
    bare = rp.run("report")
    assert bare.exit_code == 0, bare.output
    assert bare.stdout.startswith(f"carry history {default}: 0 nights, ")
    assert "three-way" in bare.stdout and "kpatch report --html DIR" in bare.stdout


def test_a_history_that_cannot_be_written_is_a_warning_and_the_rebase_keeps_its_exit_code(
        rp: RebaseProject) -> None:
    path = _configure(rp, "carry")
    path.mkdir()
    result = rp.run("rebase")
    assert result.exit_code == ExitCode.CONFLICT, result.output
    assert "warning: carry history not updated:" in result.output
