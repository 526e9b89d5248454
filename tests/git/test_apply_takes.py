"""`kpatch apply` taking commits that hold exactly the patch files (an import's, the last apply's) instead of
running `git am` again (engine/reuse.py), on the example upstreams: the same worktrees, commits, run state and
output as am gives, and am whenever the commits are not the files' (a file edited since, another base, commits a
person made, a mirror without them)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from click.testing import Result

from tests.support.cli import run_kpatch
from tests.support.gitrepos import Project, git, mirror_dir

NAMES = ("kernels", "app")


def _init(project: Project, where: Path) -> Path:
    where.mkdir()
    made = run_kpatch(where, "init", "--upstream", f"kernels={project.kernels}@{project.kernels_base}",
                      "--upstream", f"app={project.app}@v1.0", "--requires", "app:kernels")
    assert made.exit_code == 0, made.output
    return where


def _import(root: Path, project: Project) -> None:
    """Both stacks imported as a series of mails (the example project's own patch folders, as Debian's are)."""
    for name in NAMES:
        result = run_kpatch(root, "import", name, "--series", str(project.root / "patches" / name))
        assert result.exit_code == 0, result.output


def _mirror(tmp_path: Path, name: str) -> Path:
    return mirror_dir(tmp_path / "home" / ".cache" / "kpatch", name)


def _kept(tmp_path: Path, name: str) -> dict[str, str]:
    listing = git(_mirror(tmp_path, name), "for-each-ref", "--format=%(refname) %(objectname)", "refs/kpatch/stacks/")
    return dict(line.split() for line in listing.splitlines())


def _log(tree: Path, base: str) -> str:
    """Every commit of the worktree's stack: SHA, tree, parents, author, committer, dates and message."""
    return git(tree, "log", "--date=raw", "--format=%H %T %P%n%an <%ae> %ad%n%cn <%ce> %cd%n%B%x00", f"{base}..HEAD")


def _last_move(tree: Path) -> str:
    """What last moved the worktree's HEAD, from its reflog: "am" (git am made its commits), else "taken" (a
    checkout to them, or a new worktree made at them: no entry)."""
    return "am" if git(tree, "reflog", "-1", "--format=%gs").startswith("am: ") else "taken"


def _same_text(result: Result, root: Path) -> str:
    return result.output.replace(str(root), "ROOT")


def _state(root: Path) -> str:
    return (root / ".kpatch" / "state.json").read_text().replace(str(root), "ROOT")


def _base(root: Path, name: str) -> str:
    return str(json.loads((root / ".kpatch" / "state.json").read_text())["settled"][name]["base"])


def test_apply_after_a_series_import_takes_its_commits_and_gives_what_git_am_gives(project: Project,
                                                                                   tmp_path: Path) -> None:
    by_am = _init(project, tmp_path / "by-am")
    _import(by_am, project)
    kept = {name: _kept(tmp_path, name) for name in NAMES}
    assert all(len(refs) == 1 for refs in kept.values()), kept  # the import kept its commits, one ref a stack
    for name in NAMES:  # without them, apply runs git am
        for ref in kept[name]:
            git(_mirror(tmp_path, name), "update-ref", "-d", ref)
    am_result = run_kpatch(by_am, "apply")
    assert am_result.exit_code == 0, am_result.output
    am_json = run_kpatch(by_am, "--json", "status")

    taken = _init(project, tmp_path / "taken")  # a second project on the same cache, the same files
    _import(taken, project)
    assert {name: _kept(tmp_path, name) for name in NAMES} == kept  # the same commits made again
    result = run_kpatch(taken, "apply")
    assert result.exit_code == 0, result.output
    assert {name: _kept(tmp_path, name) for name in NAMES} == {name: {} for name in NAMES}  # taken: refs dropped

    for name in NAMES:
        head = next(iter(kept[name].values()))
        assert git(by_am / "work" / name, "rev-parse", "HEAD") == head  # am makes the import's commits
        assert git(taken / "work" / name, "rev-parse", "HEAD") == head
        assert _log(taken / "work" / name, _base(taken, name)) == _log(by_am / "work" / name, _base(by_am, name))
        assert git(taken / "work" / name, "status", "--porcelain") == ""
        assert (_last_move(taken / "work" / name), _last_move(by_am / "work" / name)) == ("taken", "am")
    assert _same_text(result, taken) == _same_text(am_result, by_am)
    assert _state(taken) == _state(by_am)
    assert _same_text(run_kpatch(taken, "--json", "status"), taken) == _same_text(am_json, by_am)
    assert run_kpatch(taken, "export", "--check").exit_code == 0


