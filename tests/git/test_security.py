"""Hostile input (issue 8, items 1, 2, 4-7): URLs that would run commands, credentials in URLs, file modes,
symlinked recorded resolutions, unexported work, export from a worktree on another branch; paths in the run
state and the journal (a copied project, edited files).

kpatch runs as its own process here (tests/support/cli.py): the marker files, modes and environment are the
real ones a user gets.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from kpatch.errors import ExitCode, UpstreamError
from kpatch.examples.upstreams import commit
from tests.support.cli import Ran, kpatch
from tests.support.gitrepos import Project, git, mirror_dir
from tests.support.https_git import https_git
from tests.support.rebase_repos import FILES, RebaseProject, replace_line

SOURCES = ("kpatch.toml", "--url", "KPATCH_URL_KERNELS")
COMMANDS = ("apply", "rebase")


def point_kernels(project: Project, source: str, url: str) -> tuple[list[str], dict[str, str]]:
    """Make the kernels upstream's URL `url` through `source`: (extra arguments, extra environment)."""
    if source == "kpatch.toml":
        toml = project.root / "kpatch.toml"
        old = f'url = "{project.kernels}"'
        assert old in toml.read_text()
        toml.write_text(toml.read_text().replace(old, f"url = {json.dumps(url)}"))
        return [], {}
    if source == "--url":
        return ["--url", f"kernels={url}"], {}
    return [], {"KPATCH_URL_KERNELS": url}


def user_git_config(lines: str) -> None:
    """Add to the user's own git config (the file GIT_CONFIG_GLOBAL names, as conftest isolates it)."""
    with Path(os.environ["GIT_CONFIG_GLOBAL"]).open("a", encoding="utf-8") as handle:
        handle.write(lines)


def plain_git_runs(url: str, cwd: Path) -> None:
    """git without kpatch's pins, on the same user config: proves the vector is live on this machine."""
    subprocess.run(["git", "ls-remote", url], cwd=cwd, capture_output=True, timeout=60)


# --- 1. URLs that would run commands --------------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("source", SOURCES)
def test_a_url_that_is_a_git_option_is_refused_and_runs_nothing(project: Project, tmp_path: Path, source: str,
                                                                 command: str) -> None:
    marker = tmp_path / "MARKER"
    args, env = point_kernels(project, source, f"--upload-pack=touch {marker}")
    before = project.snapshot()
    ran = kpatch(project.root, command, *args, env=env)
    assert not marker.exists()
    assert ran.exit_code == ExitCode.BAD_INPUT, ran.output
    lines = (project.root / "kpatch.toml").read_text().splitlines()
    url_line = next((n for n, line in enumerate(lines, 1) if "upload-pack" in line), 0)
    where = {"kpatch.toml": f"kpatch.toml:{url_line}: ", "--url": "--url kernels: ",
             "KPATCH_URL_KERNELS": "KPATCH_URL_KERNELS"}
    [error] = ran.errors()
    assert where[source] in error and "looks like a command-line option, not a URL" in error
    assert project.snapshot() == before


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("form", ["file://{folder}/../{name}", "{folder}/../{name}"])
def test_a_url_with_a_dotdot_segment_is_refused_naming_upstream_and_url(project: Project, source: str,
                                                                        command: str, form: str) -> None:
    url = form.format(folder=project.kernels, name=project.kernels.name)  # it leads back to the real upstream
    args, env = point_kernels(project, source, url)
    before = project.snapshot()
    ran = kpatch(project.root, command, *args, env=env)
    assert ran.exit_code == ExitCode.BAD_INPUT, ran.output
    where = {"kpatch.toml": "upstream kernels: ", "--url": "--url kernels: ", "KPATCH_URL_KERNELS":
             "KPATCH_URL_KERNELS kernels: "}
    [error] = ran.errors()
    assert f"{where[source]}{url!r} has a '..' segment: give the folder's absolute path" in error, error
    assert project.snapshot() == before


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("source", SOURCES)
def test_an_ext_url_is_refused_even_where_the_users_git_config_allows_ext(project: Project, tmp_path: Path,
                                                                          source: str, command: str) -> None:
    user_git_config('[protocol "ext"]\n\tallow = always\n')
    marker, control = tmp_path / "MARKER", tmp_path / "CONTROL"
    args, env = point_kernels(project, source, f"ext::sh -c touch% {marker}")
    before = project.snapshot()
    ran = kpatch(project.root, command, *args, env=env)
    assert not marker.exists()
    assert ran.exit_code == ExitCode.BAD_INPUT, ran.output
    [error] = ran.errors()
    assert "git remote helpers (ext::) are not allowed" in error
    assert project.snapshot() == before
    plain_git_runs(f"ext::sh -c touch% {control}", tmp_path)
    assert control.exists()  # the user's config really would have run it


