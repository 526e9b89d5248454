"""Hostile input, round three (issue 37): secrets go only where they are meant to, a refused `init` writes
nothing, a copy of a project never touches its original, and no unexported word of a commit is lost.

kpatch runs as its own process here (tests/support/cli.py) wherever a user would run it.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from tests.support.cli import Ran, kpatch
from tests.support.fake_github import fake_github
from tests.support.gitrepos import Project, git
from tests.support.https_git import https_git
from tests.support.rebase_repos import RebaseProject

TOKEN = "ghp_roundThreeToken0123456789abcdef"
KERNELS_REPO = "vllm-project/vllm-xpu-kernels"
KERNELS_PATCH = "0001-Add-the-kimi-op.patch"


def one_error(ran: Ran, code: ExitCode, text: str) -> str:
    assert ran.exit_code == code, ran.output
    assert len(ran.errors()) == 1 and text in ran.errors()[0], ran.stderr
    return ran.errors()[0]


def files(folder: Path) -> dict[str, bytes]:
    """Every file, link and folder under `folder` with what it holds (a link: where it points)."""
    out: dict[str, bytes] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        out[key] = (b"-> " + str(path.readlink()).encode() if path.is_symlink() else
                    b"<dir>" if path.is_dir() else path.read_bytes())
    return out


# --- 1. the GitHub token goes only to the forge it belongs to -------------------------------------------------------


def _propose_to_an_https_fork(project: Project, tmp_path: Path, *extra: str) -> tuple[Ran, list[str]]:
    """`kpatch propose` of the kernels patch with its fork on another https host than the GitHub API's (a local
    server that records every Authorization header it is sent): the result and those headers."""
    with https_git({"alice/vllm-xpu-kernels": project.kernels}, tmp_path / "server", "alice", "pw") as server, \
            fake_github() as fake:
        toml = project.root / "kpatch.toml"
        toml.write_text(toml.read_text().replace(
            "requires = []\n", f'requires = []\n\n[upstream.propose]\nrepository = "{KERNELS_REPO}"\n'
            f'fork = "{server.url}/alice/vllm-xpu-kernels.git"\n', 1))
        patch = project.root / "patches" / "kernels" / KERNELS_PATCH
        patch.write_bytes(patch.read_bytes().replace(
            b"Upstream-Status: submitted\nUpstream-PR: vllm-project/vllm-xpu-kernels#592\n",
            b"Upstream-Status: pending\n"))
        fake.grant(TOKEN, "write")
        fake.repo(KERNELS_REPO)
        ran = kpatch(project.root, "propose", f"kernels/{KERNELS_PATCH}", "--fork", "alice", *extra,
                     env={"KPATCH_GITHUB_API": fake.url, "GITHUB_TOKEN": TOKEN, "GIT_SSL_CAINFO": str(server.ca_file)})
    return ran, server.headers


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry run", "real run"])
def test_propose_sends_the_github_token_to_no_fork_host_but_the_forges_own(project: Project, tmp_path: Path,
                                                                           dry_run: bool) -> None:
    ran, headers = _propose_to_an_https_fork(project, tmp_path, *(["--dry-run"] if dry_run else []))
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert [h for h in headers if basic in h or TOKEN in h] == [], ran.output
    if dry_run:
        assert ran.exit_code == 0, ran.output
    else:  # the fork asks for credentials it is not given: a one-line refusal, nothing pushed
        one_error(ran, ExitCode.UPSTREAM, "cannot read the fork https://127.0.0.1:")


@pytest.mark.parametrize(("url", "api", "dry_run", "sent"), [
    ("https://github.com/alice/x.git", None, False, True),
    ("https://GitHub.com/alice/x.git", None, False, True),
    ("https://github.com/alice/x.git", None, True, False),
    ("https://github.com.evil.example/alice/x.git", None, False, False),
    ("https://evil.example/alice/x.git", None, False, False),
    ("https://ghe.corp.example/alice/x.git", "https://ghe.corp.example/api/v3", False, True),
    ("https://github.com/alice/x.git", "https://ghe.corp.example/api/v3", False, False),
    ("https://ghe.corp.example:8443/alice/x.git", "https://ghe.corp.example/api/v3", False, False),
    ("ssh://git@github.com/alice/x.git", None, False, False),
])
def test_push_env_carries_the_token_only_to_github_or_the_configured_enterprise_host_and_never_in_a_dry_run(
        url: str, api: str | None, dry_run: bool, sent: bool) -> None:
    from kpatch.forge.hosts import push_env

    environ = {"GITHUB_TOKEN": TOKEN, **({"KPATCH_GITHUB_API": api} if api else {})}
    env = push_env(url, environ, dry_run=dry_run)
    assert bool(env) is sent
    assert TOKEN not in json.dumps(env)  # the token goes base64'd in a header, never as it is


# --- 2. credentials reach upstream code only when the cache that needs them is configured ---------------------------

CLOUD = {"AWS_ACCESS_KEY_ID": "AKIAROUNDTHREE", "AWS_SECRET_ACCESS_KEY": "aws-secret-round-three",
         "ACTIONS_RUNTIME_TOKEN": "actions-runtime-round-three", "ACTIONS_CACHE_URL": "https://cache.example/",
         "GITHUB_TOKEN": TOKEN}


@pytest.mark.parametrize(("remote", "passed"), [
    ({}, set()),
    ({"KPATCH_SCCACHE_VOLUME": "mine"}, set()),
    ({"SCCACHE_BUCKET": "b"}, {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}),
    ({"SCCACHE_GHA_ENABLED": "true"}, {"ACTIONS_RUNTIME_TOKEN", "ACTIONS_CACHE_URL"}),
    ({"SCCACHE_REDIS_ENDPOINT": "redis://cache"}, set()),
])
def test_a_build_gets_the_cloud_credentials_only_of_the_remote_compiler_cache_it_is_configured_with(
        remote: dict[str, str], passed: set[str]) -> None:
    from kpatch.wheels.compiler_cache import from_environment

    env = from_environment({**CLOUD, **remote}).env
    assert set(env) & set(CLOUD) == passed


def test_the_dispatcher_probe_child_sees_no_credential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`verify --installed` runs torch and the kernels' extensions (upstream code) in a child: it gets the
    allowlisted environment, not GITHUB_TOKEN and the cloud keys."""
    from kpatch.verify.diagnose import run_probe

    folder, seen = tmp_path / "site", tmp_path / "seen.json"
    folder.mkdir()
    (folder / "torch.py").write_text(f"import json, os\nopen({str(seen)!r}, 'w').write(json.dumps(dict(os.environ)))\n")
    monkeypatch.syspath_prepend(str(folder))
    for name, value in CLOUD.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KPATCH_URL_KERNELS", "https://user:pw@example.invalid/k.git")
    run_probe([], [])
    env = json.loads(seen.read_text())
    assert sorted(set(env) & {*CLOUD, "KPATCH_URL_KERNELS"}) == []
    assert env["PATH"] == os.environ["PATH"]  # the allowlisted rest is there


