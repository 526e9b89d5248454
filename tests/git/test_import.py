"""`kpatch import` of a fork branch and of a folder of patches, on the example upstreams (real git repositories):
the round trip through kpatch's own stacks, and every refusal (one line, its exit code, nothing written)."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import Result

from kpatch.config import load
from kpatch.errors import ExitCode
from tests.support.cli import run_kpatch
from tests.support.gitrepos import Project, git, mirror_dir
from tests.support.json_envelope import checked


@dataclass
class Adopting:
    """The example project applied (its worktrees are the "fork"), and a new empty project made by kpatch init."""

    old: Project
    new: Path

    def fork(self, name: str) -> Path:
        return self.old.workdir / name

    def run(self, *args: str) -> Result:
        return run_kpatch(self.new, *args)

    def files(self) -> dict[str, str]:
        return {str(p.relative_to(self.new)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(self.new.rglob("*")) if p.is_file() and ".kpatch" not in p.parts}


@pytest.fixture
def adopting(project: Project, tmp_path: Path) -> Adopting:
    applied = project.run("apply")
    assert applied.exit_code == 0, applied.output
    for name in ("kernels", "app"):
        git(project.workdir / name, "branch", "fork")
    new = tmp_path / "new"
    new.mkdir()
    made = run_kpatch(new, "init", "--upstream", f"kernels={project.kernels}@{project.kernels_base}",
                      "--upstream", f"app={project.app}@v1.0", "--requires", "app:kernels")
    assert made.exit_code == 0, made.output
    return Adopting(old=project, new=new)


def _one_error(result: Result, code: ExitCode, text: str) -> None:
    assert result.exit_code == code, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and text in errors[0], result.stderr


def _stack(root: Path, name: str) -> dict[str, bytes]:
    folder = root / "patches" / name
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_importing_the_applied_stacks_as_a_fork_gives_byte_identical_patch_files(adopting: Adopting) -> None:
    for name in ("kernels", "app"):
        result = adopting.run("import", name, "--from", f"{adopting.fork(name)}@fork")
        assert result.exit_code == 0, result.output
        assert _stack(adopting.new, name) == _stack(adopting.old.root, name)
    assert adopting.run("apply").exit_code == 0
    assert adopting.run("export", "--check").exit_code == 0


def _leftovers(adopting: Adopting, name: str) -> tuple[list[str], bool]:
    """Refs the import left in the upstream's mirror, and whether its scratch worktree is still there."""
    mirror = mirror_dir(adopting.new.parent / "home" / ".cache" / "kpatch", name)
    refs = git(mirror, "for-each-ref", "--format=%(refname)", "refs/kpatch/import/").split()
    return refs, (adopting.new / "work" / ".import" / name).exists()


def _fork_with(adopting: Adopting, name: str, branch: str, steps: list[tuple[str, ...]]) -> Path:
    """A branch `branch` in the old project's worktree `name`, made from its base by git commands."""
    tree = adopting.fork(name)
    base = git(tree, "rev-parse", "fork~2")
    git(tree, "checkout", "--quiet", "-b", branch, base)
    for step in steps:
        git(tree, *step)
    return tree


def _kernels_first(adopting: Adopting) -> None:
    """The app's first patch requires the kernels' first: the kernels stack goes in first."""
    result = adopting.run("import", "kernels", "--from", f"{adopting.fork('kernels')}@fork")
    assert result.exit_code == 0, result.output


def test_a_commit_already_upstream_is_reported_with_its_upstream_commit_and_left_out(adopting: Adopting) -> None:
    _kernels_first(adopting)
    upstream_next = git(adopting.old.app, "rev-list", "--reverse", "v1.0..main").split()[0]
    tree = _fork_with(adopting, "app", "mixed", [("cherry-pick", "fork~1"), ("cherry-pick", upstream_next),
                                                 ("cherry-pick", "fork")])
    result = adopting.run("import", "app", "--from", f"{tree}@mixed")
    assert result.exit_code == 0, result.output
    picked = git(tree, "rev-parse", "mixed~1")
    assert f"skipped commit {picked[:12]} \"churn 16\": already upstream as {upstream_next[:12]}" in result.stdout
    assert _stack(adopting.new, "app") == _stack(adopting.old.root, "app")
    assert _leftovers(adopting, "app") == ([], False)