@pytest.mark.parametrize("command", COMMANDS)
def test_a_users_insteadof_rewrite_to_ext_is_blocked_at_the_fetch(project: Project, tmp_path: Path,
                                                                  command: str) -> None:
    """A valid https URL that the user's git config rewrites to ext::: only the fetch layer can stop it."""
    marker = tmp_path / "MARKER"
    # insteadOf replaces a prefix: the whole URL is matched, so that nothing is appended to the command.
    user_git_config(f'[protocol "ext"]\n\tallow = always\n[url "ext::sh -c touch% {marker}"]\n'
                    "\tinsteadOf = https://evil.invalid/kernels.git\n")
    point_kernels(project, "kpatch.toml", "https://evil.invalid/kernels.git")
    before = project.snapshot()
    ran = kpatch(project.root, command)
    assert not marker.exists()
    assert ran.exit_code == ExitCode.UPSTREAM, ran.output
    [error] = ran.errors()
    assert "cannot fetch https://evil.invalid/kernels.git" in error and "transport 'ext' not allowed" in error
    assert project.snapshot() == before
    plain_git_runs("https://evil.invalid/kernels.git", tmp_path)
    assert marker.exists()  # the rewrite is live: plain git with the same config ran the command


def test_the_fetch_layer_refuses_ext_and_options_whatever_the_user_config(tmp_path: Path) -> None:
    """Mirror.fetch validates for itself, and the runner's fetch pins the transports below any validation."""
    from kpatch.gitx import Mirror, runner

    marker = tmp_path / "MARKER"
    ext = f"ext::sh -c touch% {marker}"
    user_git_config(f'[protocol "ext"]\n\tallow = always\n[url "{ext}"]\n\tinsteadOf = https://evil.invalid/k.git\n')
    mirror = Mirror(tmp_path / "mirror.git", "kernels")
    for url in (ext, f"--upload-pack=touch {marker}"):
        with pytest.raises(UpstreamError, match=r"not allowed|command-line option"):
            mirror.fetch(url, sleep=lambda seconds: None)
    with pytest.raises(UpstreamError, match="transport 'ext' not allowed"):
        mirror.fetch("https://evil.invalid/k.git", sleep=lambda seconds: None)
    bare = tmp_path / "bare.git"
    runner.run(["init", "--quiet", "--bare", "--", str(bare)])
    for url in (ext, "https://evil.invalid/k.git", f"--upload-pack=touch {marker}"):
        done = runner.run(["fetch", "--", url, "+refs/heads/*:refs/heads/*"], bare, check=False, user_config=True)
        assert done.status != 0
    assert not marker.exists()
    plain_git_runs("https://evil.invalid/k.git", tmp_path)
    assert marker.exists()  # the rewrite is live: plain git with the same config ran the command


REF_CASES = {"apply --onto": ("apply", True, ExitCode.UPSTREAM), "rebase --onto": ("rebase", True, ExitCode.UPSTREAM),
             "rebase to the branch": ("rebase", False, ExitCode.UPSTREAM), "status": ("status", False, ExitCode.OK)}


@pytest.mark.parametrize("case", sorted(REF_CASES))
def test_a_ref_that_looks_like_a_git_option_is_only_ever_a_ref(project: Project, tmp_path: Path, case: str) -> None:
    """`--output=FILE` would make git log write a file: from --onto or as the branch in kpatch.toml, it stays a name."""
    command, onto, code = REF_CASES[case]
    assert kpatch(project.root, "apply").exit_code == 0  # the mirrors exist: every ref is looked up in them
    marker = tmp_path / "MARKER"
    ref = f"--output={marker}"
    if not onto:
        toml = project.root / "kpatch.toml"
        toml.write_text(toml.read_text().replace('branch = "main"', f"branch = {json.dumps(ref)}"))
    before = project.snapshot()
    ran = kpatch(project.root, command, *(["--onto", f"kernels={ref}"] if onto else []))
    assert not marker.exists()
    assert ran.exit_code == code, ran.output
    if code:
        [error] = ran.errors()
        assert f"{ref!r} is not a commit, tag or branch" in error
    assert project.snapshot() == before


# --- 2. credentials in URLs ------------------------------------------------------------------------------------


def leaks(folder: Path, outputs: list[Ran], secret: bytes, allowed: set[Path] | None = None) -> list[str]:
    """Every file under `folder` and every output that holds `secret` (files in `allowed` aside)."""
    found = [str(p) for p in folder.rglob("*") if p.is_file() and not p.is_symlink() and p not in (allowed or set())
             and secret in p.read_bytes()]
    found += [f"output of run {i}" for i, ran in enumerate(outputs) if secret.decode() in ran.output]
    return found


