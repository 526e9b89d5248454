"""A stack's commits made from its patch files alone, and `git range-diff` between two stacks.

The commits are made on a throwaway index in a temp folder that holds only the paths the stack touches (a diff of
two trees shows only what differs, so the rest of the upstream's tree changes nothing in them): no worktree is
written, and the only thing left in the repository is the commits' objects, which no ref names.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from kpatch.gitx.patches import read_mails
from kpatch.gitx.repo import Repository, literal
from kpatch.gitx.runner import COMMITTER


class NotApplied(Exception):
    """A patch file does not apply onto the commits made so far (carries its path)."""

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.path = path


def commits_from_patches(repo: Repository, base: str, patches: Sequence[Path], paths: Sequence[str]) -> list[str]:
    """A stand-in for `base` holding only its files `paths` names (a root commit), then one commit per patch file on
    it, each as `git am -3 --keep-non-patch` would make it (message, author, date); raise NotApplied at a patch that
    does not apply. `stand-in..last` is the stack's range: each commit's diff is the one it has on `base`."""
    mails = read_mails(repo, [p.read_bytes() for p in patches])
    with tempfile.TemporaryDirectory(prefix="kpatch-stack-") as folder:
        env = {"GIT_INDEX_FILE": str(Path(folder) / "index")}
        listed = repo.run(["ls-tree", "-r", "-z", "--full-tree", "--end-of-options", base, "--", *literal(paths)])
        repo.run(["update-index", "-z", "--index-info"], stdin=listed.stdout, env=env)
        fixed = {"GIT_AUTHOR_NAME": COMMITTER[0], "GIT_AUTHOR_EMAIL": COMMITTER[1], "GIT_AUTHOR_DATE": "@0 +0000",
                 "GIT_COMMITTER_NAME": COMMITTER[0], "GIT_COMMITTER_EMAIL": COMMITTER[1],
                 "GIT_COMMITTER_DATE": "@0 +0000"}
        parent = repo.out(["commit-tree", repo.out(["write-tree"], env=env)],
                          stdin=f"kpatch: {base} with only the stack's files\n".encode(), env={**env, **fixed})
        commits = [parent]
        for path, mail in zip(patches, mails, strict=True):
            if not _apply(repo, path, env) and not _apply(repo, path, env, "--3way"):
                raise NotApplied(path)
            tree = repo.out(["write-tree"], env=env)
            name, _, email = mail.author.rpartition(" <")
            who = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email.rstrip(">"), "GIT_AUTHOR_DATE": mail.date,
                   "GIT_COMMITTER_DATE": mail.date}
            parent = repo.out(["commit-tree", tree, "-p", parent], stdin=mail.message.encode("utf-8"),
                              env={**env, **fixed, **{k: v for k, v in who.items() if v}})
            commits.append(parent)
        return commits


def range_diff(repo: Repository, old: str, new: str) -> str:
    """`git range-diff --no-color OLD NEW` (two A..B ranges, neither empty), as git prints it."""
    return repo.run(["range-diff", "--no-color", old, new]).stdout.decode("utf-8", "replace")


def own_changes(repo: Repository, commits: Sequence[str]) -> dict[str, str]:
    """Commit -> its message and a hash of its own changed lines only (`-U0`, line numbers ignored): equal for two
    commits whose diffs differ only in offsets and context."""
    if not commits:
        return {}
    def log(*options: str) -> bytes:
        return repo.run(["log", "--no-walk=unsorted", "--no-color", *options, "--end-of-options", *commits]).stdout

    ids = repo.run(["patch-id", "--verbatim"], stdin=log("-p", "-U0", "--format=commit %H")).text
    found = {commit: patch_id for patch_id, commit in (line.split() for line in ids.splitlines())}
    parts = log("--format=%x00%H%x00%B").decode("utf-8", "replace").split("\0")[1:]
    messages = {parts[i]: parts[i + 1] for i in range(0, len(parts) - 1, 2)}
    return {c: found.get(c, "") + "\0" + messages.get(c, "") for c in commits}


def _apply(repo: Repository, path: Path, env: dict[str, str], *how: str) -> bool:
    return repo.run(["-c", "rerere.enabled=false", "apply", "--cached", *how, "--", str(path)], env=env,
                    check=False).status == 0