def test_a_patch_file_edited_after_the_import_is_applied_by_git_am(project: Project, tmp_path: Path) -> None:
    root = _init(project, tmp_path / "p")
    _import(root, project)
    kept = _kept(tmp_path, "kernels")
    first = sorted((root / "patches" / "kernels").glob("0001-*.patch"))[0]
    data = first.read_bytes()  # bytes: the kernels' .ini file has CRLF lines
    first.write_bytes(data.replace(b"\n---\n", b"\n\nEdited by hand after the import.\n---\n", 1))
    result = run_kpatch(root, "apply")
    assert result.exit_code == 0, result.output
    tree = root / "work" / "kernels"
    assert git(tree, "rev-parse", "HEAD") not in kept.values()
    assert "Edited by hand after the import." in git(tree, "log", "--format=%B", f"{_base(root, 'kernels')}..HEAD")
    assert _kept(tmp_path, "kernels") == kept  # not taken: still kept
    assert _last_move(tree) == "am"
    assert run_kpatch(root, "export", "--check").exit_code == 0


def test_apply_onto_another_base_runs_git_am_not_the_imports_commits(project: Project, tmp_path: Path) -> None:
    root = _init(project, tmp_path / "p")
    _import(root, project)
    kept = _kept(tmp_path, "app")
    onto = git(project.app, "rev-parse", "v1.0~1")
    result = run_kpatch(root, "apply", "--onto", f"app={onto}")
    assert result.exit_code == 0, result.output
    tree = root / "work" / "app"
    assert git(tree, "rev-parse", "HEAD") not in kept.values()
    names = [n for n in (root / "patches" / "app" / "series").read_text().split() if n.endswith(".patch")]
    assert git(tree, "rev-list", "--count", f"{onto}..HEAD") == str(len(names))
    assert _kept(tmp_path, "app") == kept
    assert _last_move(tree) == "am"


def test_commits_a_person_made_and_exported_are_applied_again_by_git_am(project: Project) -> None:
    """export records its commits as holding the files, but a person's commit has their committer and time, which
    git am does not give: apply makes kpatch's commits, as it would without that record."""
    assert project.run("apply").exit_code == 0
    tree = project.workdir / "kernels"
    last = sorted((project.root / "patches" / "kernels").glob("*.patch"))[-1]
    env = {**os.environ, "GIT_COMMITTER_NAME": "Per Son", "GIT_COMMITTER_EMAIL": "per@example.invalid"}
    subprocess.run(["git", "commit", "--quiet", "--amend", "--no-edit", "--no-verify"], cwd=tree, env=env,
                   check=True)
    exported = project.run("export")
    assert exported.exit_code == 0, exported.output
    assert last.exists()
    made = git(tree, "rev-parse", "HEAD")
    result = project.run("apply")
    assert result.exit_code == 0, result.output
    assert git(tree, "rev-parse", "HEAD") != made
    assert git(tree, "log", "-1", "--format=%cn %ce") == "kpatch kpatch@localhost"
    assert _last_move(tree) == "am"


def test_apply_again_takes_the_last_applys_commits(project: Project) -> None:
    result = project.run("apply")
    assert result.exit_code == 0, result.output
    heads = {name: git(project.workdir / name, "rev-parse", "HEAD") for name in NAMES}
    state = (project.root / ".kpatch" / "state.json").read_text()
    for name in NAMES:
        git(project.workdir / name, "checkout", "--quiet", "--detach", "HEAD~1")  # the person moved it back
    again = project.run("apply")
    assert again.exit_code == 0, again.output
    assert {name: git(project.workdir / name, "rev-parse", "HEAD") for name in NAMES} == heads
    assert (project.root / ".kpatch" / "state.json").read_text() == state
    assert {_last_move(project.workdir / name) for name in NAMES} == {"taken"}
    said = [line for line in again.output.splitlines() if "kept the worktree's commits" not in line]
    assert said == [line for line in result.output.splitlines() if not line.startswith("fetching")]


def test_a_project_copied_without_its_cache_applies_by_git_am(project: Project, tmp_path: Path) -> None:
    """The copy's state names commits its new cache does not have: am makes them again, the same."""
    root = _init(project, tmp_path / "p")
    _import(root, project)
    assert run_kpatch(root, "apply").exit_code == 0
    heads = {name: git(root / "work" / name, "rev-parse", "HEAD") for name in NAMES}
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, symlinks=True, ignore=shutil.ignore_patterns("work"))
    (copy / ".kpatch" / "state.json").write_text(
        (copy / ".kpatch" / "state.json").read_text().replace(str(root), str(copy)))
    home = tmp_path / "home2"
    home.mkdir()
    result = run_kpatch(copy, "apply", env={"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")})
    assert result.exit_code == 0, result.output
    assert {name: git(copy / "work" / name, "rev-parse", "HEAD") for name in NAMES} == heads
    assert {_last_move(copy / "work" / name) for name in NAMES} == {"am"}
    assert not re.search("refs/kpatch/stacks", git(mirror_dir(home / ".cache" / "kpatch", "kernels"),
                                                  "for-each-ref", "--format=%(refname)"))