@pytest.mark.parametrize("source", SOURCES)
def test_credentials_of_an_unreachable_url_are_in_no_output_or_file(project: Project, tmp_path: Path,
                                                                    source: str) -> None:
    temp = tmp_path / "tmpdir"
    temp.mkdir()
    assert kpatch(project.root, "apply").exit_code == 0  # worktrees, state and logs exist, then the URL changes
    args, env = point_kernels(project, source, "https://user:secret@127.0.0.1:9/x.git")
    env["TMPDIR"] = str(temp)
    runs = [kpatch(project.root, *cmd, *args, env=env) for cmd in (
        ["status"], ["status", "--json"], ["export", "--check"], ["export"], ["apply", "--json"],
        ["apply", "--onto", "kernels=main"], ["apply", "--onto", "kernels=main", "--json"], ["rebase"],
        ["rebase", "--json"])]
    if source == "kpatch.toml":  # a new URL in kpatch.toml is another repository: its mirror must be fetched
        assert [r.exit_code for r in runs] == [0, 0, 0, 0, ExitCode.UPSTREAM, ExitCode.UPSTREAM, ExitCode.UPSTREAM,
                                               ExitCode.UPSTREAM, ExitCode.UPSTREAM], [r.output for r in runs]
        assert "https://***@127.0.0.1:9/x.git" in runs[0].stdout
        assert "cannot fetch https://***@127.0.0.1" in runs[-2].stderr
    else:  # a URL the person gave is checked by every command that reads the upstreams: bad input
        assert [r.exit_code for r in runs] == [ExitCode.BAD_INPUT] * len(runs), [r.output for r in runs]
        assert "kernels=https://***@127.0.0.1:9/x.git is no git repository kpatch can fetch from" in runs[-2].stderr
    allowed = {project.root / "kpatch.toml"} if source == "kpatch.toml" else set()  # the user's own file
    assert leaks(tmp_path, runs, b"secret", allowed) == []


def test_credentials_of_a_url_that_works_are_in_no_file_kpatch_writes(project: Project, tmp_path: Path) -> None:
    """Fetch over HTTPS with basic auth, apply, status, export, a rebase killed inside its journal and continued,
    and a local build with its lock: the password is in none of it."""
    temp = tmp_path / "tmpdir"
    temp.mkdir()
    runs: list[Ran] = []
    journal_copies: list[bytes] = []
    with https_git({"kernels": project.kernels}, tmp_path / "server", "user", "secret") as server:
        url = server.url.replace("https://", "https://user:secret@") + "/kernels.git"
        env = {"KPATCH_URL_KERNELS": url, "GIT_SSL_CAINFO": str(server.ca_file), "TMPDIR": str(temp)}
        for cmd in (["apply"], ["status"], ["status", "--json"], ["export", "--check"], ["apply", "--json"]):
            runs.append(kpatch(project.root, *cmd, env=env))
        killed = kpatch(project.root, "rebase", env={**env, "KPATCH_TEST_KILL_AT": "journal:1"})
        journal = project.root / ".kpatch" / "journal"
        journal_copies = [p.read_bytes() for p in journal.rglob("*") if p.is_file()]
        runs.append(kpatch(project.root, "rebase", "--continue", "--json", env=env))
        runs.append(kpatch(project.root, "build-wheels", "--backend", "local", "--json", env=env))
    assert [r.exit_code for r in runs] == [0] * len(runs), [r.output for r in runs]
    assert killed.exit_code == -9 and journal_copies  # the journal was there to be read
    assert server.authorized and server.refused  # git was asked for the password, and sent it
    lock = project.root / "dist" / "pylock.toml"
    assert "https://***@127.0.0.1" in lock.read_text()
    assert [c for c in journal_copies if b"secret" in c] == []
    assert leaks(tmp_path / "home", runs, b"secret") + leaks(project.root, [], b"secret") + \
        leaks(temp, [], b"secret") == []


# --- 4. file modes ---------------------------------------------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_export_keeps_each_files_mode_and_a_new_file_gets_the_umask_default(project: Project) -> None:
    assert kpatch(project.root, "apply").exit_code == 0
    stack = project.root / "patches" / "kernels"
    first, second = stack / "0001-Add-the-kimi-op.patch", stack / "0002-Test-the-kimi-op.patch"
    modes = {first: 0o664, second: 0o600, stack / "series": 0o644}
    for path, wanted in modes.items():
        path.chmod(wanted)
    before = {path: path.read_bytes() for path in modes}
    tree = project.workdir / "kernels"
    git(tree, "checkout", "-q", "HEAD~2")
    commit(tree, {"csrc/kimi.cpp": "// kimi op, reworded\nvoid kimi() {}\n"}, "Add the kimi op\n\nReworded.\n", 7000)
    commit(tree, {"tests/test_kimi.py": "def test_kimi():\n    assert 2 + 2 == 4\n"},
           "Test the kimi op\n\nUpstream-Status: pending\n", 7001)
    commit(tree, {"csrc/more.cpp": "// more\n"}, "Add more\n", 7002)
    ran = kpatch(project.root, "export", umask=0o027)
    assert ran.exit_code == 0, ran.output
    assert all(path.read_bytes() != data for path, data in before.items())  # each was rewritten
    assert {path: mode(path) for path in modes} == modes
    assert mode(stack / "0003-Add-more.patch") == 0o640  # 0o666 less the umask, as `touch` would make it