# --- 3 and 5. a refused `init` writes nothing, and never a credential -------------------------------------------------


def _init(folder: Path, project: Project, kernels: str | None = None, *extra: str,
          env: dict[str, str] | None = None) -> Ran:
    folder.mkdir(exist_ok=True)
    return kpatch(folder, "init", "--upstream", kernels or f"kernels={project.kernels}@{project.kernels_base}",
                  "--upstream", f"app={project.app}@v1.0", "--requires", "app:kernels", *extra, env=env)


def test_init_refuses_a_url_with_credentials_and_writes_them_nowhere(project: Project, tmp_path: Path) -> None:
    """kpatch.toml is the file the nightly commits and pushes: a URL's password must not go into it."""
    new = tmp_path / "new"
    with https_git({"kernels": project.kernels}, tmp_path / "server", "user", "pa55word") as server:
        url = server.url.replace("https://", "https://user:pa55word@") + "/kernels.git"
        ran = _init(new, project, f"kernels={url}@{project.kernels_base}", env={"GIT_SSL_CAINFO": str(server.ca_file)})
    line = one_error(ran, ExitCode.BAD_INPUT, "--upstream kernels: https://***@127.0.0.1:")
    assert "carries credentials" in line and "KPATCH_URL_KERNELS" in line
    assert files(new) == {}
    assert "pa55word" not in ran.output