def test_include_upstream_keeps_a_commit_already_upstream(adopting: Adopting) -> None:
    _kernels_first(adopting)
    upstream_next = git(adopting.old.app, "rev-list", "--reverse", "v1.0..main").split()[0]
    tree = _fork_with(adopting, "app", "mixed", [("cherry-pick", "fork~1"), ("cherry-pick", "fork"),
                                                 ("cherry-pick", upstream_next)])
    result = adopting.run("import", "app", "--from", f"{tree}@mixed", "--include-upstream")
    assert result.exit_code == 0, result.output
    assert (adopting.new / "patches" / "app" / "series").read_text().splitlines()[-1] == "0003-churn-16.patch"


def test_an_empty_commit_is_skipped_and_named(adopting: Adopting) -> None:
    tree = _fork_with(adopting, "kernels", "gaps", [("cherry-pick", "fork~1"),
                                                    ("commit", "--allow-empty", "-m", "Nothing at all"),
                                                    ("cherry-pick", "fork")])
    result = adopting.run("import", "kernels", "--from", f"{tree}@gaps")
    assert result.exit_code == 0, result.output
    assert re.search(r"skipped commit [0-9a-f]{12} \"Nothing at all\": it changes nothing", result.stdout)
    assert _stack(adopting.new, "kernels") == _stack(adopting.old.root, "kernels")


def test_import_json_names_the_files_and_the_skipped_commits(adopting: Adopting) -> None:

    tree = _fork_with(adopting, "kernels", "gaps", [("cherry-pick", "fork~1"),
                                                    ("commit", "--allow-empty", "-m", "Nothing at all"),
                                                    ("cherry-pick", "fork")])
    result = adopting.run("import", "kernels", "--from", f"{tree}@gaps", "--json")
    assert result.exit_code == 0, result.output
    data = checked(result.stdout, "import")["result"]
    assert [Path(f).name for f in data["files"]] == sorted(_stack(adopting.old.root, "kernels"))[:2]
    assert [(s["subject"], s["why"]) for s in data["skipped"]] == [("Nothing at all", "empty")]


def test_importing_app_before_the_kernels_it_requires_is_refused_naming_the_trailer(adopting: Adopting) -> None:
    before = adopting.files()
    result = adopting.run("import", "app", "--from", f"{adopting.fork('app')}@fork")
    _one_error(result, ExitCode.WORKTREE, "0001-Route-k3-to-the-XPU-path.patch (line ")
    assert "which is not in kernels's series (import kernels first); nothing was written" in result.stderr
    assert adopting.files() == before and _leftovers(adopting, "app") == ([], False)


@pytest.mark.parametrize(("make", "args", "code", "says"), [
    ("merge", (), ExitCode.BAD_INPUT, "is a merge; a patch stack is a straight line of commits"),
    ("unrelated", (), ExitCode.BAD_INPUT, "does not descend from the base"),
    ("fork", ("--max-commits", "1"), ExitCode.BAD_INPUT, "has 2 commits since the base",),
    ("nosuch", (), ExitCode.UPSTREAM, "cannot fetch branch 'nosuch' from"),
    ("fork", ("--base", "v9.9"), ExitCode.UPSTREAM, "'v9.9' is not a commit, tag or branch of"),
])
def test_a_bad_fork_branch_is_refused_in_one_line_and_nothing_is_written(adopting: Adopting, make: str,
                                                                          args: tuple[str, ...], code: ExitCode,
                                                                          says: str) -> None:
    tree = adopting.fork("kernels")
    if make == "merge":
        git(tree, "checkout", "--quiet", "-b", "merge", "fork~1")
        git(tree, "commit", "--quiet", "--allow-empty", "-m", "side")
        git(tree, "merge", "--quiet", "--no-ff", "-m", "Merge the tests", "fork")
        says = f"commit {git(tree, 'rev-parse', 'HEAD')[:12]} \"Merge the tests\" " + says
    elif make == "unrelated":
        git(tree, "checkout", "--quiet", "-b", "unrelated", "v1.0~5")
        git(tree, "commit", "--quiet", "--allow-empty", "-m", "old")
    before = adopting.files()
    result = adopting.run("import", "kernels", "--from", f"{tree}@{make}", *args)
    _one_error(result, code, says)
    assert adopting.files() == before
    assert _leftovers(adopting, "kernels") == ([], False)