def test_rebase_keeps_each_files_mode_and_new_files_get_the_umask_default(rp: RebaseProject) -> None:
    stack = rp.root / "patches" / "kernels"
    modes = {rp.root / "kpatch.toml": 0o664, stack / "series": 0o600, stack / "0003-Fix-c.patch": 0o640,
             rp.root / "patches" / "app" / "series": 0o644}
    for path, wanted in modes.items():
        path.chmod(wanted)
    before = {path: path.read_bytes() for path in modes}
    assert kpatch(rp.root, "rebase").exit_code == ExitCode.CONFLICT
    tree = rp.root / "work" / ".rebase" / "kernels"
    (tree / "c.txt").write_text(replace_line(FILES["c"], 15, "c line 15 rewritten upstream, fixed by us"))
    git(tree, "add", "c.txt")
    ran = kpatch(rp.root, "rebase", "--continue", umask=0o022)
    assert ran.exit_code == 0, ran.output
    changed = [path for path, data in before.items() if path.read_bytes() != data]
    assert rp.root / "kpatch.toml" in changed and stack / "0003-Fix-c.patch" in changed and stack / "series" in changed
    assert {path: mode(path) for path in modes} == modes
    recorded = [p for p in (rp.root / "patches" / ".rerere").rglob("*") if p.is_file()]
    assert recorded and {mode(p) for p in recorded} == {0o644}


# --- 5. symlinks in the recorded resolutions -------------------------------------------------------------------


@pytest.mark.parametrize("planted", ["a file in it", "the stack's folder", "the .rerere folder"])
def test_a_symlink_in_the_recorded_resolutions_is_refused(rp: RebaseProject, tmp_path: Path, planted: str) -> None:
    outside = tmp_path / "outside"
    resolution = outside / "kernels" / ("1" * 40)
    resolution.mkdir(parents=True)
    (resolution / "preimage").write_text("SECRET-PRE\n")
    (resolution / "postimage").write_text("SECRET-POST\n")
    kept = rp.root / "patches" / ".rerere"
    if planted == "a file in it":
        (kept / "kernels" / ("1" * 40)).mkdir(parents=True)
        (kept / "kernels" / ("1" * 40) / "preimage").write_text("plain\n")
        (kept / "kernels" / ("1" * 40) / "postimage").symlink_to(resolution / "postimage")
        named = kept / "kernels" / ("1" * 40) / "postimage"
    elif planted == "the stack's folder":
        kept.mkdir()
        (kept / "kernels").symlink_to(outside / "kernels")
        named = kept / "kernels"
    else:
        kept.symlink_to(outside)
        named = kept
    before = rp.tracked()
    ran = kpatch(rp.root, "rebase")
    assert ran.exit_code == ExitCode.BAD_INPUT, ran.output
    [error] = ran.errors()
    assert f"{named}: recorded resolutions may not" in error
    assert rp.tracked() == before
    cache = rp.root.parent / "home" / ".cache" / "kpatch"
    assert mirror_dir(cache, "kernels").is_dir()  # fetched: the rr-cache it would have been copied to
    assert leaks(cache, [], b"SECRET") == []


# --- 6. unexported commits ---------------------------------------------------------------------------------------


def backups(project: Project, name: str) -> dict[str, str]:
    mirror = mirror_dir(project.root.parent / "home" / ".cache" / "kpatch", name)
    listing = git(mirror, "for-each-ref", "--format=%(objectname) %(refname)", f"refs/kpatch/backup/{name}/")
    return {ref: sha for sha, ref in (line.split() for line in listing.splitlines())}


@pytest.mark.parametrize("command", COMMANDS)
def test_unexported_commits_are_refused_then_discarded_only_on_request_and_kept_under_a_ref(
        project: Project, command: str) -> None:
    assert kpatch(project.root, "apply").exit_code == 0
    tree = project.workdir / "kernels"
    mine = commit(tree, {"csrc/mine.cpp": "// my work\n"}, "[XPU] My work, not exported\n", 8000)
    before = project.snapshot()
    refused = kpatch(project.root, command)
    assert refused.exit_code == ExitCode.WORKTREE, refused.output
    [error] = refused.errors()
    assert f"{mine[:12]} [XPU] My work, not exported" in error and "'kpatch export kernels'" in error
    assert f"'kpatch {command} --discard'" in error
    assert project.snapshot() == before
    assert mine not in backups(project, "kernels").values()
    moved = kpatch(project.root, command, "--discard")
    assert moved.exit_code == 0, moved.output
    assert git(tree, "rev-parse", "HEAD") != mine and not (tree / "csrc" / "mine.cpp").exists()
    assert mine in backups(project, "kernels").values()  # reachable: `git checkout <ref>` brings it back


def test_exported_commits_move_without_discard_and_are_kept_under_a_ref_too(project: Project) -> None:
    assert kpatch(project.root, "apply").exit_code == 0
    tree = project.workdir / "kernels"
    mine = commit(tree, {"csrc/mine.cpp": "// my work\n"}, "[XPU] My work\n", 8000)
    assert kpatch(project.root, "export").exit_code == 0
    assert kpatch(project.root, "apply").exit_code == 0
    assert (tree / "csrc" / "mine.cpp").exists() and git(tree, "log", "-1", "--format=%s") == "[XPU] My work"
    assert mine in backups(project, "kernels").values()