@pytest.mark.parametrize(("url", "refused"), [
    ("https://ghp_abc123@github.com/o/r.git", True),
    ("https://user:pw@github.com/o/r.git", True),
    ("ssh://git:pw@github.com/o/r.git", True),
    ("ssh://git@github.com/o/r.git", False),
    ("git@github.com:o/r.git", False),
    ("https://github.com/o/r.git", False),
])
def test_init_tells_a_url_holding_a_secret_from_an_ssh_user_name(url: str, refused: bool) -> None:
    from kpatch.adopt.init import carries_credentials

    assert carries_credentials(url) is refused


@pytest.mark.parametrize("planted", ["patches", "patches/kernels", ".github", ".gitignore"])
def test_a_refused_init_through_a_link_out_of_the_project_leaves_the_folder_and_the_outside_as_they_were(
        project: Project, tmp_path: Path, planted: str) -> None:
    new, outside = tmp_path / "new", tmp_path / "outside"
    outside.mkdir()
    (outside / "theirs").write_text("the person's file\n")
    (new / planted).parent.mkdir(parents=True)
    (new / planted).symlink_to(outside / "theirs" if planted == ".gitignore" else outside)
    before, before_outside = files(new), files(outside)
    ran = _init(new, project, None, "--ci")
    one_error(ran, ExitCode.BAD_INPUT, f"{new / planted} is a link")
    assert files(new) == before and files(outside) == before_outside


def test_init_with_a_gitignore_folder_is_one_line_naming_it_and_writes_nothing(project: Project,
                                                                                tmp_path: Path) -> None:
    new = tmp_path / "new"
    (new / ".gitignore").mkdir(parents=True)
    ran = _init(new, project)
    one_error(ran, ExitCode.BAD_INPUT, f"{new / '.gitignore'} is not a file")
    assert files(new) == {".gitignore": b"<dir>"}


# --- 6. an unexported edit of a commit's message or author is refused like an unexported diff ------------------------


@pytest.mark.parametrize("command", ["apply", "rebase"])
@pytest.mark.parametrize("edit", ["message", "author"])
def test_an_amended_message_or_author_in_a_worktree_is_refused_like_a_changed_diff_and_export_keeps_it(
        project: Project, command: str, edit: str) -> None:
    assert kpatch(project.root, "apply").exit_code == 0
    tree = project.workdir / "kernels"
    subject = git(tree, "log", "-1", "--format=%s")
    amend = (["-m", "[XPU] My better words\n\nWhy it matters, said at last."] if edit == "message" else
             ["--no-edit", "--author", "Ada Person <ada@example.org>"])
    git(tree, "commit", "-q", "--amend", *amend)
    mine = git(tree, "rev-parse", "HEAD")
    before = project.snapshot()
    refused = kpatch(project.root, command)
    error = one_error(refused, ExitCode.WORKTREE, f"{mine[:12]} ")
    assert f"its {edit} is not" in error and "'kpatch export kernels'" in error
    assert project.snapshot() == before and git(tree, "rev-parse", "HEAD") == mine
    assert kpatch(project.root, "export").exit_code == 0
    assert kpatch(project.root, "apply").exit_code == 0
    words = git(tree, "log", "-1", "--format=%B" if edit == "message" else "--format=%an <%ae>")
    assert words == ("[XPU] My better words\n\nWhy it matters, said at last." if edit == "message" else
                     "Ada Person <ada@example.org>"), subject


