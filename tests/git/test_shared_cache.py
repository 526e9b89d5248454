"""One cache for many projects: a mirror belongs to a URL, a recorded resolution to its project, and a cache an
older kpatch made (one mirror per upstream *name*) keeps working."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from kpatch.config import load
from kpatch.errors import ExitCode
from kpatch.examples.upstreams import commit, init_repo
from kpatch.gitx import run
from tests.support.cli import kpatch
from tests.support.gitrepos import Project, git, make_project, mirror_of
from tests.support.rebase_repos import FILES, RebaseProject, replace_line


def _other_app(folder: Path) -> tuple[Path, str]:
    """Another repository called app, with a tag v1.0 of its own."""
    init_repo(folder)
    commit(folder, {"README": "another app\n"}, "initial import", 0)
    v1 = commit(folder, {"README": "another app, 1.0\n"}, "Release 1.0", 1)
    run(["tag", "v1.0"], folder)
    commit(folder, {"README": "another app, after 1.0\n"}, "After 1.0", 2)
    return folder, v1


def _resolve_c(rp: RebaseProject) -> None:
    tree = rp.root / "work" / ".rebase" / "kernels"
    (tree / "c.txt").write_text(replace_line(FILES["c"], 15, "c line 15 rewritten upstream, fixed by us"))
    git(tree, "add", "c.txt")


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def test_init_in_a_cache_holding_another_projects_app_fetches_and_pins_the_given_urls_v1_0(
        project: Project, tmp_path: Path) -> None:
    """Before, init found the other project's `app` mirror by name, printed and wrote ITS v1.0 commit, exit 0,
    without fetching."""
    cache = tmp_path / "cache"
    assert kpatch(project.root, "apply", "--cache-dir", str(cache), timeout=300).exit_code == 0
    other, v1 = _other_app(tmp_path / "elsewhere" / "app")
    new = tmp_path / "new"
    new.mkdir()
    made = kpatch(new, "init", "--cache-dir", str(cache), "--upstream", f"app={other}@v1.0", timeout=300)
    assert made.exit_code == 0, made.stderr
    assert load(new / "kpatch.toml").get("app").base_commit == v1 != git(project.app, "rev-parse", "v1.0")
    # The first project's mirror is as it was: its own v1.0, and still its worktree's.
    first = mirror_of(cache, project.app)
    assert git(first, "rev-parse", "refs/tags/v1.0") == git(project.app, "rev-parse", "v1.0")
    assert git(mirror_of(cache, other), "rev-parse", "refs/tags/v1.0") == v1
    assert kpatch(project.root, "status", "--cache-dir", str(cache), timeout=300).exit_code == 0


def test_init_refuses_a_url_whose_path_looks_like_an_option_even_with_a_same_named_mirror_there(
        project: Project, tmp_path: Path) -> None:
    """`kernels=host:-x@main` was taken from the same-named mirror without a fetch; `-x` reaches ssh's server as
    an argument: refused as option-like, exit 2, nothing written."""
    assert project.run("apply").exit_code == 0
    new = tmp_path / "new"
    new.mkdir()
    made = kpatch(new, "init", "--upstream", "kernels=host:-x@main", timeout=120)
    assert made.exit_code == ExitCode.BAD_INPUT, made.stderr
    errors = [line for line in made.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: --upstream kernels: 'host:-x': its path '-x' looks like a command-line option, "
                      "not a URL"], made.stderr
    assert _files(new) == []


def test_two_spellings_of_one_url_share_a_mirror_and_two_urls_of_one_name_never_do(project: Project,
                                                                                   tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert kpatch(project.root, "apply", "--cache-dir", str(cache), timeout=300).exit_code == 0
    mirrors = sorted((cache / "mirrors").glob("*.git"))
    alias = tmp_path / "alias"
    alias.mkdir()
    spelled = f"file://{project.app}/"  # the same folder, as a file URL with a trailing slash
    assert kpatch(alias, "init", "--cache-dir", str(cache), "--upstream", f"mine={spelled}@v1.0",
                  timeout=300).exit_code == 0
    assert sorted((cache / "mirrors").glob("*.git")) == mirrors  # no new mirror: the app one serves `mine` too


def test_a_projects_recorded_resolution_never_reaches_another_projects_rerere_folder(rp: RebaseProject,
                                                                                    tmp_path: Path) -> None:
    """Before, a second project of the same upstream in the same cache, with an empty stack, got the first one's
    recorded resolution written into its own patches/.rerere/ by its rebase: the rr-cache was the mirror's."""
    assert rp.run("rebase").exit_code == ExitCode.CONFLICT
    _resolve_c(rp)
    assert rp.run("rebase", "--continue").exit_code == 0
    assert list((rp.root / "patches" / ".rerere" / "kernels").glob("*/postimage"))  # the first one's, kept
    base = git(rp.kernels, "rev-list", "--max-parents=0", "HEAD")
    second = tmp_path / "second"
    second.mkdir()
    assert kpatch(second, "init", "--upstream", f"kernels={rp.kernels}@{base}", timeout=300).exit_code == 0
    moved = kpatch(second, "rebase", timeout=300)
    assert moved.exit_code == 0, moved.stderr
    assert not (second / "patches" / ".rerere").exists(), _files(second / "patches" / ".rerere")
    assert load(second / "kpatch.toml").get("kernels").base == git(rp.kernels, "rev-parse", "main")


