"""Answers that are true, on real repositories: a verify that checked nothing fails, doctor needs a kpatch.toml,
a rebase says what it wrote, export's `written`, the real scratch path, one GitHub note, logs kept in check."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kpatch import __version__
from kpatch.errors import ExitCode
from kpatch.examples.upstreams import commit
from tests.support.cli import kpatch, run_kpatch
from tests.support.gitrepos import Project, git
from tests.support.rebase_repos import RebaseProject

NO_ENGINE = "unix:///nonexistent/docker.sock"


def test_verify_that_checked_nothing_fails_and_says_so(project: Project) -> None:
    """A fresh checkout (no lock, nothing applied): every check is a skip, so nothing was verified."""
    human = project.run("verify")
    assert human.exit_code == ExitCode.CONFLICT, human.output
    lines = human.stdout.splitlines()
    assert any(line.startswith("skip  contract") and "not read" in line for line in lines)
    assert any(line.startswith("fail  verify") and "nothing was verified" in line for line in lines)
    assert lines[-1] == "verify FAILED"
    envelope = json.loads(project.run("verify", "--json").stdout)
    assert envelope["ok"] is False and envelope["result"]["checks"][-1]["area"] == "verify"
    assert envelope["error"]["exit_code"] == 1 and envelope["error"]["message"].startswith("verify failed")


def test_verify_with_the_contract_read_passes(project: Project) -> None:
    assert project.run("apply").exit_code == 0
    result = project.run("verify")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "verify passed" and "nothing checked" not in result.stdout


def test_verify_table_lines_end_without_spaces(project: Project) -> None:
    result = kpatch(project.root, "verify")
    assert result.stdout and all(line == line.rstrip() for line in result.stdout.splitlines()), result.stdout


def test_doctor_without_a_kpatch_toml_is_not_ready(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    result = run_kpatch(tmp_path, "doctor")
    assert result.exit_code == ExitCode.CONFLICT, result.output
    assert result.stdout.splitlines()[0].startswith("fail config   no kpatch.toml in")
    assert result.stdout.splitlines()[-1] == "doctor: 1 thing needed is missing"


def test_a_rebase_that_changed_no_file_says_so_and_offers_no_git_diff(project: Project) -> None:
    assert project.run("apply").exit_code == 0
    assert project.run("rebase").exit_code == 0  # pins the bases as commits: kpatch.toml changes
    result = project.run("rebase")  # nothing moved since
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "kpatch.toml and patches/ unchanged: the rebase gave the same files"
    assert "git diff" not in result.output and "0 file(s)" not in result.output


def test_a_rebase_counts_the_files_it_changed_and_names_git_diff_only_in_a_git_checkout(project: Project) -> None:
    assert project.run("apply").exit_code == 0
    commit(project.kernels, {"NEWS.md": "upstream moved\n"}, "upstream news", 90)
    commit(project.app, {"NEWS.md": "upstream moved\n"}, "upstream news", 91)
    outside = project.run("rebase")
    assert outside.exit_code == 0, outside.output
    assert outside.stdout.splitlines()[-1] == "kpatch.toml and patches/ updated (1 file)"  # the new bases
    commit(project.kernels, {"NEWS.md": "upstream moved again\n"}, "more upstream news", 92)
    git(project.root, "init", "--quiet")
    inside = project.run("rebase")
    assert inside.exit_code == 0, inside.output
    assert inside.stdout.splitlines()[-1] == "kpatch.toml and patches/ updated (1 file); review with 'git diff'"


def test_the_github_note_is_said_once_on_stderr(project: Project) -> None:
    assert project.run("apply").exit_code == 0
    result = kpatch(project.root, "rebase")
    assert result.exit_code == 0, result.output
    assert "GitHub unreachable" not in result.stdout
    assert result.stderr.count("GitHub unreachable") == 1


def test_export_json_written_is_false_when_every_file_is_unchanged(project: Project) -> None:
    assert project.run("apply").exit_code == 0
    same = json.loads(project.run("export", "--json").stdout)["result"]
    assert {f["change"] for f in same["files"]} == {"unchanged"} and same["written"] is False
    tree = project.workdir / "app"
    (tree / "NEWS.md").write_text("ours\n")
    git(tree, "add", "NEWS.md")
    git(tree, "commit", "--quiet", "--message", "Add news")
    changed = json.loads(project.run("export", "--json").stdout)["result"]
    assert changed["written"] is True


def test_a_rebase_conflict_names_the_real_scratch_worktree(rp: RebaseProject) -> None:
    result = rp.run("rebase")
    assert result.exit_code == ExitCode.CONFLICT, result.output
    assert f"resolve it in {rp.root / 'work' / '.rebase' / 'kernels'}, 'git add'" in result.output
    assert "<name>" not in result.output


def test_a_command_refused_during_an_apply_says_an_apply(project: Project) -> None:
    moved = commit(project.kernels, {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.26)\nproject(kernels)\n"
                                     "set(VLLM_EXT_SRC\n  \"csrc/cache.cpp\"\n  \"csrc/norm.cpp\"\n"
                                     "  \"csrc/torch_bindings.cpp\"\n)\n"}, "rename layernorm", 99)
    assert project.run("apply", "--onto", f"kernels={moved}").exit_code == ExitCode.CONFLICT
    refused = project.run("rebase")
    assert refused.exit_code == ExitCode.WORKTREE
    assert "error: an apply is in progress" in refused.output and "a apply" not in refused.output
    assert "an apply is in progress" in project.run("status").stdout


def _logs(cache: Path) -> list[str]:
    return sorted(p.name for p in (cache / "logs").glob("kpatch-*.log")) if (cache / "logs").is_dir() else []


def test_readers_that_succeed_write_no_log_and_the_newest_logs_are_kept(project: Project) -> None:
    cache = project.root / "cache"
    env = {"KPATCH_CACHE_DIR": str(cache), "KPATCH_LOG_KEEP": "2"}
    failed = kpatch(project.root, "verify", env=env)  # nothing applied: verify fails, and keeps its log
    assert failed.exit_code == ExitCode.CONFLICT and [n for n in _logs(cache) if n.endswith("-verify.log")]
    for _ in range(3):
        assert kpatch(project.root, "apply", env=env).exit_code == 0
    kept = _logs(cache)
    assert len(kept) == 2 and all(name.endswith("-apply.log") for name in kept), kept
    for reader in (["status"], ["export", "--check"], ["verify"]):
        assert kpatch(project.root, *reader, env=env).exit_code == 0, reader
    assert _logs(cache) == kept  # readers that succeed leave nothing


def test_a_failing_reader_names_its_log_and_the_log_holds_the_run(project: Project) -> None:
    env = {"KPATCH_CACHE_DIR": str(project.root / "cache")}
    result = kpatch(project.root, "verify", "--lock", "missing.toml", env=env)
    assert result.exit_code == ExitCode.BAD_INPUT
    logs = list((project.root / "cache" / "logs").glob("kpatch-*-verify.log"))
    assert len(logs) == 1 and f"log: {logs[0]}" in result.stderr
    assert "ERROR kpatch: no lock at" in logs[0].read_text()


def test_a_bad_log_keep_is_a_clear_error(project: Project) -> None:
    result = kpatch(project.root, "status", env={"KPATCH_LOG_KEEP": "many"})
    assert result.exit_code == ExitCode.BAD_INPUT
    assert result.errors() == ["error: KPATCH_LOG_KEEP='many': give how many run logs to keep, a whole number "
                               "(0: none)"]


def test_version_names_the_commit_of_the_checkout_it_runs_from(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[2]
    if not (source / ".git").exists():
        pytest.skip("kpatch does not run from a git checkout here")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True,
                          check=True).stdout.strip()
    result = kpatch(tmp_path, "--version")
    assert result.exit_code == 0 and result.stdout == f"kpatch {__version__} (commit {head[:12]})\n"


def test_an_engine_that_refuses_the_connection_is_one_line_naming_it(project: Project,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert project.run("apply").exit_code == 0
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    result = kpatch(project.root, "build-wheels", "--backend", "docker")  # auto would build on this host
    assert result.exit_code == ExitCode.BUILD
    assert result.errors() == ["error: no Docker engine at tcp://127.0.0.1:1 (Connection refused): start one (as "
                               "root: 'dockerd &'), or point DOCKER_HOST at one (e.g. ssh://xpu-build-host)"]