@pytest.mark.parametrize(("source", "says"), [
    ("ext::sh -c touch% /tmp/pwned@main", "git remote helpers (ext::) are not allowed"),
    ("http://example.invalid/fork.git@main", "URL scheme 'http' is not allowed"),
    ("/no/such/fork@main", "--from (upstream kernels): no folder /no/such/fork"),
    ("/no/branch/given", "--from takes URL_OR_PATH@BRANCH"),
])
def test_a_disallowed_fork_url_is_refused_in_one_line_and_nothing_is_written(adopting: Adopting, source: str,
                                                                             says: str) -> None:
    before = adopting.files()
    result = adopting.run("import", "kernels", "--from", source)
    _one_error(result, ExitCode.BAD_INPUT, says)
    assert adopting.files() == before


@pytest.mark.parametrize("form", ["file://{tree}/../{name}", "{tree}/../{name}"])
def test_a_fork_url_with_a_dotdot_segment_is_refused_naming_the_upstream_and_url(adopting: Adopting,
                                                                                 form: str) -> None:
    tree = adopting.fork("kernels")
    url = form.format(tree=tree, name=tree.name)  # it leads back to the real fork
    before = adopting.files()
    result = adopting.run("import", "kernels", "--from", f"{url}@fork")
    _one_error(result, ExitCode.BAD_INPUT, f"--from (upstream kernels): {url!r} has a '..' segment")
    assert adopting.files() == before


def test_import_into_a_stack_that_has_patches_is_refused(project: Project) -> None:
    before = project.snapshot()
    result = project.run("import", "kernels", "--from", f"{project.kernels}@main")
    _one_error(result, ExitCode.BAD_INPUT, "already lists 2 patches: kpatch import fills an empty stack")
    assert project.snapshot() == before


# --- a folder of patches (--series) ------------------------------------------------------------------------------


def _quilt(adopting: Adopting, name: str, folder: Path, *, series: bool = True) -> list[str]:
    """`git diff` of each commit of the old project's stack, as plain diffs named like its patch files."""
    tree = adopting.fork(name)
    names = [line for line in (adopting.old.root / "patches" / name / "series").read_text().splitlines()
             if not line.startswith("#")]
    commits = git(tree, "rev-list", "--reverse", f"fork~{len(names)}..fork").split()
    folder.mkdir(parents=True)
    for patch, commit in zip(names, commits, strict=True):
        diff = subprocess.run(["git", "diff", f"{commit}~1", commit], cwd=tree, check=True, capture_output=True)
        (folder / patch).write_bytes(diff.stdout)  # bytes: the kernels' .ini file has CRLF lines
    if series:
        (folder / "series").write_text("# quilt\n" + "".join(f"{n} -p1\n" for n in names))
    return names


def _diffs(root: Path, name: str) -> dict[str, str]:
    """Each patch file's diff (from its first 'diff --git' line), by file name."""
    return {n: text[text.index("\ndiff --git "):] for n, text in
            ((n, data.decode()) for n, data in _stack(root, name).items() if n.endswith(".patch"))}


AUTHOR = "Pat Cher <pat@example.invalid>"


