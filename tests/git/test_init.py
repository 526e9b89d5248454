"""`kpatch init` on the example upstreams (real git repositories): what it writes, and what it refuses."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from click.testing import Result

from kpatch import __version__
from kpatch.adopt.init import SERIES_HEADER, WORKFLOW_DIR, WORKFLOWS, workflow
from kpatch.config import load
from kpatch.errors import ExitCode
from tests.support.cli import run_kpatch
from tests.support.gitrepos import Project, git
from tests.support.json_envelope import checked

ROOT = Path(__file__).resolve().parents[2]


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _init(folder: Path, project: Project, *extra: str, kernels: str | None = None) -> Result:
    folder.mkdir(exist_ok=True)
    return run_kpatch(folder, "init", "--upstream", kernels or f"kernels={project.kernels}@{project.kernels_base}",
                      "--upstream", f"app={project.app}@v1.0", "--requires", "app:kernels", *extra)


def _one_error(result: Result, code: ExitCode, text: str) -> None:
    assert result.exit_code == code, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and text in errors[0], result.stderr


def test_init_writes_a_kpatch_toml_kpatch_reads_back_with_the_tag_and_its_commit(project: Project,
                                                                                    tmp_path: Path) -> None:
    new = tmp_path / "new"
    result = _init(new, project)
    assert result.exit_code == 0, result.output
    stack = load(new / "kpatch.toml")
    app, kernels = stack.get("app"), stack.get("kernels")
    assert (app.base, app.base_commit) == ("v1.0", git(project.app, "rev-parse", "v1.0"))
    assert (kernels.base, kernels.base_commit) == (project.kernels_base, None)  # a SHA needs no base-commit
    assert app.requires == ("kernels",) and [u.name for u in stack.upstreams] == ["kernels", "app"]
    assert app.branch == kernels.branch == "main" and app.url == str(project.app)
    text = (new / "kpatch.toml").read_text()
    assert "# the tag the stack applies onto" in text and "# upstreams whose stacks go first" in text
    for name in ("app", "kernels"):
        assert (new / "patches" / name / "series").read_text() == SERIES_HEADER
    assert (new / ".gitignore").read_text().splitlines()[1:] == ["/work/", "/.kpatch-cache/", "/dist/", "/reports/"]
    assert not (new / ".github").exists()
    status = run_kpatch(new, "status")
    assert status.exit_code == 0, status.output


def test_init_pins_a_branch_base_as_the_commit_it_names_today(project: Project, tmp_path: Path) -> None:
    result = _init(tmp_path / "new", project, kernels=f"kernels={project.kernels}@main~2")
    assert result.exit_code == 0, result.output
    kernels = load(tmp_path / "new" / "kpatch.toml").get("kernels")
    assert kernels.base == git(project.kernels, "rev-parse", "main~2") and kernels.base_commit is None


def test_init_adds_its_lines_to_an_existing_gitignore_and_keeps_the_rest(project: Project, tmp_path: Path) -> None:
    new = tmp_path / "new"
    new.mkdir()
    (new / ".gitignore").write_text("*.pyc\n/work/\n")
    result = _init(new, project)
    assert result.exit_code == 0, result.output
    lines = (new / ".gitignore").read_text().splitlines()
    assert lines[:2] == ["*.pyc", "/work/"] and lines.count("/work/") == 1 and "/dist/" in lines


@pytest.mark.parametrize(("name", "jobs"), [("nightly.yml", 1), ("nightly-line.yml", 10)])
def test_init_ci_writes_the_nightly_workflows_installing_the_kpatch_release(project: Project, tmp_path: Path,
                                                                           name: str, jobs: int) -> None:
    """Both: the scheduled nightly (its job listing the lines installs kpatch) and the one line's chain it calls
    (the night's, the publish job's and the search's rounds' jobs install kpatch)."""
    new = tmp_path / "new"
    result = _init(new, project, "--ci")
    assert result.exit_code == 0, result.output
    written = (new / ".github" / "workflows" / name).read_text()
    assert written == workflow(name)
    ours = (ROOT / "ci" / name).read_text()
    assert "pip install --quiet 'kpatch==" in written and "ci/nightly-requirements.txt" not in written
    added = [line for line in written.splitlines() if line not in ours.splitlines()]
    assert ours.count("-r ci/nightly-requirements.txt\n") == jobs
    assert added[0].startswith("# Written by 'kpatch init --ci'") and len(added) == 2 + jobs  # the note, installs
    assert set(added[2:]) == {f"          python -m pip install --quiet 'kpatch=={__version__}'"}
    assert len(written.splitlines()) == len(ours.splitlines()) - jobs  # in each job two install lines became one


@pytest.mark.parametrize("name", WORKFLOWS)
def test_the_packaged_nightly_workflows_are_ci_s_byte_for_byte(name: str) -> None:
    assert (ROOT / "kpatch" / "adopt" / "data" / name).read_bytes() == \
        (ROOT / "ci" / name).read_bytes(), f"cp ci/{name} kpatch/adopt/data/"


@pytest.mark.parametrize("existing", ["kpatch.toml", "patches/app/series", ".github/workflows/nightly.yml",
                                      ".github/workflows/nightly-line.yml"])
def test_init_refuses_to_overwrite_a_file_naming_it_and_writes_nothing(project: Project, tmp_path: Path,
                                                                       existing: str) -> None:
    new = tmp_path / "new"
    (new / existing).parent.mkdir(parents=True)
    (new / existing).write_text("mine\n")
    before = _files(new)
    result = _init(new, project, "--ci")
    _one_error(result, ExitCode.BAD_INPUT, f"{new / existing} exists")
    assert _files(new) == before


@pytest.mark.parametrize(("url", "says"), [
    ("ext::sh -c touch% /tmp/pwned", "git remote helpers (ext::) are not allowed"),
    ("http://example.invalid/app.git", "URL scheme 'http' is not allowed (use https://)"),
    ("-uploadpack=touch /tmp/x", "looks like a command-line option"),
])
def test_init_refuses_a_url_apply_would_refuse_and_writes_nothing(project: Project, tmp_path: Path, url: str,
                                                                  says: str) -> None:
    new = tmp_path / "new"
    result = _init(new, project, kernels=f"kernels={url}@v1.0")
    _one_error(result, ExitCode.BAD_INPUT, says)
    assert _files(new) == {}


@pytest.mark.parametrize("form", ["file://{folder}/../{name}", "{folder}/../{name}"])
def test_init_refuses_a_url_with_a_dotdot_segment_naming_the_upstream_and_url_and_writes_nothing(
        project: Project, tmp_path: Path, form: str) -> None:
    url = form.format(folder=project.kernels, name=project.kernels.name)  # it leads back to the real upstream
    new = tmp_path / "new"
    result = _init(new, project, kernels=f"kernels={url}@v1.0")
    _one_error(result, ExitCode.BAD_INPUT, f"--upstream kernels: {url!r} has a '..' segment")
    assert _files(new) == {}


def test_init_refuses_a_base_the_upstream_does_not_have_and_writes_nothing(project: Project, tmp_path: Path) -> None:
    new = tmp_path / "new"
    result = _init(new, project, kernels=f"kernels={project.kernels}@v9.9")
    _one_error(result, ExitCode.UPSTREAM, "'v9.9' is not a commit, tag or branch of")
    assert _files(new) == {}


X = "https://example.invalid"


@pytest.mark.parametrize(("args", "says"), [
    (["--upstream", "kernels=/x"], "--upstream takes NAME=URL@BASE"),
    (["--upstream", "Bad Name=/x@v1"], "bad name 'Bad Name'"),
    (["--upstream", f"a={X}/x@v1", "--requires", "a:b"], "--requires a:b: no --upstream named 'b'"),
    (["--upstream", f"a={X}/x@v1", "--upstream", f"b={X}/y@v1", "--requires", "a:b", "--requires", "b:a"], "cycle"),
    (["--upstream", f"a={X}/x@v1", "--upstream", f"a={X}/y@v1"], "--upstream a is given twice"),
])
def test_init_refuses_bad_arguments_in_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    new = tmp_path / "new"
    new.mkdir()
    result = run_kpatch(new, "init", *args)
    _one_error(result, ExitCode.BAD_INPUT, says)
    assert _files(new) == {}


def test_an_upstream_url_is_split_at_its_last_at_and_a_local_path_made_absolute(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from kpatch.adopt.init import parse_upstream

    ssh = parse_upstream("app=git@github.com:acme/app.git@v1.0")
    assert (ssh.name, ssh.url, ssh.base) == ("app", "git@github.com:acme/app.git", "v1.0")
    (tmp_path / "up").mkdir()
    monkeypatch.chdir(tmp_path)
    assert parse_upstream("app=up@main").url == str(tmp_path / "up")


def test_init_json_names_the_pins_and_the_files_it_wrote(project: Project, tmp_path: Path) -> None:

    result = _init(tmp_path / "new", project, "--json")
    assert result.exit_code == 0, result.output
    data = checked(result.stdout, "init")["result"]
    assert [u["upstream"] for u in data["upstreams"]] == ["kernels", "app"]
    assert str(tmp_path / "new" / "kpatch.toml") in data["written"]


def test_the_written_nightly_workflow_passes_actionlint_and_zizmor(tmp_path: Path) -> None:
    import subprocess
    import sysconfig

    scripts = Path(sysconfig.get_path("scripts"))
    tools = [scripts / "actionlint", scripts / "zizmor"]
    missing = [t.name for t in tools if not t.is_file()]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (the test dependency group: scripts/test installs it)")
    (tmp_path / WORKFLOW_DIR).mkdir(parents=True)
    paths = [str(tmp_path / WORKFLOW_DIR / name) for name in WORKFLOWS]
    for name in WORKFLOWS:
        (tmp_path / WORKFLOW_DIR / name).write_text(workflow(name))
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)  # actionlint checks the call's inputs
    env = {"PATH": f"{scripts}:/usr/bin:/bin", "HOME": str(tmp_path)}
    lint = subprocess.run([str(tools[0]), "-config-file", str(ROOT / ".github" / "actionlint.yaml"), *paths],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    audit = subprocess.run([str(tools[1]), "--offline", "--no-progress", "--persona", "pedantic", *paths],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_init_line_writes_a_release_line_kpatch_reads_back_with_its_own_stacks(project: Project,
                                                                               tmp_path: Path) -> None:
    new = tmp_path / "new"
    result = _init(new, project, "--line", "0.9:kernels=release/0.9@v0.9", "--line", "0.9:app=release/0.9@v0.9")
    assert result.exit_code == 0, result.output
    stack = load(new / "kpatch.toml")
    assert stack.line_names == ("main", "0.9")
    line = stack.on_line("0.9")
    assert [(u.name, u.branch, u.base) for u in line.upstreams] == [("kernels", "release/0.9", "v0.9"),
                                                                     ("app", "release/0.9", "v0.9")]
    for name in ("kernels", "app"):
        assert (new / "patches" / "0.9" / name / "series").read_text() == SERIES_HEADER
    assert '[line."0.9".kernels]' in (new / "kpatch.toml").read_text()
    assert {"/work-0.9/", "/dist-0.9/", "/reports-0.9/"} <= set((new / ".gitignore").read_text().splitlines())


def test_init_line_that_leaves_out_an_upstream_writes_nothing(project: Project, tmp_path: Path) -> None:
    new = tmp_path / "new"
    result = _init(new, project, "--line", "0.9:kernels=release/0.9@v0.9")
    _one_error(result, ExitCode.BAD_INPUT, "--line 0.9: says nothing of upstream 'app'")
    assert not list(new.iterdir())
    bad = _init(new, project, "--line", "main:kernels=release/0.9@v0.9", "--line", "main:app=x@y")
    _one_error(bad, ExitCode.BAD_INPUT, "'main' is no release line's name")