def test_an_amend_that_keeps_message_author_and_diff_moves_without_discard(project: Project) -> None:
    """Only the committer date changed: nothing of the person's would be lost, so nothing is refused."""
    assert kpatch(project.root, "apply").exit_code == 0
    tree = project.workdir / "kernels"
    old = git(tree, "rev-parse", "HEAD")
    subprocess.run(["git", "-C", str(tree), "commit", "-q", "--amend", "--no-edit"], check=True,
                   env={**os.environ, "GIT_COMMITTER_DATE": "2001-01-01T00:00:00Z"})
    assert git(tree, "rev-parse", "HEAD") != old
    ran = kpatch(project.root, "apply")
    assert ran.exit_code == 0, ran.output
    assert git(tree, "rev-parse", "HEAD") == old  # back at the reproducible commit


# --- 4. a copy (`cp -a`) of a project never changes its original ----------------------------------------------------


def _git_state(root: Path) -> dict[str, str]:
    """What git says of every worktree of the project at `root` (HEAD, status, an am in progress)."""
    out = {}
    for dot in sorted([*root.glob("work/*/.git"), *root.glob("work/.rebase/*/.git")]):
        tree = dot.parent
        am = Path(git(tree, "rev-parse", "--git-path", "rebase-apply"))
        out[str(tree.relative_to(root))] = (git(tree, "rev-parse", "HEAD") + git(tree, "status", "--porcelain") +
                                            f" am={(am if am.is_absolute() else tree / am).exists()}")
    return out


def _stopped_rebase(rp: RebaseProject) -> Path:
    assert kpatch(rp.root, "apply").exit_code == 0
    assert kpatch(rp.root, "rebase").exit_code == ExitCode.CONFLICT
    scratch = rp.root / "work" / ".rebase" / "kernels"
    (scratch / "c.txt").write_text("a person's half-done resolution\n")
    return scratch


@pytest.mark.parametrize("command", [["rebase", "--continue"], ["apply", "--discard"], ["export"], ["apply"]])
def test_every_writing_command_in_a_copy_with_a_stopped_rebase_is_refused_and_the_original_is_left_alone(
        rp: RebaseProject, tmp_path: Path, command: list[str]) -> None:
    """`cp -a project copy; cd copy; (resolve); kpatch rebase --continue` used to `git am --continue` in the
    original's git state (the copy's worktrees name it): the original then showed a phantom change, and apply,
    apply --discard and export --check failed there until a person mended it with git."""
    _stopped_rebase(rp)
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(rp.root), str(copy)], check=True)
    (copy / "work" / ".rebase" / "kernels" / "c.txt").write_text("the copy's resolution\n")
    # the person's own `git add` in the copy writes the index the copy shares with the original: git's doing
    git(copy / "work" / ".rebase" / "kernels", "add", "c.txt")
    before, tracked = _git_state(rp.root), rp.tracked()
    ran = kpatch(copy, *command)
    assert _git_state(rp.root) == before and rp.tracked() == tracked, ran.output
    error = one_error(ran, ExitCode.WORKTREE, f"{copy / 'work'}")
    assert "shares its git state with" in error and str(rp.root / "work") in error and "kpatch rebase --abort" in error
    git(rp.root / "work" / ".rebase" / "kernels", "reset", "-q", "--", "c.txt")  # the person's add in the copy, undone
    # the original goes on as if the copy never was
    (rp.root / "work" / ".rebase" / "kernels" / "c.txt").write_text("resolved\n")
    assert kpatch(rp.root, "rebase", "--abort").exit_code == 0
    for again in (["apply"], ["export", "--check"], ["apply", "--discard"]):
        done = kpatch(rp.root, *again)
        assert done.exit_code == 0, (again, done.output)