def test_importing_git_diffs_of_the_stacks_gives_the_same_diffs_and_trees(adopting: Adopting, tmp_path: Path) -> None:
    for name in ("kernels", "app"):
        names = _quilt(adopting, name, tmp_path / f"quilt-{name}", series=name == "kernels")
        result = adopting.run("import", name, "--series", str(tmp_path / f"quilt-{name}"), "--author", AUTHOR)
        assert result.exit_code == 0, result.output
        assert _diffs(adopting.new, name) == _diffs(adopting.old.root, name)
        series = (adopting.new / "patches" / name / "series").read_text().splitlines()
        assert series[1:] == names  # the subjects come from the file names, which came from the subjects
        first = (adopting.new / "patches" / name / names[0]).read_text()
        assert f"From: {AUTHOR}" in first
    assert adopting.run("apply").exit_code == 0
    for name in ("kernels", "app"):
        assert git(adopting.new / "work" / name, "rev-parse", "HEAD^{tree}") == \
            git(adopting.fork(name), "rev-parse", "fork^{tree}")


def test_a_quilt_header_gives_the_subject_body_and_author(adopting: Adopting, tmp_path: Path) -> None:
    folder = tmp_path / "quilt"
    _quilt(adopting, "kernels", folder)
    first = folder / "0001-Add-the-kimi-op.patch"
    first.write_bytes(b"From: Ann Other <ann@example.invalid>\nSubject: [PATCH] kimi: the op\n\nWhy it is needed.\n\n"
                      b"---\n" + first.read_bytes())
    result = adopting.run("import", "kernels", "--series", str(folder), "--author", AUTHOR)
    assert result.exit_code == 0, result.output
    written = (adopting.new / "patches" / "kernels" / "0001-kimi-the-op.patch").read_text()
    assert "From: Ann Other <ann@example.invalid>\n" in written and "Subject: [PATCH] kimi: the op\n" in written
    assert "\nWhy it is needed.\n---\n" in written


def test_a_dep3_header_gives_the_subject_and_author(adopting: Adopting, tmp_path: Path) -> None:
    folder = tmp_path / "quilt"
    _quilt(adopting, "kernels", folder)
    first = folder / "0001-Add-the-kimi-op.patch"
    first.write_bytes(b"Description: Add the kimi op for XPU\nAuthor: Deb Ian <deb@example.invalid>\n"
                      b"Forwarded: no\n\n" + first.read_bytes())
    result = adopting.run("import", "kernels", "--series", str(folder), "--author", AUTHOR)
    assert result.exit_code == 0, result.output
    written = (adopting.new / "patches" / "kernels" / "0001-Add-the-kimi-op-for-XPU.patch").read_text()
    assert "From: Deb Ian <deb@example.invalid>\n" in written and "\nForwarded: no\n" in written


def test_plain_diffs_without_a_series_file_go_in_name_order(adopting: Adopting, tmp_path: Path) -> None:
    folder = tmp_path / "diffs"
    names = _quilt(adopting, "kernels", folder, series=False)
    (folder / names[1]).rename(folder / "10_second.diff")
    (folder / names[0]).rename(folder / "09_first.diff")
    (folder / "README").write_text("not a patch\n")
    result = adopting.run("import", "kernels", "--series", str(folder), "--author", AUTHOR)
    assert result.exit_code == 0, result.output
    series = (adopting.new / "patches" / "kernels" / "series").read_text().splitlines()
    assert series[1:] == ["0001-first.patch", "0002-second.patch"]