# --- 7. export from a worktree someone switched to a branch ------------------------------------------------------


@pytest.mark.parametrize("check", [False, True])
def test_export_from_a_worktree_on_an_upstream_branch_refuses_and_writes_nothing(project: Project,
                                                                                 check: bool) -> None:
    assert kpatch(project.root, "apply").exit_code == 0
    tree = project.workdir / "kernels"
    git(tree, "checkout", "-q", "main")
    before = project.snapshot()
    ran = kpatch(project.root, "export", *(["--check"] if check else []))
    assert ran.exit_code == ExitCode.WORKTREE, ran.output
    [error] = ran.errors()
    assert f"worktree {tree} is not on the kernels stack" in error
    sha, subject = git(project.kernels, "log", "--reverse", "--format=%H %s", f"{project.kernels_base}..main"
                       ).split("\n")[0].split(" ", 1)
    assert f"14 commit(s) since the base are upstream's (e.g. {sha[:12]} \"{subject}\")" in error
    assert project.snapshot() == before


def test_export_from_a_worktree_before_the_base_refuses_and_writes_nothing(project: Project) -> None:
    assert kpatch(project.root, "apply").exit_code == 0
    tree = project.workdir / "kernels"
    git(tree, "checkout", "-q", f"{project.kernels_base}~3")
    before = project.snapshot()
    ran = kpatch(project.root, "export")
    assert ran.exit_code == ExitCode.WORKTREE, ran.output
    [error] = ran.errors()
    assert f"does not contain its base {project.kernels_base[:12]}" in error
    assert project.snapshot() == before


def test_inherited_git_dir_does_not_reach_kpatch_git(project: Project, tmp_path: Path) -> None:
    """kpatch run from a git hook (GIT_DIR exported) must not fetch into, or prune the branches of, that repo."""
    victim = tmp_path / "victim"
    subprocess.run(["git", "init", "-q", "-b", "master", str(victim)], check=True)
    git(victim, "commit", "-q", "--allow-empty", "-m", "mine")
    before = git(victim, "for-each-ref")
    os.environ["GIT_DIR"] = str(victim / ".git")
    try:
        project.run("apply")
    finally:
        del os.environ["GIT_DIR"]
    assert git(victim, "for-each-ref") == before


def test_file_names_reach_git_as_literal_paths_not_patterns(tmp_path: Path) -> None:
    """A patch may create a file called `*`: cleaning it after an interrupted am removes that file, not every
    untracked file of the person's worktree; a stack file called `star*.txt` is looked up as itself, not as a glob."""
    from kpatch.gitx import Repository

    tree = tmp_path / "tree"
    subprocess.run(["git", "init", "-q", str(tree)], check=True)

    def commit_file(name: str) -> str:
        (tree / name).write_text(f"{name}\n")
        git(tree, "add", "--", f":(literal){name}")
        git(tree, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", name)
        return git(tree, "rev-parse", "HEAD").strip()

    first = commit_file("star*.txt")
    commit_file("starling.txt")
    (tree / "*").write_text("what a patch wrote\n")
    (tree / "notes.txt").write_text("a person's untracked notes\n")
    repo = Repository(tree)
    repo.remove_untracked(["*"])
    assert not (tree / "*").exists() and (tree / "notes.txt").read_text() == "a person's untracked notes\n"
    assert repo.last_commit_touching(first, "HEAD", ["star*.txt"]) is None


def test_inherited_git_dir_does_not_reach_gitpython(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GitPython starts its own `git cat-file` processes (a culprit's subject, author and date): run from a git
    hook, they must read kpatch's repository, not the one GIT_DIR names."""
    from kpatch.gitx import Repository

    ours, victim = tmp_path / "ours", tmp_path / "victim"
    for folder, subject in ((ours, "our commit"), (victim, "the person's commit")):
        subprocess.run(["git", "init", "-q", str(folder)], check=True)
        git(folder, "commit", "-q", "--allow-empty", "-m", subject)
    sha = git(ours, "rev-parse", "HEAD").strip()
    monkeypatch.setenv("GIT_DIR", str(victim / ".git"))
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(victim / ".git" / "objects"))
    assert Repository(ours).commit_info(sha).subject == "our commit"


# --- 10. paths in the run state and the journal are not trusted ---------------------------------------------------


def _stopped_rebase(rp: RebaseProject) -> Path:
    """A rebase stopped at its conflict, the person half-way through resolving it: the scratch worktree."""
    assert kpatch(rp.root, "apply").exit_code == 0
    assert kpatch(rp.root, "rebase").exit_code == ExitCode.CONFLICT
    scratch = rp.root / "work" / ".rebase" / "kernels"
    (scratch / "c.txt").write_text("a person's half-done resolution\n")
    return scratch


def test_abort_in_a_copied_project_leaves_the_originals_rebase_alone(rp: RebaseProject, tmp_path: Path) -> None:
    """`cp -a project copy; cd copy; kpatch rebase --abort` used to delete the original's work/.rebase (state.json
    named its absolute paths), with the person's half-done resolution in it."""
    scratch = _stopped_rebase(rp)
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(rp.root), str(copy)], check=True)
    ran = kpatch(copy, "rebase", "--abort")
    assert ran.exit_code == 0, ran.output
    assert (scratch / "c.txt").read_text() == "a person's half-done resolution\n"
    assert json.loads((rp.root / ".kpatch" / "state.json").read_text())["operation"]["kind"] == "rebase"
    assert not (copy / "work" / ".rebase").exists()
    assert kpatch(rp.root, "status").exit_code == 0


