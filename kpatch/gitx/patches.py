"""Patches as git sees them: format-patch, patch-id, what `git am` reads back out of a mail, trial applies."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from kpatch.gitx.repo import Repository
from kpatch.gitx.runner import run

# Options that make format-patch output depend on nothing but the commit (no version, signature or
# abbreviation noise); user and system git config is ignored for the same reason.
FORMAT_PATCH = ("format-patch", "--zero-commit", "--no-signature", "-N", "--full-index", "--no-thread",
                "--no-attach", "--no-cover-letter", "--no-notes", "--encode-email-headers", "-M", "--stat=72")


class Trial(Enum):
    """What `git am -3` of one patch would do, found on a throwaway index."""

    CLEAN = "clean"
    THREE_WAY = "three-way"
    EMPTY = "empty"
    CONFLICT = "conflict"


@dataclass(frozen=True)
class MailReading:
    """What `git am` would take out of one mbox text: how many mails, the message, and the author."""

    mails: int
    message: str  # subject + blank line + body, as the commit would get it
    author: str
    has_diff: bool


def format_patches(tree: Repository, base: str, tip: str = "HEAD") -> list[bytes]:
    """`git format-patch` of base..tip, one mbox text per commit, deterministic bytes."""
    with tempfile.TemporaryDirectory(prefix="kpatch-export-") as folder:
        tree.run([*FORMAT_PATCH, "--output-directory", folder, "--end-of-options", f"{base}..{tip}"])
        return [p.read_bytes() for p in sorted(Path(folder).iterdir())]


def patch_ids(repo: Repository, diff: bytes, *, verbatim: bool = False) -> list[tuple[str, str]]:
    """(patch-id, commit or zeros) of every patch in `diff`, in order: the one patch-id path.

    `--stable` ignores whitespace (what already-merged detection wants); `--verbatim` does not (what tells a
    patch applied with its CRs from one whose CRs were stripped).
    """
    text = repo.run(["patch-id", "--verbatim" if verbatim else "--stable"], stdin=diff).text
    return [(parts[0], parts[1]) for parts in (line.split() for line in text.splitlines()) if len(parts) == 2]


def file_patch_ids(repo: Repository, files: Sequence[Path], *, verbatim: bool = False) -> list[str | None]:
    """The patch-id of each patch file (None for one git finds no diff in), in one call when it can."""
    ids = [pid for pid, _ in patch_ids(repo, b"".join(f.read_bytes() for f in files), verbatim=verbatim)]
    if len(ids) == len(files):
        return list(ids)
    return [next(iter(pid for pid, _ in patch_ids(repo, f.read_bytes(), verbatim=verbatim)), None) for f in files]


def commit_patch_ids(repo: Repository, since: str, until: str, paths: Sequence[str] | None = None, *,
                     verbatim: bool = False) -> dict[str, str]:
    """{commit: patch-id} for since..until (only commits touching `paths`, when given), oldest first."""
    if paths is not None and not paths:
        return {}
    args = ["--reverse", "--end-of-options", f"{since}..{until}"]
    if paths is not None:
        args = ["--no-renames", *args, "--", *paths]
    return _log_patch_ids(repo, args, verbatim=verbatim)


def patch_ids_of(repo: Repository, commits: Sequence[str], *, verbatim: bool = False) -> dict[str, str]:
    """{commit: patch-id} for exactly these commits."""
    if not commits:
        return {}
    return _log_patch_ids(repo, ["--no-walk=unsorted", "--end-of-options", *commits], verbatim=verbatim)


def _log_patch_ids(repo: Repository, args: list[str], *, verbatim: bool) -> dict[str, str]:
    diff = repo.run(["log", "-p", "--no-color", "--no-ext-diff", "--format=commit %H", *args]).stdout
    return {commit: pid for pid, commit in patch_ids(repo, diff, verbatim=verbatim)}


def read_mail(repo: Repository, data: bytes) -> MailReading:
    """Split and read `data` exactly as `git am -3 --keep-cr --keep-non-patch` will (mailsplit + mailinfo)."""
    if not data.strip():  # what format-patch writes for an empty commit; mailsplit calls it an error
        return MailReading(mails=0, message="", author="", has_diff=False)
    with tempfile.TemporaryDirectory(prefix="kpatch-mail-") as folder:
        where = Path(folder)
        (where / "mbox").write_bytes(data)
        (where / "split").mkdir()
        count = int(run(["mailsplit", "--keep-cr", f"-o{where / 'split'}", "--", str(where / "mbox")],
                        where).text.strip() or 0)
        first = where / "split" / "0001"
        if count < 1 or not first.exists():
            return MailReading(mails=count, message="", author="", has_diff=False)
        info = run(["mailinfo", "-b", "-u", str(where / "msg"), str(where / "patch")], where,
                   stdin=first.read_bytes()).text
        fields = dict(line.split(": ", 1) for line in info.splitlines() if ": " in line)
        body = (where / "msg").read_text(encoding="utf-8", errors="replace")
        message = fields.get("Subject", "") + ("\n\n" + body if body.strip() else "")
        author = f"{fields.get('Author', '')} <{fields.get('Email', '')}>"
        return MailReading(mails=count, message=message, author=author, has_diff=(where / "patch").stat().st_size > 0)


def trial(repo: Repository, commit: str, kept: Sequence[Path], patch: Path) -> Trial:
    """What `git am -3` of `patch` would do on `commit` with `kept` applied first, on a throwaway index only."""
    with tempfile.TemporaryDirectory(prefix="kpatch-trial-") as folder:
        env = {"GIT_INDEX_FILE": str(Path(folder) / "index")}

        def apply(path: Path, *how: str) -> bool:
            return repo.run(["-c", "rerere.enabled=false", "apply", "--cached", *how, "--", str(path)], env=env,
                            check=False).status == 0

        repo.run(["read-tree", "--end-of-options", commit], env=env)
        if not all(apply(k, "--3way") for k in kept):
            return Trial.CONFLICT
        before = repo.out(["write-tree"], env=env)
        if apply(patch):
            result = Trial.CLEAN
        elif apply(patch, "--3way"):
            result = Trial.THREE_WAY
        else:
            return Trial.CONFLICT
        return Trial.EMPTY if repo.out(["write-tree"], env=env) == before else result