@pytest.mark.parametrize(("spoil", "code", "says"), [
    ("latin1", ExitCode.BAD_INPUT, "0002-Test-the-kimi-op.patch:1: not UTF-8 (byte 0xe9)"),
    ("outside", ExitCode.BAD_INPUT, "0002-Test-the-kimi-op.patch: it writes '../escaped.py', outside the tree"),
    ("stale", ExitCode.CONFLICT, ": hunk at csrc/kimi.cpp:1 does not apply (nothing was written)"),
    ("no-author", ExitCode.BAD_INPUT, "0001-Add-the-kimi-op.patch: no author in its header: give --author"),
    ("unlisted", ExitCode.BAD_INPUT, "series:2: no patch file 'gone.patch'"),
])
def test_a_bad_patch_folder_is_refused_in_one_line_and_nothing_is_written(adopting: Adopting, tmp_path: Path,
                                                                          spoil: str, code: ExitCode,
                                                                          says: str) -> None:
    folder = tmp_path / "quilt"
    _quilt(adopting, "kernels", folder)
    second = folder / "0002-Test-the-kimi-op.patch"
    if spoil == "latin1":
        second.write_bytes(b"Caf\xe9 notes\n" + second.read_bytes())
    elif spoil == "outside":
        second.write_text("diff --git a/../escaped.py b/../escaped.py\nnew file mode 100644\n--- /dev/null\n"
                          "+++ b/../escaped.py\n@@ -0,0 +1 @@\n+print('out')\n")
    elif spoil == "stale":
        second.write_text("diff --git a/csrc/kimi.cpp b/csrc/kimi.cpp\n--- a/csrc/kimi.cpp\n+++ b/csrc/kimi.cpp\n"
                          "@@ -1,2 +1,2 @@\n-// not what is there\n+// kimi op\n void kimi() {}\n")
    elif spoil == "unlisted":
        (folder / "series").write_text("0001-Add-the-kimi-op.patch\ngone.patch\n")
    before = adopting.files()
    args = () if spoil == "no-author" else ("--author", AUTHOR)
    result = adopting.run("import", "kernels", "--series", str(folder), *args)
    _one_error(result, code, says)
    assert adopting.files() == before
    assert _leftovers(adopting, "kernels")[1] is False


# --- Requires: from the op contract ------------------------------------------------------------------------------


def _app_fork_without_requires(adopting: Adopting) -> Path:
    tree = _fork_with(adopting, "app", "loose", [("cherry-pick", "fork~1")])
    message = git(tree, "log", "-1", "--format=%B")
    assert "Requires: kernels/0001-Add-the-kimi-op.patch" in message
    git(tree, "commit", "--quiet", "--amend", "-m", message.replace("Requires: kernels/0001-Add-the-kimi-op.patch", ""))
    git(tree, "cherry-pick", "fork")
    return tree


def test_an_app_patch_calling_an_op_a_kernels_patch_registers_gets_a_suggested_requires(adopting: Adopting) -> None:
    _kernels_first(adopting)
    tree = _app_fork_without_requires(adopting)
    result = adopting.run("import", "app", "--from", f"{tree}@loose")
    assert result.exit_code == 0, result.output
    assert ("0001-Route-k3-to-the-XPU-path.patch calls op _C.fused_kimi_mla_insert: add "
            "'Requires: kernels/0001-Add-the-kimi-op.patch'") in result.stdout
    assert "Requires:" not in (adopting.new / "patches" / "app" / "0001-Route-k3-to-the-XPU-path.patch").read_text()


def test_requires_auto_writes_the_suggested_trailer_giving_the_original_patch_files(adopting: Adopting) -> None:
    _kernels_first(adopting)
    tree = _app_fork_without_requires(adopting)
    result = adopting.run("import", "app", "--from", f"{tree}@loose", "--requires-auto")
    assert result.exit_code == 0, result.output
    assert _stack(adopting.new, "app") == _stack(adopting.old.root, "app")
    assert _leftovers(adopting, "app") == ([], False)
    assert not (adopting.new / "work" / ".import" / "kernels.ops").exists()


def test_no_requires_is_suggested_when_the_patch_carries_it(adopting: Adopting) -> None:
    _kernels_first(adopting)
    result = adopting.run("import", "app", "--from", f"{adopting.fork('app')}@fork")
    assert result.exit_code == 0, result.output
    assert "calls op" not in result.stdout


# --- an import killed while it writes -----------------------------------------------------------------------------


def _killed_import(adopting: Adopting, point: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kpatch", "import", "kernels", "--from",
                           f"{adopting.fork('kernels')}@fork"], cwd=adopting.new, text=True, capture_output=True,
                          env={**os.environ, "KPATCH_TEST_KILL_AT": point}, timeout=300)