def test_a_rebase_state_whose_tree_names_another_folder_removes_only_the_scratch(rp: RebaseProject,
                                                                                 tmp_path: Path) -> None:
    """A stack's `tree` in state.json used to be handed to the abort's rmtree: any folder could go."""
    _stopped_rebase(rp)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me\n")
    path = rp.root / ".kpatch" / "state.json"
    raw = json.loads(path.read_text())
    raw["operation"]["stacks"]["kernels"]["tree"] = str(victim)
    path.write_text(json.dumps(raw))
    ran = kpatch(rp.root, "rebase", "--abort")
    assert ran.exit_code == 0, ran.output
    assert (victim / "precious.txt").read_text() == "keep me\n"
    assert not (rp.root / "work" / ".rebase").exists()


def test_a_run_state_naming_an_unknown_upstream_is_refused_in_one_line(rp: RebaseProject) -> None:
    """An upstream name in state.json becomes a path (work/<name>, mirrors/<name>.git): only kpatch.toml's count."""
    _stopped_rebase(rp)
    path = rp.root / ".kpatch" / "state.json"
    raw = json.loads(path.read_text())
    stacks = raw["operation"]["stacks"]
    stacks["../../victim"] = {**stacks.pop("kernels"), "name": "../../victim"}
    path.write_text(json.dumps(raw))
    for command in (["rebase", "--abort"], ["status"]):
        ran = kpatch(rp.root, *command)
        assert ran.exit_code == ExitCode.WORKTREE, ran.output
        [error] = ran.errors()
        assert "names upstream '../../victim', which kpatch.toml does not have" in error


def test_a_run_state_nested_too_deeply_is_one_line_exit_3(project: Project) -> None:
    (project.root / ".kpatch").mkdir()
    (project.root / ".kpatch" / "state.json").write_text("[" * 100_000 + "]" * 100_000)
    ran = kpatch(project.root, "status")
    assert ran.exit_code == ExitCode.WORKTREE, ran.output
    [error] = ran.errors()
    assert "unreadable run state (nested too deeply)" in error


@pytest.mark.parametrize("where", ["a file", "another project", "empty"])
def test_a_recorded_workdir_that_is_not_this_projects_is_one_line_exit_3(project: Project, tmp_path: Path,
                                                                        where: str) -> None:
    assert kpatch(project.root, "apply").exit_code == 0
    other = tmp_path / "other"
    (other / ".kpatch").mkdir(parents=True)
    (other / "kpatch.toml").write_text("")
    (tmp_path / "a-file").write_text("")
    recorded = {"a file": str(tmp_path / "a-file"), "another project": str(other / "work"), "empty": ""}[where]
    path = project.root / ".kpatch" / "state.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "workdir": recorded}))
    before = project.snapshot()
    for command in (["apply"], ["rebase"], ["status"]):
        ran = kpatch(project.root, *command)
        assert ran.exit_code == ExitCode.WORKTREE, ran.output
        [error] = ran.errors()
        assert "the recorded work folder" in error and "pass --workdir" in error
    assert project.snapshot() == before


def test_rebase_refuses_to_move_a_folder_that_is_not_a_kpatch_worktree(project: Project) -> None:
    """A recorded work folder where `<name>` is someone's own repository: rebase used to check it out there (a raw
    git error, exit 5, or worse); it refuses before changing anything."""
    assert kpatch(project.root, "apply").exit_code == 0
    path = project.root / ".kpatch" / "state.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "workdir": str(project.kernels.parent)}))
    before = git(project.kernels, "rev-parse", "HEAD"), project.snapshot()
    ran = kpatch(project.root, "rebase")
    assert ran.exit_code == ExitCode.WORKTREE, ran.output
    [error] = ran.errors()
    assert f"{project.kernels} exists but is not a kpatch worktree of kernels" in error
    assert (git(project.kernels, "rev-parse", "HEAD"), project.snapshot()) == before


def _but_the_journal(snapshot: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in snapshot.items() if not k.startswith(".kpatch/journal")}


def _journal(project: Project, steps: list[dict[str, object]] | None, text: str | None = None) -> Path:
    folder = project.root / ".kpatch" / "journal"
    (folder / "new").mkdir(parents=True)
    (folder / "old").mkdir()
    (folder / "operation").write_text("export")
    (folder / "journal.json").write_text(text if text is not None else
                                         json.dumps({"operation": "export", "steps": steps}))
    return folder


