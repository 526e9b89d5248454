"""What a new user meets (issue 9 items 3, 6-10 and "Also"): a hand-edited kpatch.toml, errors, git's locale,
the remembered work folder, offline hints, a tag that moved, the status table."""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from tests.support.cli import kpatch
from tests.support.gitrepos import Project, git, mirror_dir
from tests.support.rebase_repos import RebaseProject

# --- 3. kpatch.toml edited by rebase: comments, order, quoting and layout stay as written ---------------------

HAND_WRITTEN = """\
# the stack file, as a person writes it
version = 1

[[upstream]]  # app: its own comment on the header
"name" = "app"
patches = "patches/app"
base = "v1.0"     # a tag: rebase pins a SHA here
base-commit = "{app_base}"
url = "{app}"
branch = 'main'
requires = [ "kernels" ]  # kernels first
build = {{ command = "python3 setup.py -q bdist_wheel --dist-dir=$KPATCH_OUT", pin-files = ["requirements/xpu.txt"] }}

# [[upstream]] in a comment is not a header
[[ upstream ]]   # kernels
name = "kernels"
"base" = "{kernels_base}"
url = "{kernels}"
branch = "main"
patches = "patches/kernels"
requires = []

[upstream.build]
command = "python3 setup.py -q bdist_wheel --dist-dir=$KPATCH_OUT --py-limited-api=cp38"
"""


def test_rebase_writes_each_new_base_where_it_belongs_and_nothing_else(project: Project) -> None:
    toml = project.root / "kpatch.toml"
    toml.write_text(HAND_WRITTEN.format(app=project.app, kernels=project.kernels, app_base=project.app_base,
                                        kernels_base=project.kernels_base))
    ran = kpatch(project.root, "rebase")
    assert ran.exit_code == 0, ran.output
    app_head, kernels_head = git(project.app, "rev-parse", "main"), git(project.kernels, "rev-parse", "main")
    expected = HAND_WRITTEN.format(app=project.app, kernels=project.kernels, app_base=project.app_base,
                                   kernels_base=kernels_head)
    expected = expected.replace('base = "v1.0"', f'base = "{app_head}"').replace(
        f'base-commit = "{project.app_base}"\n', "")
    assert toml.read_text() == expected
    data = tomllib.loads(toml.read_text())
    assert {u["name"]: u["base"] for u in data["upstream"]} == {"app": app_head, "kernels": kernels_head}


# --- 6. errors: one line, the right exit code, JSON under --json, never twice ------------------------------------


@pytest.mark.parametrize("which", ["series", "patch"])
@pytest.mark.parametrize("command", ["apply", "status", "export"])
def test_a_file_that_is_not_utf8_is_bad_input_naming_it(project: Project, which: str, command: str) -> None:
    folder = project.root / "patches" / "kernels"
    target = folder / ("series" if which == "series" else "0002-Test-the-kimi-op.patch")
    target.write_bytes(target.read_bytes().replace(b"Test", b"T\xe9st\xff", 1))
    before = project.snapshot()
    ran = kpatch(project.root, command)
    assert ran.exit_code == ExitCode.BAD_INPUT, ran.output
    at = target.read_bytes().index(b"\xe9")
    assert ran.errors() == [f"error: {target}: not UTF-8 text (byte {at})"]
    assert project.snapshot() == before


USAGE = [["apply", "--bogus"], ["apply", "--onto"], ["apply", "--onto", "kernels"], ["nosuch"],
         ["build-wheels", "--backend", "nope"], ["export", "--check", "--abort"], ["rebase", "--continue", "--force"]]