@pytest.mark.parametrize("recovery", ["--continue", "--abort"])
def test_an_import_killed_mid_write_is_finished_by_continue_or_undone_by_abort(adopting: Adopting,
                                                                               recovery: str) -> None:
    before = adopting.files()
    killed = _killed_import(adopting, "journal:1")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert adopting.files() != before  # one file written, the others not yet
    again = adopting.run("import", "kernels", "--from", f"{adopting.fork('kernels')}@fork")
    _one_error(again, ExitCode.WORKTREE, "run 'kpatch import --continue' or 'kpatch import --abort'")
    result = adopting.run("import", recovery)
    assert result.exit_code == 0, result.output
    if recovery == "--continue":
        assert _stack(adopting.new, "kernels") == _stack(adopting.old.root, "kernels")
    else:
        assert adopting.files() == before
    assert not (adopting.new / ".kpatch" / "journal").exists()


def test_an_import_killed_before_its_commit_point_wrote_nothing_and_continue_says_so(adopting: Adopting) -> None:
    before = adopting.files()
    killed = _killed_import(adopting, "journal:0")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    result = adopting.run("import", "--continue")
    assert result.exit_code == 0 and "had written nothing: run it again" in result.stderr, result.output
    assert adopting.files() == before


def test_importing_the_patches_folder_itself_gives_byte_identical_files(adopting: Adopting) -> None:
    """A folder of `git format-patch` mails with a series (kpatch's own patches/NAME) goes through git am."""
    for name in ("kernels", "app"):
        result = adopting.run("import", name, "--series", str(adopting.old.root / "patches" / name))
        assert result.exit_code == 0, result.output
        assert _stack(adopting.new, name) == _stack(adopting.old.root, name)