@pytest.mark.parametrize("target", ["outside", "symlink", "folder in the project", "git"])
def test_journal_targets_outside_the_projects_files_are_refused(project: Project, tmp_path: Path,
                                                                 target: str) -> None:
    """A journal step `{"target": "/some/dir", "new": null}` made `export --continue` delete that folder, and
    `--abort` wrote the kept copy over any file: targets must be files of the project (no symlink out)."""
    assert kpatch(project.root, "apply").exit_code == 0
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me\n")
    (project.root / "link").symlink_to(victim)
    paths = {"outside": victim, "symlink": project.root / "link" / "precious.txt",
             "folder in the project": project.root / "patches", "git": project.workdir / "kernels" / ".git"}
    folder = _journal(project, [{"target": str(paths[target]), "new": None, "old": None},
                                {"target": str(victim / "precious.txt"), "new": None, "old": "w0"}])
    (folder / "old" / "w0").write_text("overwritten\n")
    before = _but_the_journal(project.snapshot())
    ran = kpatch(project.root, "export", "--continue")
    assert ran.exit_code == ExitCode.WORKTREE, ran.output
    [error] = ran.errors()
    assert ("unreadable journal" in error and "is not a file of the project" in error) or "is a folder" in error
    assert "run 'kpatch export --abort' to set it aside" in error
    aborted = kpatch(project.root, "export", "--abort")
    assert aborted.exit_code == 0, aborted.output
    assert (victim / "precious.txt").read_text() == "keep me\n"
    assert _but_the_journal(project.snapshot()) == before
    assert kpatch(project.root, "status").exit_code == 0


@pytest.mark.parametrize("text", ["not json", "[" * 100_000, '{"operation": "export", "steps": [{"target": 1}]}'])
def test_an_unreadable_journal_names_its_way_out_and_abort_sets_it_aside(project: Project, text: str) -> None:
    """A journal.json that is not JSON made `export --continue`/`--abort` crash (exit 70) and stay stuck."""
    assert kpatch(project.root, "apply").exit_code == 0
    folder = _journal(project, None, text)
    for command in (["export", "--continue"], ["apply"], ["export"]):
        ran = kpatch(project.root, *command)
        assert ran.exit_code == ExitCode.WORKTREE, ran.output
        [error] = ran.errors()
        assert f"{folder / 'journal.json'}: unreadable journal" in error
        assert "run 'kpatch export --abort' to set it aside" in error
    aborted = kpatch(project.root, "export", "--abort")
    assert aborted.exit_code == 0, aborted.output
    assert "set aside as" in aborted.stderr
    assert not folder.exists() and list((project.root / ".kpatch").glob("journal-unreadable-*"))
    assert kpatch(project.root, "apply").exit_code == 0


# --- reports, locks and probes: files kpatch writes or runs next to the user's ----------------------------------