@pytest.mark.parametrize("args", USAGE, ids=" ".join)
def test_a_usage_error_is_one_error_line_and_exit_2(project: Project, args: list[str]) -> None:
    ran = kpatch(project.root, *args)
    assert ran.exit_code == ExitCode.BAD_INPUT
    assert len(ran.stderr.splitlines()) == 1 and ran.stderr.startswith("error: "), ran.stderr
    assert ran.stdout == ""
    as_json = kpatch(project.root, args[0], "--json", *args[1:])  # before any option that takes a value
    assert as_json.exit_code == ExitCode.BAD_INPUT and len(as_json.stderr.splitlines()) == 1
    payload = json.loads(as_json.stdout)["error"]
    assert (payload["message"], payload["exit_code"]) == (as_json.stderr.removeprefix("error: ").strip(), 2)


@pytest.mark.parametrize("case", ["no kpatch.toml", "broken kpatch.toml", "unreachable upstream"])
def test_an_error_is_printed_once_and_as_json_under_json(project: Project, tmp_path: Path, case: str) -> None:
    cwd, args, code = project.root, ["apply"], ExitCode.UPSTREAM
    if case == "no kpatch.toml":  # before any log file exists
        cwd, code = tmp_path / "empty", ExitCode.BAD_INPUT
        cwd.mkdir()
    elif case == "broken kpatch.toml":
        (project.root / "kpatch.toml").write_text("version = = 1\n")
        code = ExitCode.BAD_INPUT
    else:  # kpatch.toml's URL: a fetch fails (a URL given with --url is checked first, as bad input)
        toml = project.root / "kpatch.toml"
        toml.write_text(toml.read_text().replace(f'"{project.kernels}"', f'"{tmp_path / "gone"}"'))
    human, machine = kpatch(cwd, *args), kpatch(cwd, *args, "--json")
    assert human.exit_code == machine.exit_code == code
    [error] = human.errors()
    assert human.stderr.count(error.removeprefix("error: ")) == 1
    if case != "unreachable upstream":
        assert human.stderr.splitlines() == [error]
    payload = json.loads(machine.stdout)["error"]
    assert (payload["message"], payload["exit_code"]) == (error.removeprefix("error: "), int(code))


# --- 7. git runs with LC_ALL=C and without the user's config (fetch aside) -----------------------------------------


def test_every_git_kpatch_starts_gets_lc_all_c_and_no_user_config(project: Project, tmp_path: Path) -> None:
    """An observation shim first on PATH records each git's environment, then execs the real git."""
    shim, log = tmp_path / "shim", tmp_path / "git-calls.log"
    shim.mkdir()
    (shim / "git").write_text(
        "#!/bin/sh\n"
        f"printf '%s|%s|%s|%s|%s|%s\\n' \"${{LC_ALL-}}\" \"${{LANGUAGE-}}\" \"${{GIT_CONFIG_NOSYSTEM-}}\" "
        f"\"${{GIT_CONFIG_GLOBAL-}}\" \"${{GIT_ALLOW_PROTOCOL-}}\" \"$*\" >> '{log}'\n"
        f"exec '{shutil.which('git')}' \"$@\"\n")
    (shim / "git").chmod(0o755)
    env = {"PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "LC_ALL": "de_DE.UTF-8", "LANG": "de_DE.UTF-8",
           "LANGUAGE": "de"}
    for args in (["apply"], ["status"], ["export", "--check"], ["rebase"]):
        assert kpatch(project.root, *args, env=env).exit_code == 0
    calls = [line.split("|", 5) for line in log.read_text().splitlines()]
    # GitPython runs `git version` once when it is imported: it reads no repository and no setting.
    calls = [c for c in calls if c[5] != "version"]
    # what talks to an upstream (a fetch, and the ls-remote before a new mirror's first fetch that says which of a
    # local upstream's objects it may link: kpatch/gitx/localobjects.py) reads the user's config as the fetch does
    fetches = [c for c in calls if " fetch " in f" {c[5]} " or " ls-remote " in f" {c[5]} "]
    others = [c for c in calls if c not in fetches]
    assert len(fetches) >= 4 and len(others) > 20
    assert {(c[0], c[1]) for c in calls} == {("C", "C")}
    assert {(c[2], c[3]) for c in others} == {("1", os.devnull)}, [c[5] for c in others if c[2] != "1"]
    assert {(c[3], c[4]) for c in fetches} == {(os.environ["GIT_CONFIG_GLOBAL"], "https:ssh:git:file")}