def _old_layout(cache: Path, names: dict[str, Path]) -> None:
    """Make `cache` what an older kpatch made: `mirrors/<upstream name>.git`, no URL recorded, worktrees repaired
    to point there."""
    for name, url in names.items():
        keyed = mirror_of(cache, url)
        old = cache / "mirrors" / f"{name}.git"
        keyed.rename(old)
        git(old, "config", "--unset", "kpatch.url")
        git(old, "worktree", "repair")


def test_a_cache_of_an_older_kpatch_is_moved_to_the_url_layout_once_with_one_note(project: Project) -> None:
    assert project.run("apply").exit_code == 0
    cache = project.root.parent / "home" / ".cache" / "kpatch"
    _old_layout(cache, {"kernels": project.kernels, "app": project.app})
    heads = {n: git(project.workdir / n, "rev-parse", "HEAD") for n in ("kernels", "app")}
    status = kpatch(project.root, "status", timeout=300)  # a reader works on the old mirror as it is
    assert status.exit_code == 0 and "not a kpatch worktree" not in status.stderr, status.stderr
    first = kpatch(project.root, "apply", timeout=300)
    assert first.exit_code == 0, first.stderr
    notes = [line for line in first.stderr.splitlines() if "an older kpatch's" in line]
    assert len(notes) == 2 and all("keyed by its URL" in n for n in notes), first.stderr
    assert not (cache / "mirrors" / "kernels.git").exists() and mirror_of(cache, project.kernels).is_dir()
    assert git(mirror_of(cache, project.app), "config", "kpatch.url") == str(project.app)
    for name, head in heads.items():  # the person's worktrees are the moved mirror's, as they were
        assert git(project.workdir / name, "rev-parse", "HEAD") == head
        assert git(project.workdir / name, "status", "--porcelain") == ""
    again = kpatch(project.root, "apply", timeout=300)
    assert again.exit_code == 0 and "older kpatch" not in again.stderr, again.stderr


def test_an_older_kpatchs_mirror_of_another_project_is_not_used_and_the_url_is_fetched_anew(
        project: Project, tmp_path: Path, example_template: Path) -> None:
    assert project.run("apply").exit_code == 0
    cache = project.root.parent / "home" / ".cache" / "kpatch"
    _old_layout(cache, {"kernels": project.kernels, "app": project.app})
    other = make_project(tmp_path / "other", example_template)  # copies of the same upstreams, at other URLs
    run(["tag", "only-in-other"], other.app)
    applied = kpatch(other.root, "apply", timeout=300)
    assert applied.exit_code == 0, applied.stderr
    notes = [line for line in applied.stderr.splitlines() if "an older kpatch's mirror" in line]
    assert len(notes) == 2 and all("is fetched anew" in n for n in notes), applied.stderr
    assert git(mirror_of(cache, other.app), "tag", "--list", "only-in-other") == "only-in-other"
    assert git(cache / "mirrors" / "app.git", "tag", "--list", "only-in-other") == ""  # never fetched into
    assert (cache / "mirrors" / "app.git").is_dir()  # the first project's, left for it
    assert git(project.workdir / "app", "rev-parse", "HEAD")
    mine = kpatch(project.root, "apply", timeout=300)  # the first project then takes its own
    assert mine.exit_code == 0 and mine.stderr.count("keyed by its URL") == 2, mine.stderr
    assert not (cache / "mirrors" / "app.git").exists()
    shutil.rmtree(other.workdir)
    assert subprocess.run(["git", "fsck", "--no-progress"], cwd=mirror_of(cache, project.app), capture_output=True,
                          check=False).returncode == 0


def test_a_worktree_of_the_mirror_of_kpatch_tomls_old_url_is_named_as_such(project: Project, tmp_path: Path) -> None:
    """kpatch.toml's url changed: the new URL is another mirror, and the worktree made from the old one is not its
    own; the error says which mirror it belongs to, and nothing is changed."""
    assert project.run("apply").exit_code == 0
    copy = tmp_path / "copy-of-app"
    shutil.copytree(project.app, copy)
    toml = project.root / "kpatch.toml"
    toml.write_text(toml.read_text().replace(f'url = "{project.app}"', f'url = "{copy}"'))
    head = git(project.workdir / "app", "rev-parse", "HEAD")
    ran = kpatch(project.root, "apply", timeout=300)
    assert ran.exit_code == ExitCode.WORKTREE, ran.stderr
    old = mirror_of(project.root.parent / "home" / ".cache" / "kpatch", project.app)
    assert f"{project.workdir / 'app'} exists but is not a kpatch worktree of app (it is one of {old}, the mirror " \
           "of another URL: did kpatch.toml's url change?); move it away" in ran.stderr
    assert git(project.workdir / "app", "rev-parse", "HEAD") == head
