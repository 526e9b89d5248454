"""The cheaper git paths of issue 14 on real repositories: each gives what the slower path it replaced gave."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kpatch.errors import GitError
from kpatch.examples.upstreams import commit, init_repo
from kpatch.gitx import Am, Mirror, Repository, commit_patch_ids, format_patches, read_mail, read_mails
from kpatch.gitx.patches import Formatting, _log_patch_ids
from tests.support.gitrepos import Project

ODD = "dir with space/naïve \"q\" *x?.txt"  # quoted by git in diffs, escaped in sparse patterns


def lines(name: str, count: int = 20, changed: int | None = None) -> str:
    return "".join(f"{name} {'changed ' if i == changed else ''}line {i}\n" for i in range(count))


@pytest.fixture
def upstream(tmp_path: Path) -> tuple[Repository, str, str]:
    """A history with plain commits, one touching a stack path and another path, one with an odd path, a merge."""
    repo = tmp_path / "up"
    init_repo(repo)
    base = commit(repo, {"a.txt": lines("a"), "b.txt": lines("b"), "c.txt": lines("c"), ODD: lines("odd")}, "base", 0)
    commit(repo, {"a.txt": lines("a", changed=3)}, "Fix a", 1)
    commit(repo, {"b.txt": lines("b", changed=5), "c.txt": lines("c", changed=5)}, "Fix b and c", 2)
    commit(repo, {ODD: lines("odd", changed=7)}, "Fix the odd one", 3)
    subprocess.run(["git", "checkout", "-q", "-b", "side", "HEAD~1"], cwd=repo, check=True)
    commit(repo, {"d.txt": "side\n"}, "Side work", 4)
    subprocess.run(["git", "checkout", "-q", "main"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x.invalid", "merge", "-q", "--no-ff", "-m",
                    "Merge side", "side"], cwd=repo, check=True)
    return Repository(repo), base, Repository(repo).head()


@pytest.mark.parametrize("walk_max", [0, 64])  # 0: every path set goes through the --raw listing
def test_merged_detection_hashes_what_a_pathspec_limited_walk_hashes(upstream: tuple[Repository, str, str],
                                                                     walk_max: int,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from kpatch.gitx import patches

    monkeypatch.setattr(patches, "_PATHSPEC_WALK_MAX", walk_max)
    repo, base, head = upstream
    for paths in (["a.txt", "b.txt"], ["c.txt", ODD], [ODD], ["b.txt"], ["nothing.txt"]):
        walked = _log_patch_ids(repo, ["--no-renames", "--reverse", "--end-of-options", f"{base}..{head}", "--",
                                       *paths], verbatim=False)
        subjects: dict[str, str] = {}
        listed = commit_patch_ids(repo, base, head, paths, subjects=subjects)
        assert listed == walked and list(listed) == list(walked)
        assert set(subjects) == set(listed)
    fix_b = next(sha for sha, s in repo.commit_subjects(base, head) if s == "Fix b and c")
    only_b = commit_patch_ids(repo, base, head, ["b.txt"])
    both = commit_patch_ids(repo, base, head, ["b.txt", "c.txt"])
    assert only_b[fix_b] != both[fix_b]  # the diff is cut to the asked paths, as the pathspec did


def test_refs_resolve_in_one_batch_with_tags_before_branches(upstream: tuple[Repository, str, str]) -> None:
    repo, base, head = upstream
    subprocess.run(["git", "tag", "side", base], cwd=repo.path, check=True)  # a tag named like the branch
    found = repo.resolve_all(["side", "main", base, "nope", "main~1", "v\nx"])
    assert found == {"side": base, "main": head, base: base, "nope": None,
                     "main~1": subprocess.run(["git", "rev-parse", "main~1"], cwd=repo.path, text=True,
                                              capture_output=True).stdout.strip(), "v\nx": None}
    assert repo.resolve("0" * 40) is None


def test_worktree_folders_and_head_are_read_from_gits_files(upstream: tuple[Repository, str, str],
                                                           tmp_path: Path) -> None:
    repo, base, _ = upstream
    mirror_path = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo.path), str(mirror_path)], check=True)
    mirror = Mirror(mirror_path, "up")
    tree = tmp_path / "tree"
    mirror.add_worktree(tree, base)
    worktree = Repository(tree)
    assert worktree.head() == base and worktree.common_dir == mirror_path.resolve()
    assert worktree.git_dir == (mirror_path / "worktrees" / "tree").resolve()
    assert mirror.owns(tree) and not mirror.owns(repo.path) and not mirror.owns(tmp_path / "nowhere")
    subprocess.run(["git", "checkout", "-q", "-b", "topic"], cwd=tree, check=True)  # HEAD is a symbolic ref now
    assert worktree.head() == base


def test_many_mails_are_read_as_one_by_one(upstream: tuple[Repository, str, str]) -> None:
    repo, base, _ = upstream
    texts = format_patches(repo, base, "main~1")
    batch = read_mails(repo, texts)
    assert batch == [read_mail(repo, text) for text in texts] and len(batch) == 3
    assert [r.message.splitlines()[0] for r in batch] == ["Fix a", "Fix b and c", "Fix the odd one"]
    split = texts[1].replace(b"\n\n", b"\n\nFrom 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n",
                             1)
    mixed = read_mails(repo, [texts[0], split])
    assert [m.mails for m in mixed] == [1, 2]  # the text that is two mails is told apart


def test_a_sparse_scratch_holds_only_the_stacks_files_and_am_works_in_it(upstream: tuple[Repository, str, str],
                                                                         tmp_path: Path) -> None:
    repo, base, _ = upstream
    mirror_path = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo.path), str(mirror_path)], check=True)
    patches = tmp_path / "patches"
    patches.mkdir()
    for n, text in enumerate(format_patches(repo, base, "main~1"), 1):
        (patches / f"{n:04d}.patch").write_bytes(text)
    scratch = tmp_path / "scratch"
    Mirror(mirror_path, "up").add_scratch(scratch, base, ["a.txt", "b.txt", "c.txt", ODD])
    on_disk = sorted(str(p.relative_to(scratch)) for p in scratch.rglob("*") if p.is_file() and ".git" not in p.parts)
    assert on_disk == sorted(["a.txt", "b.txt", "c.txt", ODD])
    tree = Repository(scratch)
    assert tree.dirty() == []
    assert list(tree.git_dir.glob("sharedindex.*"))  # a split index
    run = Am(tree).start(sorted(patches.iterdir()), lambda done: None)
    assert not run.stopped and len(run.methods) == 3 and tree.dirty() == []
    assert tree.out(["diff", "--stat", "main~1", "HEAD"]) == ""  # the same trees as upstream's commits
    assert not (scratch / "d.txt").exists()


def test_format_patches_keeps_commit_order_past_9999_commits(tmp_path: Path) -> None:
    """format-patch names the 10,000th file `10000-...`: sorted as strings it came between `1000-` and `1001-`,
    and export --check said patch 1000 read back as another commit. 10,001 one-line commits, by fast-import."""
    count = 10_001
    tree = tmp_path / "tree"
    subprocess.run(["git", "init", "-q", "-b", "main", str(tree)], check=True)
    stream = []
    for index in range(count + 1):
        message, data = f"fix {index}".encode(), f"{index}\n".encode()
        stream.append(f"commit refs/heads/main\nauthor A <a@example.invalid> {1_700_000_000 + index} +0000\n"
                      f"committer A <a@example.invalid> {1_700_000_000 + index} +0000\ndata {len(message)}\n"
                      .encode() + message + f"\nM 644 inline f\ndata {len(data)}\n".encode() + data + b"\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=tree, input=b"".join(stream), check=True)
    subprocess.run(["git", "checkout", "-q", "main"], cwd=tree, check=True)
    repo = Repository(tree)
    base = repo.run(["rev-parse", "HEAD~10001"]).text.strip()
    texts = format_patches(repo, base)
    subjects = [text.split(b"\nSubject: ", 1)[1].split(b"\n", 1)[0].decode() for text in texts]
    assert subjects == [f"[PATCH] fix {i}" for i in range(1, count + 1)]
    seen: list[tuple[int, bytes]] = []
    with Formatting(repo, base) as formatting:  # read as git writes them: the same texts, in the same order
        assert formatting.texts(lambda index, text, _file: seen.append((index, text))) == texts
    assert seen == list(enumerate(texts))


def test_patches_read_as_git_writes_them_are_format_patches_own(upstream: tuple[Repository, str, str]) -> None:
    repo, base, head = upstream
    for tip, count in (("main~1", 3), (head, 4)):  # the second range holds a merge, which format-patch leaves out
        seen: list[tuple[int, bytes]] = []
        with Formatting(repo, base, tip) as formatting:
            texts = formatting.texts(lambda index, text, _file: seen.append((index, text)))  # noqa: B023  # called here
        assert texts == format_patches(repo, base, tip) and seen == list(enumerate(texts)) and len(texts) == count
    with pytest.raises(GitError) as failed, Formatting(repo, base, "no-such-branch") as formatting:
        formatting.texts(lambda index, text, file: None)
    with pytest.raises(GitError) as before:
        format_patches(repo, base, "no-such-branch")
    assert str(failed.value) == str(before.value)


@pytest.mark.parametrize(("name", "message", "one_process"), [
    ("A U Thor", b"Fix the cache\n\nBody.\n", True),
    ("Ren\u00e9e O'Neil", "Caf\u00e9 \u2014 fix\n".encode(), True),  # non-ASCII
    (" Lead Space.", b"Fix\n", False),  # crud at the name's ends: git cleans it up, so commit-tree is asked
    ("Latin", b"Caf\xe9 not UTF-8\n", False),  # git rewrites the message as Latin-1: commit-tree is asked
])
def test_a_chain_of_commits_is_the_one_commit_tree_writes_one_by_one(upstream: tuple[Repository, str, str],
                                                                       name: str, message: bytes, one_process: bool,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from kpatch.gitx.commits import Ident, NewCommit, chain

    repo, base, head = upstream
    started: list[str] = []
    real_run, real_out = Repository.run, Repository.out

    def run(self: Repository, args: list[str], **kwargs: object) -> object:
        started.append(args[0])
        return real_run(self, args, **kwargs)

    def out(self: Repository, args: list[str], **kwargs: object) -> str:
        started.append(args[0])
        return real_out(self, args, **kwargs)

    monkeypatch.setattr(Repository, "run", run)
    monkeypatch.setattr(Repository, "out", out)
    trees = [repo.out(["rev-parse", f"{sha}^{{tree}}"]) for sha in repo.out(["rev-list", "--reverse",
                                                                               f"{base}..{head}~1"]).split()]
    made = [NewCommit(tree=tree, author=Ident(name, "a@example.invalid", f"{1_700_000_000 + i} +0200"),
                      committer=Ident("C O Mitter", "c@example.invalid", f"{1_700_000_100 + i} -0130"),
                      message=message) for i, tree in enumerate(trees)]
    tip = chain(repo, base, made)
    monkeypatch.undo()
    assert started.count("commit-tree") == (0 if one_process else 3), started
    # the objects go in through one unpack-objects of a pack made in process (no file per object, no hash-object)
    assert ("unpack-objects" in started) == one_process and "hash-object" not in started, started
    above = base
    for new in made:  # what commit-tree writes for each, on the one before
        env = {"GIT_AUTHOR_NAME": new.author.name, "GIT_AUTHOR_EMAIL": new.author.email,
               "GIT_AUTHOR_DATE": f"@{new.author.date}", "GIT_COMMITTER_NAME": new.committer.name,
               "GIT_COMMITTER_EMAIL": new.committer.email, "GIT_COMMITTER_DATE": f"@{new.committer.date}"}
        above = repo.out(["commit-tree", "--no-gpg-sign", new.tree, "-p", above, "-F", "-"], stdin=new.message,
                         env=env)
    assert len(made) == 3 and tip == above
    assert chain(repo, base, []) == base


def test_a_review_side_made_ahead_is_the_one_made_on_demand_and_only_for_the_same_files(project: Project) -> None:
    """A rebase makes its review's old side (the patch files' commits) while git picks the stack: what it takes
    then is what side_from_files makes on the spot; a patch file changed since is made again."""
    from kpatch.config import load
    from kpatch.engine import diff
    from kpatch.engine.plan import load_all_series
    from kpatch.project.workspace import Workspace

    cache = project.root.parent / "cache"
    assert project.run("apply", "--cache-dir", str(cache)).exit_code == 0
    ws = Workspace.create(load(project.root / "kpatch.toml"), cache, None)
    series = load_all_series(ws.stack)["kernels"]
    mirror = ws.mirror("kernels")
    base = mirror.resolve(ws.stack.get("kernels").base)
    assert base is not None and series.patches
    diff._AHEAD.clear()  # what an earlier in-process rebase of this worker started and never took (a stop)
    made = diff.side_from_files(mirror, base, series, "now")
    diff.prefetch_side(mirror, base, series)
    assert len(diff._AHEAD) == 1
    assert diff.side_from_files(mirror, base, series, "now") == made and not diff._AHEAD  # taken
    diff.prefetch_side(mirror, base, series)
    first = series.patches[0].path
    first.write_bytes(first.read_bytes().replace(b"\n\n", b"\n\nReworded in between.\n\n", 1))
    again = diff.side_from_files(mirror, base, series, "now")
    assert again.commits != made.commits and len(again.commits) == len(made.commits)
    diff._AHEAD.clear()