@pytest.mark.parametrize("planted", ["symlink", "hard link"])
def test_the_test_log_replaces_a_planted_link_and_never_writes_through_it(tmp_path: Path, planted: str) -> None:
    """`ln -s ~/victim reports/kernels.log; kpatch test` must leave ~/victim as it was."""
    from kpatch.testing.run import LiveLog

    victim, reports = tmp_path / "victim", tmp_path / "reports"
    victim.write_text("the person's file\n")
    reports.mkdir()
    log = reports / "kernels.log"
    if planted == "symlink":
        log.symlink_to(victim)
    else:
        os.link(victim, log)
    with LiveLog(log, lambda line: None) as live:
        live("suite output\n")
    assert victim.read_text() == "the person's file\n"
    assert not log.is_symlink() and log.read_text() == "suite output\n"
    assert mode(log) == 0o666 & ~current_umask()


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("how", ["first on the import path", "a relative path entry"])
def test_the_dispatcher_probe_imports_nothing_from_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      how: str) -> None:
    """`kpatch verify --installed` started (as `python -m kpatch`) in a project or worktree holding a `torch.py`:
    the probe child must not run it (it was started with `python -m` there, with this process's path)."""
    from kpatch.verify.diagnose import run_probe

    folder, marker = tmp_path / "project", tmp_path / "RAN"
    folder.mkdir()
    (folder / "torch.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder) if how == "first on the import path" else ".")
    run_probe([], [])
    assert not marker.exists()


def write_lock(project: Project, wheels: dict[str, tuple[str, bytes]]) -> Path:
    """dist/pylock.toml of the project locking `wheels` ({upstream: (file name, bytes)}), written beside it as
    they are (a value of None bytes leaves the file for the test to make)."""
    import hashlib

    from kpatch.wheels import lock as lockfile
    from kpatch.wheels.record import Wheel

    dist = project.root / "dist"
    dist.mkdir(exist_ok=True)
    locked, upstreams = [], []
    for upstream, (name, data) in wheels.items():
        if not (dist / name).exists() and not (dist / name).is_symlink():
            (dist / name).write_bytes(data)
        locked.append(Wheel(upstream=upstream, package=upstream, version="1.0", filename=name,
                            sha256=hashlib.sha256(data).hexdigest(), size=len(data)))
        upstreams.append(lockfile.LockedUpstream(name=upstream, url="file:///up", base="0" * 40, commit="1" * 40,
                                                 stack_hash="s" * 64, build_key="k" * 64, command="true", env={},
                                                 torch=None))
    return lockfile.write(dist, lockfile.Lock(wheels=tuple(locked), upstreams=tuple(upstreams), image="i",
                                              image_digest="local:x", base_image="b", base_image_digest="",
                                              kpatch_version="0"))


def zip_methods_set_to(data: bytes, method: int) -> bytes:
    """A zip's bytes with every member's compression method (local and central headers) set to `method`."""
    out = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        at = out.find(signature)
        while at >= 0:
            out[at + offset:at + offset + 2] = method.to_bytes(2, "little")
            at = out.find(signature, at + 4)
    return bytes(out)


def big_metadata_wheel() -> tuple[str, bytes]:
    """A small wheel whose METADATA inflates to more than kpatch reads."""
    import io
    import zipfile

    from kpatch.wheels.metadata import METADATA_LIMIT

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("kernels-1.0.dist-info/METADATA", b"Metadata-Version: 2.1\nName: kernels\nVersion: 1.0\n\n"
                         + b"x" * METADATA_LIMIT)
    return "kernels-1.0-py3-none-any.whl", buffer.getvalue()


def hostile_wheels() -> dict[str, tuple[str, bytes]]:
    from tests.support.wheelfiles import make_wheel

    plain = make_wheel("kernels", "1.0")
    return {
        "not a zip": ("kernels-1.0-py3-none-any.whl", b"not a zip at all\n"),
        "a METADATA that is not UTF-8": make_wheel("kernels", "1.0", metadata=b"Name: k\xff\n\n"),
        "a METADATA compressed with method 99": (plain[0], zip_methods_set_to(plain[1], 99)),
        "a METADATA larger than kpatch reads": big_metadata_wheel(),
    }


HOSTILE_WHEELS = ("not a zip", "a METADATA that is not UTF-8", "a METADATA compressed with method 99",
                  "a METADATA larger than kpatch reads")


@pytest.mark.parametrize("case", HOSTILE_WHEELS)
def test_verify_fails_a_locked_wheel_it_cannot_read_in_one_line(project: Project, case: str) -> None:
    """The lock's hash matches, but the wheel is not one kpatch can read: a failed check, never a pass (it was
    left out of the pin checks), a crash (exit 70) or gigabytes of memory."""
    from tests.support.wheelfiles import make_wheel

    name, data = hostile_wheels()[case]
    lock = write_lock(project, {"kernels": (name, data), "app": make_wheel("app", "1.0")})
    ran = kpatch(project.root, "verify", "--lock", str(lock), timeout=120)
    assert ran.exit_code == ExitCode.CONFLICT, ran.output
    failing = [line for line in ran.output.splitlines() if name in line and "unreadable" in line]
    assert len(failing) == 1, ran.output


def test_a_fifo_where_a_wheel_should_be_is_refused_without_blocking(project: Project) -> None:
    """`verify` and `test` open only regular files: a FIFO planted at a locked wheel's path used to block them
    forever (and SIGTERM with them)."""
    from tests.support.wheelfiles import make_wheel

    name, data = make_wheel("kernels", "1.0")
    (project.root / "dist").mkdir(exist_ok=True)
    if not (project.root / "dist" / name).exists():
        os.mkfifo(project.root / "dist" / name)
    lock = write_lock(project, {"kernels": (name, data), "app": make_wheel("app", "1.0")})
    verified = kpatch(project.root, "verify", "--lock", str(lock), timeout=120)
    assert verified.exit_code == ExitCode.CONFLICT, verified.output
    assert f"{name} is a FIFO, not a regular file" in verified.output
    tested = kpatch(project.root, "test", "--lock", str(lock), timeout=120)
    assert tested.exit_code == ExitCode.BAD_INPUT, tested.output
    [error] = tested.errors()
    assert f"{name} is a FIFO, not a regular file" in error


def test_a_lock_naming_a_wheel_outside_its_folder_is_refused(project: Project) -> None:
    """A lock whose wheel path climbs out (`../../../../etc/hostname`) names no file of the lock's folder."""
    from tests.support.wheelfiles import make_wheel

    name, data = make_wheel("kernels", "1.0")
    lock = write_lock(project, {"kernels": (name, data), "app": make_wheel("app", "1.0")})
    text = lock.read_text()
    assert f'path = "{name}"' in text
    lock.write_text(text.replace(f'path = "{name}"', 'path = "../../../../etc/hostname"'))
    for command in ("verify", "test"):
        ran = kpatch(project.root, command, "--lock", str(lock), timeout=120)
        assert ran.exit_code == ExitCode.BAD_INPUT, ran.output
        [error] = ran.errors()
        assert "'../../../../etc/hostname' is not a file name beside the lock" in error
