"""Output for people: no escape codes under NO_COLOR (even on a terminal), --quiet, --verbose, shell completion,
a closed pipe."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from kpatch.cli import COMMANDS
from kpatch.errors import ExitCode
from tests.support.cli import environment
from tests.support.gitrepos import Project

ESC = b"\x1b"


def _on_a_terminal(project: Project, *args: str, env: dict[str, str]) -> bytes:
    """kpatch's own output with stdout and stderr on a pseudo-terminal, as a person at a shell sees it."""
    main, child = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "kpatch", *args], cwd=project.root, stdin=subprocess.DEVNULL,
                                stdout=child, stderr=child, env={**os.environ, "TERM": "xterm-256color", **env})
        os.close(child)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=120) == 0
        return b"".join(chunks)
    finally:
        os.close(main)


def test_no_color_output_has_no_escape_codes_on_a_terminal(project: Project) -> None:
    assert project.run("apply").exit_code == 0
    plain_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    coloured = _on_a_terminal(project, "status", env={**plain_env, "NO_COLOR": ""})
    assert ESC in coloured  # on a terminal kpatch styles its output (bold names): the check below can fail
    plain = _on_a_terminal(project, "status", env={**plain_env, "NO_COLOR": "1"})
    assert ESC not in plain and b"kernels" in plain and b"applied" in plain


def test_piped_output_is_coloured_only_with_force_color_and_never_with_no_color(project: Project) -> None:
    def status(**env: str) -> bytes:
        base = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE")}
        done = subprocess.run([sys.executable, "-m", "kpatch", "status"], cwd=project.root, capture_output=True,
                              env={**base, "TERM": "xterm-256color", **env})
        assert done.returncode == 0 and b"kernels" in done.stdout
        return done.stdout

    assert ESC not in status()
    assert ESC in status(FORCE_COLOR="1")  # force-color.org: colour on a pipe too
    assert ESC not in status(FORCE_COLOR="1", NO_COLOR="1")  # NO_COLOR wins


def test_quiet_prints_results_only_and_verbose_adds_the_debug_log(project: Project) -> None:
    quiet = project.run("apply", "--quiet")
    assert quiet.exit_code == 0 and quiet.stderr == "" and "kernels  applied" in quiet.stdout
    verbose = project.run("status", "--verbose")
    assert verbose.exit_code == 0
    assert any(line.startswith("debug: kpatch.git: git ") for line in verbose.stderr.splitlines())
    after = project.run("status")  # the next command is not verbose by accident
    assert "debug:" not in after.stderr


def test_shell_completion_as_the_readme_documents(tmp_path: Path) -> None:
    kpatch = Path(sys.executable).parent / "kpatch"
    env = {**os.environ, "_KPATCH_COMPLETE": "bash_complete", "COMP_WORDS": "kpatch do", "COMP_CWORD": "1"}
    done = subprocess.run([str(kpatch)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.split() == ["plain,doctor"]
    source = subprocess.run([str(kpatch)], capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, "_KPATCH_COMPLETE": "bash_source"})
    assert "complete -o nosort -F _kpatch_completion kpatch" in source.stdout


def test_shell_completion_completes_upstream_names_patch_names_and_onto_assignments(project: Project) -> None:
    kpatch = Path(sys.executable).parent / "kpatch"

    def complete(words: str) -> list[str]:
        env = {**environment(), "_KPATCH_COMPLETE": "bash_complete", "COMP_WORDS": words,
               "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))}
        done = subprocess.run([str(kpatch)], capture_output=True, text=True, env=env, cwd=project.root, check=True)
        return [item.split(",", 1)[1] for item in done.stdout.split()]

    assert complete("kpatch export ") == ["kernels", "app"]  # kpatch.toml's order: kernels first
    assert complete("kpatch test --upstream k") == ["kernels"]
    assert complete("kpatch rebase --onto ") == ["kernels=", "app="]
    assert complete("kpatch apply --onto a") == ["app="]
    assert complete("kpatch propose kernels/") == ["kernels/0001-Add-the-kimi-op.patch",
                                                   "kernels/0002-Test-the-kimi-op.patch"]
    assert complete("kpatch export --config /nowhere/kpatch.toml ") == []  # no project: nothing, never an error


def _into_a_closed_pipe(cwd: Path, *args: str, stderr_too: bool = False) -> subprocess.CompletedProcess[str]:
    """kpatch ARGS with stdout (and stderr) on a pipe whose reader has gone, as `kpatch ... | head -1` ends."""
    read, write = os.pipe()
    os.close(read)  # every write now fails with EPIPE: the reader of `| head -1` left after its line
    try:
        return subprocess.run([sys.executable, "-m", "kpatch", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                              stdout=write, stderr=write if stderr_too else subprocess.PIPE, text=True,
                              env=environment(), timeout=300)
    finally:
        os.close(write)


def test_a_closed_pipe_ends_every_command_quietly_with_141_as_git_does(project: Project) -> None:
    assert project.run("apply").exit_code == 0
    runs = [["status"], ["status", "--json"], ["report", "--json"], ["doctor", "--json"],
            ["--help"], ["--version"], ["stauts", "--json"], *([name, "--help"] for name in sorted(COMMANDS))]
    for args in runs:
        done = _into_a_closed_pipe(project.root, *args)
        assert done.returncode == int(ExitCode.CLOSED_PIPE) == 141, (args, done.returncode, done.stderr)
        for noise in ("crashed", "Traceback", "Exception ignored", "BrokenPipe"):
            assert noise not in done.stderr, (args, done.stderr)
    both = _into_a_closed_pipe(project.root, "status", stderr_too=True)  # `kpatch status 2>&1 | head -1`
    assert both.returncode == 141
    assert not list((project.root.parent).rglob("kpatch-crash-*.log"))