def test_mails_that_follow_each_other_go_to_one_git_am_with_one_path_check(adopting: Adopting,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A series of format-patch mails (Debian's are) is applied by one `git am` and its paths are checked by one
    `git apply --numstat`, not a pair of processes per patch; the files are the same as before."""
    from kpatch.gitx import repo

    started: list[str] = []
    real_run = repo.Repository.run

    def run(self: repo.Repository, args: list[str], **kwargs: object) -> object:
        started.append(args[0])
        return real_run(self, args, **kwargs)

    monkeypatch.setattr(repo.Repository, "run", run)
    folder = adopting.old.root / "patches" / "kernels"
    assert len(list(folder.glob("*.patch"))) > 1
    result = adopting.run("import", "kernels", "--series", str(folder))
    assert result.exit_code == 0, result.output
    assert (started.count("am"), started.count("apply")) == (1, 1), started
    assert _stack(adopting.new, "kernels") == _stack(adopting.old.root, "kernels")


def test_a_mail_that_does_not_apply_is_named_with_its_hunk(adopting: Adopting, tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "mails"
    shutil.copytree(adopting.old.root / "patches" / "kernels", folder)
    second = folder / "0002-Test-the-kimi-op.patch"
    second.write_text(second.read_text().replace("new file mode 100644\n", "").replace("--- /dev/null",
                                                                                       "--- a/tests/test_kimi.py"))
    before = adopting.files()
    result = adopting.run("import", "kernels", "--series", str(folder))
    _one_error(result, ExitCode.CONFLICT, "0002-Test-the-kimi-op.patch does not apply onto ")
    assert ": tests/test_kimi.py: does not exist in index (nothing was written)" in result.stderr, result.stderr
    assert adopting.files() == before and _leftovers(adopting, "kernels") == ([], False)


def test_base_names_where_the_fork_started_and_kpatch_toml_is_pinned_to_it(adopting: Adopting) -> None:
    _kernels_first(adopting)
    later = git(adopting.old.app, "rev-parse", "main~3")
    tree = adopting.fork("app")
    git(tree, "checkout", "--quiet", "-b", "later", later)
    git(tree, "cherry-pick", "fork~1", "fork")
    result = adopting.run("import", "app", "--from", f"{tree}@later", "--base", later)
    assert result.exit_code == 0, result.output
    assert f"kpatch.toml: base of app set to {later}" in result.stdout
    app = load(adopting.new / "kpatch.toml").get("app")
    assert (app.base, app.base_commit) == (later, None)
    assert "# the branch 'kpatch rebase' and the nightly follow" in (adopting.new / "kpatch.toml").read_text()
    applied = adopting.run("apply")
    assert applied.exit_code == 0, applied.output
    assert git(adopting.new / "work" / "app", "rev-parse", "HEAD^{tree}") == git(tree, "rev-parse", "later^{tree}")


def test_without_base_the_upstream_commits_of_a_later_fork_are_left_out_and_named(adopting: Adopting) -> None:
    _kernels_first(adopting)
    later = git(adopting.old.app, "rev-parse", "main~3")
    tree = adopting.fork("app")
    git(tree, "checkout", "--quiet", "-b", "later", later)
    git(tree, "cherry-pick", "fork~1", "fork")
    result = adopting.run("import", "app", "--from", f"{tree}@later")
    assert result.exit_code == 0, result.output
    assert result.stdout.count(": already upstream as ") == len(git(tree, "rev-list", f"v1.0..{later}").split())
    assert _stack(adopting.new, "app") == _stack(adopting.old.root, "app")


@pytest.mark.parametrize(("args", "says"), [
    (("kernels",), "give one of --from URL_OR_PATH@BRANCH and --series DIR"),
    (("kernels", "--from", "/x@main", "--series", "/x"), "give one of --from URL_OR_PATH@BRANCH and --series DIR"),
    (("--from", "/x@main"), "kpatch import needs the NAME of the upstream"),
    (("kernels", "--continue"), "--continue and --abort go alone"),
    (("--continue",), "nothing to continue: no interrupted import"),
    (("nosuch", "--series", "/x"), "unknown upstream 'nosuch'"),
    (("kernels", "--series", "/no/such/folder", "--author", "Pat <pat@example.invalid>"),
     "--series: no folder /no/such/folder"),
    (("kernels", "--series", "/tmp", "--author", "just a name"), "--author takes 'Name <email>'"),
])
def test_import_refuses_bad_arguments_in_one_line(project: Project, args: tuple[str, ...], says: str) -> None:
    before = project.snapshot()
    result = project.run("import", *args)
    code = ExitCode.WORKTREE if "nothing to continue" in says else ExitCode.BAD_INPUT
    _one_error(result, code, says)
    assert project.snapshot() == before


def test_a_series_that_renames_and_adds_files_in_new_folders_imports_and_applies_as_written(adopting: Adopting,
                                                                                             tmp_path: Path) -> None:
    """The import's scratch worktree holds only the paths the patches touch (a sparse checkout): a rename's old
    and new paths and a file in a folder the base does not have are among them; apply gives the fork's tree."""
    tree = _fork_with(adopting, "kernels", "moves", [])
    tracked = git(tree, "ls-files").splitlines()
    moved = next(p for p in tracked if p.endswith(".cpp"))
    (tree / "moved").mkdir()
    git(tree, "mv", moved, f"moved/{Path(moved).name}")
    git(tree, "commit", "--quiet", "-m", "Move a kernel source")
    (tree / "new" / "deep").mkdir(parents=True)
    (tree / "new" / "deep" / "file.txt").write_text("a new file in a new folder\n")
    git(tree, "add", "new")
    git(tree, "commit", "--quiet", "-m", "Add a file in a new folder")
    folder = tmp_path / "mails"
    folder.mkdir()
    names = git(tree, "format-patch", "-M", "-o", str(folder), "HEAD~2..HEAD").splitlines()
    (folder / "series").write_text("".join(f"{Path(n).name}\n" for n in names))
    result = adopting.run("import", "kernels", "--series", str(folder))
    assert result.exit_code == 0, result.output
    assert "rename from " in (adopting.new / "patches" / "kernels" / Path(names[0]).name).read_text()
    assert adopting.run("apply").exit_code == 0
    assert git(adopting.new / "work" / "kernels", "rev-parse", "HEAD^{tree}") == git(tree, "rev-parse", "HEAD^{tree}")
