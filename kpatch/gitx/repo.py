"""A git repository kpatch owns (a bare mirror or a worktree of one): refs, commits, state, simple changes.

Where the repository's folders and HEAD are is read from the files git documents for them (gitrepository-layout:
the `.git` file of a worktree, `commondir`, `HEAD`), without a process. Commits are read through GitPython's
object model (imported only then); everything else is `git <command>` through the runner.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from kpatch.errors import StorageError
from kpatch.gitx.runner import Completed, base_env, git_python, out, run
from kpatch.gitx.storage import place_problem


def literal(paths: Sequence[str]) -> list[str]:
    """Pathspecs that match exactly these file names, nothing else (a file may be called `*` or `:!x`)."""
    return [f":(literal){path}" for path in paths]


SHA_RE = re.compile(r"^[0-9a-f]{40}$")
UPSTREAM_REFS = "refs/remotes/upstream/"  # where a mirror keeps the upstream's branches (refs/heads: a person's)
UPSTREAM_HELD = (f"--glob={UPSTREAM_REFS}*", "--tags")  # rev-list arguments: every upstream branch and tag
_OPERATIONS = (("rebase-apply", "am"), ("rebase-merge", "rebase"), ("MERGE_HEAD", "merge"),
               ("CHERRY_PICK_HEAD", "cherry-pick"), ("REVERT_HEAD", "revert"), ("BISECT_LOG", "bisect"))


@dataclass(frozen=True)
class CommitFacts:
    """What the stack writer compares with a patch text read back: the message, author and subject."""

    message: str  # %B: the raw message
    author: str  # "Name <email>"
    subject: str


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
        """GitPython's `Repo` for this repository."""
        repo = git_python().Repo(self.path)
        # The object database reads through `git cat-file` processes GitPython starts itself: they get the
        # environment every other git call gets (user and system config ignored, LC_ALL=C).
        repo.git.update_environment(**base_env())
        return repo

    @cached_property
    def git_dir(self) -> Path:
        """The repository's own git folder: `.git`, the one a worktree's `.git` file names, or a bare one."""
        dot_git = self.path / ".git"
        if dot_git.is_file():
            text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
            if text.startswith("gitdir: "):
                return (self.path / text[len("gitdir: "):]).resolve()
        if dot_git.is_dir():
            return dot_git
        if (self.path / "HEAD").is_file() and (self.path / "objects").is_dir():
            return self.path  # a bare repository (the mirrors)
        return Path(self.out(["rev-parse", "--path-format=absolute", "--git-dir"]))

    @cached_property
    def common_dir(self) -> Path:
        """Where objects and refs live: a worktree's `commondir`, else its own git folder."""
        pointer = self.git_dir / "commondir"
        if pointer.is_file():
            return (self.git_dir / pointer.read_text(encoding="utf-8", errors="replace").strip()).resolve()
        return self.git_dir.resolve()

    def run(self, args: Sequence[str], **kwargs: Any) -> Completed:
        return run(args, self.path, **kwargs)

    def out(self, args: Sequence[str], **kwargs: Any) -> str:
        return out(args, self.path, **kwargs)

    # --- refs and commits -------------------------------------------------------------------------------------

    def head(self) -> str:
        """The commit HEAD is at: read from the HEAD file when detached (kpatch's worktrees are), else git's."""
        try:
            text = (self.git_dir / "HEAD").read_text(encoding="ascii", errors="replace").strip()
        except OSError:
            text = ""
        if SHA_RE.match(text):
            return text
        return self.out(["rev-parse", "--verify", "--end-of-options", "HEAD^{commit}"])

    def resolve(self, ref: str) -> str | None:
        """The commit `ref` names (full SHA, tag, branch or other rev), or None."""
        return self.resolve_all([ref])[ref]

    def resolve_all(self, refs: Sequence[str]) -> dict[str, str | None]:
        """`resolve` for several refs in one `git cat-file --batch-check`: a tag, else the upstream's branch of that
        name (UPSTREAM_REFS in a mirror), else whatever git makes of it (a SHA prefix, `main~2`, a local branch)."""
        # A name git cannot read on one line of input names no commit.
        wanted = {ref: () if "\n" in ref or not ref.strip() else (ref,) if SHA_RE.match(ref) else
                  (f"refs/tags/{ref}", f"{UPSTREAM_REFS}{ref}", ref) for ref in dict.fromkeys(refs)}
        lines = [candidate for candidates in wanted.values() for candidate in candidates]
        if not lines:
            return {ref: None for ref in wanted}
        listing = self.run(["cat-file", "--batch-check=%(objectname) %(objecttype)"],
                           stdin="".join(f"{line}^{{commit}}\n" for line in lines).encode()).text.splitlines()
        found = dict(zip(lines, listing, strict=True))
        result: dict[str, str | None] = {}
        for ref, candidates in wanted.items():
            answers = (found[c].split() for c in candidates)
            result[ref] = next((a[0] for a in answers if len(a) == 2 and a[1] == "commit"), None)
        return result

    def has_commit(self, sha: str) -> bool:
        return self.run(["cat-file", "-e", "--end-of-options", f"{sha}^{{commit}}"], check=False).status == 0

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.run(["merge-base", "--is-ancestor", "--end-of-options", older, newer], check=False).status == 0

    def count(self, since: str, until: str) -> int:
        return int(self.out(["rev-list", "--count", "--end-of-options", f"{since}..{until}"]))

    def commits(self, base: str, tip: str = "HEAD") -> list[str]:
        """SHAs in base..tip, oldest first."""
        return self.out(["rev-list", "--reverse", "--end-of-options", f"{base}..{tip}"]).split()

    def commit_subjects(self, base: str, tip: str = "HEAD") -> list[tuple[str, str]]:
        """(SHA, subject) of each commit in base..tip, oldest first, from one `git log`."""
        listing = self.run(["log", "--reverse", "--format=%H %s%x00", "--end-of-options", f"{base}..{tip}"]).stdout
        entries = listing.decode("utf-8", "replace").split("\0")
        return [(e.strip("\n")[:40], e.strip("\n")[41:]) for e in entries if e.strip("\n")]

    def not_upstream(self, base: str, tip: str = "HEAD") -> list[str]:
        """Commits of base..tip that no upstream branch or tag of the mirror contains (oldest first)."""
        return self.out(["rev-list", "--reverse", tip, "--not", base, *UPSTREAM_HELD]).split()

    def first_parent_range(self, since: str, until: str) -> list[str]:
        """Commits of since..until along the first-parent line, oldest first: the order bisection walks."""
        return self.out(["rev-list", "--first-parent", "--reverse", "--end-of-options", f"{since}..{until}"]).split()

    def first_parent_log(self, since: str, until: str) -> list[tuple[str, int, str]]:
        """(SHA, committer time in seconds since the epoch, subject) of since..until along the first-parent line,
        oldest first."""
        listing = self.out(["log", "--first-parent", "--reverse", "--format=%H %ct %s", "--end-of-options",
                            f"{since}..{until}"])
        rows = []
        for line in listing.splitlines():
            sha, stamp, *subject = line.split(" ", 2)
            rows.append((sha, int(stamp), subject[0] if subject else ""))
        return rows

    def commit_info(self, sha: str) -> CommitInfo:
        commit = self.repo.commit(sha)
        return CommitInfo(sha=commit.hexsha, subject=commit.summary if isinstance(commit.summary, str) else
                          commit.summary.decode("utf-8", "replace"),
                          author=f"{commit.author.name} <{commit.author.email}>",
                          date=commit.authored_datetime.isoformat())

    def commit_facts(self, commits: Sequence[str]) -> dict[str, CommitFacts]:
        """{SHA: message, author and subject} of these commits, from one `git log --no-walk`."""
        listing = self.run(["log", "--no-walk=unsorted", "--format=%H%x00%an <%ae>%x00%s%x00%B%x00",
                            "--end-of-options", *commits]).stdout.decode("utf-8", "replace")
        fields = listing.split("\0")  # no field of a commit can hold a NUL: four per commit, exactly
        return {fields[i].lstrip("\n"): CommitFacts(message=fields[i + 3], author=fields[i + 1], subject=fields[i + 2])
                for i in range(0, len(fields) - 3, 4)}

    def subjects(self, base: str, tip: str = "HEAD") -> list[str]:
        return self.out(["log", "--format=%s", "--end-of-options", f"{base}..{tip}"]).splitlines()

    def last_commit_touching(self, since: str, until: str, paths: Sequence[str]) -> str | None:
        if not paths:
            return None
        return self.out(["log", "-1", "--format=%H", f"{since}..{until}", "--", *literal(paths)]) or None

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

    def widen(self) -> None:
        """Write every file of a sparse worktree and drop its sparse patterns (a stopped am's conflict is kept).

        A person resolving a conflict may need to read, build or edit any file: in a sparse worktree `git add` of a
        file outside the patterns fails and `git add -A` skips it without a word.
        """
        patterns = self.git_dir / "info" / "sparse-checkout"
        if not patterns.is_file():
            return
        # Not `git sparse-checkout disable`: it turns on per-worktree config, which moves `core.bare` out of the
        # mirror's config (GitPython then takes the mirror for a worktree). Unmerged entries are never skipped.
        listing = self.run(["ls-files", "-t", "-z"]).stdout.split(b"\0")
        skipped = b"".join(entry[2:] + b"\0" for entry in listing if entry.startswith(b"S "))
        if skipped:
            self.run(["update-index", "--no-skip-worktree", "-z", "--stdin"], stdin=skipped)
            self.run(["checkout-index", "-z", "--stdin"], stdin=skipped)
        patterns.unlink()

    def unmerged(self) -> list[str]:
        return [p for p in self.out(["diff", "--name-only", "--diff-filter=U", "-z"],  # no index refresh: a reader
                                    env={"GIT_OPTIONAL_LOCKS": "0"}).split("\0") if p]

    def checkout(self, commit: str) -> None:
        """Detach a clean worktree at `commit`; fail when git could not write every file.

        git checkout exits 0 even when it cannot unlink or create a file (a read-only worktree, a full disk): it
        only says so on stderr. Only then is the worktree compared with the commit (a quiet checkout says nothing).
        """
        proc = self.run(["checkout", "--quiet", "--detach", commit, "--"])
        if not proc.stderr.strip():
            return
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
            self.run(["clean", "--quiet", "--force", "--", *literal(paths)])