def test_the_next_step_a_refused_copy_is_given_works_and_leaves_the_original_alone(rp: RebaseProject,
                                                                                  tmp_path: Path) -> None:
    _stopped_rebase(rp)
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(rp.root), str(copy)], check=True)
    before = _git_state(rp.root)
    assert kpatch(copy, "rebase", "--abort").exit_code == 0
    shutil.rmtree(copy / "work")
    for command in (["apply"], ["export", "--check"], ["rebase"]):
        ran = kpatch(copy, *command)
        assert ran.exit_code in (0, ExitCode.CONFLICT), (command, ran.output)
    assert _git_state(rp.root) == before
    assert kpatch(rp.root, "rebase", "--continue").exit_code == ExitCode.CONFLICT  # still stopped at its conflict


# --- weak: import --series, propose --fork ----------------------------------------------------------------------------

NEW_FILE = ("diff --git a/notes/new.txt b/notes/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/notes/new.txt\n"
            "@@ -0,0 +1 @@\n+hello\n")


def _new_project(project: Project, tmp_path: Path) -> Path:
    new = tmp_path / "new"
    new.mkdir()
    made = kpatch(new, "init", "--upstream", f"kernels={project.kernels}@{project.kernels_base}")
    assert made.exit_code == 0, made.output
    return new


def test_import_of_a_folder_without_series_refuses_a_patch_link_to_a_file_outside_it(project: Project,
                                                                                    tmp_path: Path) -> None:
    """The series-file case refused it already; a folder of .patch files followed the link."""
    new = _new_project(project, tmp_path)
    folder, outside = tmp_path / "quilt", tmp_path / "elsewhere.patch"
    folder.mkdir()
    outside.write_text("Subject: Someone else's words\n\n" + NEW_FILE)
    (folder / "0001-a.patch").symlink_to(outside)
    before = files(new)
    ran = kpatch(new, "import", "kernels", "--series", str(folder), "--author", "A U Thor <a@example.org>")
    one_error(ran, ExitCode.BAD_INPUT, f"{folder / '0001-a.patch'}: a link to {outside}, outside {folder}")
    assert files(new) == before


def test_import_of_a_patch_whose_date_git_cannot_read_names_the_file_and_writes_nothing(project: Project,
                                                                                      tmp_path: Path) -> None:
    new = _new_project(project, tmp_path)
    folder = tmp_path / "quilt"
    folder.mkdir()
    (folder / "0001-a.patch").write_text("Subject: A note\nDate: not a date\n\n" + NEW_FILE)
    before = files(new)
    ran = kpatch(new, "import", "kernels", "--series", str(folder), "--author", "A U Thor <a@example.org>")
    line = one_error(ran, ExitCode.BAD_INPUT, f"{folder / '0001-a.patch'}: ")
    assert "'not a date'" in line
    mine = {k: v for k, v in files(new).items() if not k.startswith((".kpatch", "work"))}  # kpatch's own folders
    assert mine == before and not (new / "work" / ".import" / "kernels").exists()


@pytest.mark.parametrize("owner", ["../..", "alice/../../x", "-x", "a b"])
def test_propose_refuses_a_fork_owner_github_cannot_have_before_pushing_anything(project: Project, tmp_path: Path,
                                                                                 owner: str) -> None:
    fork = tmp_path / "fork.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(fork)], check=True)
    toml = project.root / "kpatch.toml"
    toml.write_text(toml.read_text().replace(
        "requires = []\n", f'requires = []\n\n[upstream.propose]\nrepository = "{KERNELS_REPO}"\nfork = "{fork}"\n', 1))
    with fake_github() as fake:
        fake.grant(TOKEN, "write")
        fake.repo(KERNELS_REPO)
        ran = kpatch(project.root, "propose", f"kernels/{KERNELS_PATCH}", f"--fork={owner}",
                     env={"KPATCH_GITHUB_API": fake.url, "GITHUB_TOKEN": TOKEN})
    one_error(ran, ExitCode.BAD_INPUT, f"--fork {owner!r} is not a GitHub owner")
    assert git(fork, "for-each-ref") == ""