# --- 8. the work folder is remembered ---------------------------------------------------------------------------


def test_the_workdir_of_apply_is_where_later_commands_look(project: Project, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    assert kpatch(project.root, "apply", "--workdir", str(elsewhere)).exit_code == 0
    assert not (project.root / "work").exists()
    check = kpatch(project.root, "export", "--check")
    assert check.exit_code == 0, check.output
    status = json.loads(kpatch(project.root, "status", "--json").stdout)["result"]
    assert [u["worktree"] for u in status["upstreams"]] == [str(elsewhere / "kernels"), str(elsewhere / "app")]
    assert all(p["state"] == "applied" for u in status["upstreams"] for p in u["patches"])
    built = kpatch(project.root, "build-wheels", "--backend", "local", "--json")
    assert built.exit_code == 0, built.output
    assert not (project.root / "work").exists()


def test_the_rebase_hint_names_the_remembered_workdir(rp: RebaseProject, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    assert kpatch(rp.root, "apply", "--workdir", str(elsewhere)).exit_code == 0
    ran = kpatch(rp.root, "rebase")
    assert ran.exit_code == ExitCode.CONFLICT
    assert f"resolve it in {elsewhere / '.rebase' / 'kernels'}, 'git add'" in ran.stderr
    assert (elsewhere / ".rebase" / "kernels" / "c.txt").exists() and not (rp.root / "work").exists()


# --- 9. a failed fetch says how to work offline -------------------------------------------------------------------


@pytest.mark.parametrize("command", ["apply", "rebase"])
def test_a_failed_fetch_suggests_a_local_path(project: Project, command: str) -> None:
    toml = project.root / "kpatch.toml"
    toml.write_text(toml.read_text().replace(f'url = "{project.kernels}"', 'url = "https://127.0.0.1:9/k.git"'))
    ran = kpatch(project.root, command)
    assert ran.exit_code == ExitCode.UPSTREAM
    [error] = ran.errors()
    assert error.endswith("(to work offline: --url kernels=PATH or KPATCH_URL_KERNELS=PATH)")


# --- 10. a tag base that moved ----------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["status", "apply", "rebase"])
def test_a_tag_moved_since_the_apply_is_warned_about(project: Project, command: str) -> None:
    assert kpatch(project.root, "apply").exit_code == 0
    mirror = mirror_dir(project.root.parent / "home" / ".cache" / "kpatch", "app")
    moved = git(mirror, "rev-parse", "v1.0~1")
    for repo in (project.app, mirror):  # force-pushed upstream, and already fetched
        git(repo, "tag", "-f", "v1.0", moved)
    ran = kpatch(project.root, command)
    warnings = [line for line in ran.stderr.splitlines() if line.startswith("warning: upstream app: tag v1.0")]
    assert warnings == [f"warning: upstream app: tag v1.0 now resolves to {moved[:12]}, not {project.app_base[:12]} "
                        "as at the last apply (was it force-pushed?); pin base-commit in kpatch.toml to catch this "
                        "as an error"], ran.stderr


# --- Also: the status table --------------------------------------------------------------------------------------


def test_status_shows_a_sha_base_once_and_no_line_ends_in_spaces(project: Project) -> None:
    assert kpatch(project.root, "apply").exit_code == 0
    ran = kpatch(project.root, "status")
    assert ran.exit_code == 0
    lines = ran.stdout.splitlines()
    assert f"  base {project.kernels_base}; mirror head " in ran.stdout and ran.stdout.count(project.kernels_base) == 1
    assert f"  base v1.0 = {project.app_base}; mirror head " in ran.stdout
    assert [line for line in lines if line != line.rstrip()] == []
    for args in (["apply"], ["export", "--check"], ["rebase"]):
        out = kpatch(project.root, *args).output.splitlines()
        assert out and [line for line in out if line != line.rstrip()] == [], args
