"""A git repository kpatch owns (a bare mirror or a worktree of one): refs, commits, state, simple changes.

Reads go through GitPython's object model where it needs no process (refs, HEAD, commits); everything else is
`git <command>` through the runner.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from kpatch.errors import StorageError
from kpatch.gitx import locks
from kpatch.gitx.runner import Completed, base_env, out, run
from kpatch.gitx.storage import place_problem

SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_OPERATIONS = (("rebase-apply", "am"), ("rebase-merge", "rebase"), ("MERGE_HEAD", "merge"),
               ("CHERRY_PICK_HEAD", "cherry-pick"), ("REVERT_HEAD", "revert"), ("BISECT_LOG", "bisect"))


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    subject: str
    author: str
    date: str


class Repository:
    """One repository on disk; cheap to create (GitPython's `Repo` is opened on first use)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @cached_property
    def repo(self) -> Any:
        from kpatch.gitx.runner import _git_class

        _git_class()  # sets GitPython's environment before its first import
        import git

        repo = git.Repo(self.path)
        # The object database reads through `git cat-file` processes GitPython starts itself: they get the
        # environment every other git call gets (user and system config ignored, LC_ALL=C).
        repo.git.update_environment(**base_env())
        return repo

    @property
    def git_dir(self) -> Path:
        return Path(self.repo.git_dir)

    @property
    def common_dir(self) -> Path:
        return Path(self.repo.common_dir).resolve()

    def run(self, args: Sequence[str], **kwargs: Any) -> Completed:
        return run(args, self.path, **kwargs)

    def out(self, args: Sequence[str], **kwargs: Any) -> str:
        return out(args, self.path, **kwargs)

    # --- refs and commits -------------------------------------------------------------------------------------

    def head(self) -> str:
        return str(self.repo.head.commit.hexsha)

    def resolve(self, ref: str) -> str | None:
        """The commit `ref` names (full SHA, tag, branch or other rev), or None."""
        candidates = (ref,) if SHA_RE.match(ref) else (f"refs/tags/{ref}", f"refs/heads/{ref}", ref)
        for candidate in candidates:
            proc = self.run(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{candidate}^{{commit}}"],
                            check=False)
            if proc.status == 0:
                return str(proc.text.strip())
        return None

    def has_commit(self, sha: str) -> bool:
        return self.run(["cat-file", "-e", "--end-of-options", f"{sha}^{{commit}}"], check=False).status == 0

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.run(["merge-base", "--is-ancestor", "--end-of-options", older, newer], check=False).status == 0

    def count(self, since: str, until: str) -> int:
        return int(self.out(["rev-list", "--count", "--end-of-options", f"{since}..{until}"]))

    def commits(self, base: str, tip: str = "HEAD") -> list[str]:
        """SHAs in base..tip, oldest first."""
        return self.out(["rev-list", "--reverse", "--end-of-options", f"{base}..{tip}"]).split()

    def not_upstream(self, base: str, tip: str = "HEAD") -> list[str]:
        """Commits of base..tip that no upstream branch or tag of the mirror contains (oldest first)."""
        return self.out(["rev-list", "--reverse", tip, "--not", base, "--branches", "--tags"]).split()

    def first_parent_range(self, since: str, until: str) -> list[str]:
        """Commits of since..until along the first-parent line, oldest first: the order bisection walks."""
        return self.out(["rev-list", "--first-parent", "--reverse", "--end-of-options", f"{since}..{until}"]).split()

    def commit_info(self, sha: str) -> CommitInfo:
        commit = self.repo.commit(sha)
        return CommitInfo(sha=commit.hexsha, subject=commit.summary if isinstance(commit.summary, str) else
                          commit.summary.decode("utf-8", "replace"),
                          author=f"{commit.author.name} <{commit.author.email}>",
                          date=commit.authored_datetime.isoformat())

    def subjects(self, base: str, tip: str = "HEAD") -> list[str]:
        return self.out(["log", "--format=%s", "--end-of-options", f"{base}..{tip}"]).splitlines()

    def last_commit_touching(self, since: str, until: str, paths: Sequence[str]) -> str | None:
        if not paths:
            return None
        return self.out(["log", "-1", "--format=%H", f"{since}..{until}", "--", *paths]) or None

    def symlinks(self, commit: str, paths: Sequence[str]) -> set[str]:
        """Those of `paths` (and of their parent folders) that are symlinks in `commit`."""
        prefixes = sorted({"/".join(p.split("/")[: i + 1]) for p in paths for i in range(p.count("/") + 1)})
        if not prefixes:
            return set()
        listing = self.out(["ls-tree", "-z", "--full-tree", commit, "--", *prefixes]).split("\0")
        return {entry.split("\t", 1)[1] for entry in listing if entry.startswith("120000 ")}

    def archive(self, commit: str, prefix: str, paths: Sequence[str] = ()) -> bytes:
        """A tar of the tracked files at `commit` (only `paths`, when given), under `prefix` (no untracked files)."""
        # git archive takes paths right after the commit (no `--`); --end-of-options guards the commit.
        return bytes(self.run(["archive", "--format=tar", f"--prefix={prefix}", "--end-of-options", commit,
                               *paths]).stdout)

    def describe(self, commit: str) -> tuple[str, int] | None:
        """(nearest tag, commits since it) for `commit`, or None when no tag is reachable."""
        proc = self.run(["describe", "--tags", "--long", "--end-of-options", commit], check=False)
        if proc.status != 0:
            return None
        tag, count, _ = proc.text.strip().rsplit("-", 2)
        return tag, int(count)

    def update_ref(self, name: str, sha: str) -> None:
        self.run(["update-ref", "--no-deref", name, sha])

    def refs(self, prefix: str) -> list[tuple[str, str]]:
        """(ref name, SHA) of every ref under `prefix`, sorted by name."""
        listing = self.out(["for-each-ref", "--format=%(refname) %(objectname)", prefix])
        return [tuple(line.split(" ", 1)) for line in listing.splitlines() if line]  # type: ignore[misc]

    def set_config(self, key: str, value: str) -> None:
        self.run(["config", key, value])

    # --- the worktree's state -----------------------------------------------------------------------------------

    def dirty(self) -> list[str]:
        """Uncommitted changes to tracked files ('XY path'); untracked files are git's to protect on checkout."""
        listing = self.run(["status", "--porcelain=v1", "-z", "--untracked-files=no"],
                           env={"GIT_OPTIONAL_LOCKS": "0"}).stdout.decode("utf-8", "replace")
        return [entry for entry in listing.split("\0") if entry[:2].strip() and len(entry) > 3]

    def operation(self) -> str | None:
        """'am', 'rebase', 'merge', 'cherry-pick', 'revert' or 'bisect' when the worktree is in one."""
        git_dir = self.git_dir
        for marker, name in _OPERATIONS:
            if (git_dir / marker).exists():
                return name
        return None

    def unmerged(self) -> list[str]:
        return [p for p in self.out(["diff", "--name-only", "--diff-filter=U", "-z"]).split("\0") if p]

    def clear_stale_locks(self) -> list[Path]:
        return locks.clear_stale({self.git_dir, self.common_dir})

    def checkout(self, commit: str) -> None:
        """Detach a clean worktree at `commit`; fail when git could not write every file (it exits 0 then)."""
        self.run(["checkout", "--quiet", "--detach", commit, "--"])
        dirty = self.dirty()
        if dirty:
            problem = place_problem(self.path) or "read-only or no permission"
            raise StorageError(f"{problem}: cannot write worktree {self.path}: {len(dirty)} file(s) differ from "
                               f"{commit[:12]} after checkout ({dirty[0][3:]})")

    def reset_hard(self, commit: str) -> None:
        """Put the worktree and index at `commit`, dropping uncommitted changes (only for states kpatch made)."""
        self.run(["reset", "--quiet", "--hard", commit, "--"])

    def remove_untracked(self, paths: Sequence[str]) -> None:
        """Delete untracked files at `paths` (what an interrupted `git am` may have written, nothing else)."""
        if paths:
            self.run(["clean", "--quiet", "--force", "--", *paths])
