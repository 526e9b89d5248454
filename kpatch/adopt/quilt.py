"""`kpatch import NAME --series DIR`: a quilt series (or a folder of .patch/.diff files, sorted) applied onto the
base one by one in a scratch worktree, each committed, then written as NAME's stack; the first patch that does not
apply is named with its failing hunk, and nothing is written."""

from __future__ import annotations

import email.parser
import email.policy
import email.utils
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from kpatch.adopt.branch import ImportResult, Reworded, Skipped, empty_stack, resolve_base, scratch, write_stack
from kpatch.engine import reuse
from kpatch.errors import PatchConflict, SeriesError, UsageError
from kpatch.files import PATCH_FILE, SERIES_FILE, read_input
from kpatch.gitx import Repository
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace
from kpatch.stack.series import hash_files
from kpatch.stack.writer import am_subject, as_am_reads

SUFFIXES = (".patch", ".diff")
_DIFF_START = re.compile(r"^(diff --git |--- |Index: )")
_HEADER = re.compile(r"^(From|Author|Subject|Description|Date):\s*(.*)$")  # mail and DEP-3 (Debian) headers
_ALIASES = {"Author": "From", "Description": "Subject"}
_PREFIX = re.compile(r"^\[PATCH[^\]]*\]\s*")
_NUMBER = re.compile(r"^\d+[-_.]")
_AUTHOR = re.compile(r"^[^<>\n]+ <[^<>\s]+>$")
_FORMAT_PATCH = re.compile(r"^From [0-9a-f]{40} ")  # the first line git format-patch writes
_FAILED = re.compile(r"^error: patch failed: (.+):(\d+)$", re.MULTILINE)


@dataclass(frozen=True)
class Plain:
    """One patch file read as a commit to make: its message, author and date (None: the caller's), and its diff."""

    path: Path
    message: str
    author: str | None
    date: str | None
    diff: bytes
    strip: int  # -pN
    mail: bool = False  # a `git format-patch` mail: git am reads it (message, trailers, author, date exactly)
    subject_as_written: str = ""  # a subject `message` has with its spaces collapsed (as git am reads it)


def import_series(ws: Workspace, ui: UI, name: str, folder: Path, *, base_ref: str | None, author: str | None,
                  requires_auto: bool = False) -> ImportResult:
    """Every patch of `folder` applied onto the base in order and written as NAME's stack."""
    if author is not None and not _AUTHOR.match(author):
        raise UsageError(f"--author takes 'Name <email>', got {author!r}")
    plains = [_as_am_reads(read_plain(path, strip)) for path, strip in listed(folder)]
    for plain in plains:
        if plain.author is None and author is None:
            raise UsageError(f"{plain.path}: no author in its header: give --author 'Name <email>'")
    reworded = [r for r in map(_reworded, plains) if r is not None]
    with ws.writer("import", ui):
        upstream, series = empty_stack(ws, name)
        where = resolve_base(ws, ui, upstream, base_ref)
        mirror, base = where.mirror, where.commit
        # the base's date, for a patch without one (asked of git only then: a series of mails has their own)
        date = undated(mirror, base) if any(not p.mail and not p.date for p in plains) else ""
        skipped: list[Skipped] = []
        touched = _touched(mirror, plains)  # every patch's paths at once (None: each is checked as it comes)
        checked = touched is not None
        # only the files the patches touch are written (a sparse checkout), unless the op contract is read
        with scratch(ws, mirror, name, base, paths=None if upstream.requires else touched) as tree:
            for run in _runs(plains, checked):
                if not checked:
                    _check_paths(tree, run[0])
                if run[0].mail:
                    _am(tree, run, base)
                    continue
                (plain,) = run
                _apply(tree, plain, base)
                if not tree.out(["diff", "--cached", "--name-only"]):
                    skipped.append(Skipped(commit="", subject=plain.path.name, why="empty"))
                    continue
                _commit(tree, plain, author, date)
            files, suggestions = write_stack(ws, upstream, series, tree, where, requires_auto=requires_auto)
            # git am of these files onto the base gives these commits back: kept for `kpatch apply` to take
            reuse.keep(mirror, hash_files((path.name, path.read_bytes()) for path in files), tree.head())
    return ImportResult(name=name, base=base, files=files, skipped=tuple(skipped), suggestions=suggestions,
                        base_pinned=where.moved, reworded=tuple(reworded))


def listed(folder: Path) -> list[tuple[Path, int]]:
    """The patch files in order, each with its -p level: the `series` file's (quilt: `name [-pN]`, `#` comments),
    else every .patch and .diff file, sorted by name."""
    if not folder.is_dir():
        raise UsageError(f"--series: no folder {folder}")
    series = folder / "series"
    if not os.path.lexists(series):  # a FIFO or device named series is refused by read_input, not passed over
        found = sorted(p for p in folder.iterdir() if p.suffix in SUFFIXES and p.exists() and not p.is_dir())
        if not found:
            raise UsageError(f"--series: {folder} has no series file and no .patch or .diff files")
        for path in found:  # as for a series file's names: a link may not lead out of the folder
            if not path.resolve().is_relative_to(folder.resolve()):
                raise SeriesError(f"{path}: a link to {path.resolve()}, outside {folder} (nothing was written)")
        return [(p, 1) for p in found]
    out = []
    text = read_input(series, SERIES_FILE, SeriesError).decode("utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        strip = 1
        for option in words[1:]:
            if not re.fullmatch(r"-p[0-9]", option):
                raise SeriesError(f"{series}:{number}: unknown option {option!r} (quilt's -pN only)")
            strip = int(option[2:])
        path = (folder / words[0]).resolve()
        if not path.is_relative_to(folder.resolve()) or not path.exists() or path.is_dir():
            raise SeriesError(f"{series}:{number}: no patch file {words[0]!r} in {folder}")
        out.append((path, strip))
    if not out:
        raise UsageError(f"--series: {series} lists no patches")
    return out


def read_plain(path: Path, strip: int) -> Plain:
    """A patch file: the leading text (mail-style From/Subject/Date headers, or free text) and the diff after it.
    Its message: the Subject, else the first line of text, else words made from the file name."""
    data = read_input(path, PATCH_FILE, SeriesError)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        at = data.count(b"\n", 0, err.start) + 1
        raise SeriesError(f"{path}:{at}: not UTF-8 (byte 0x{data[err.start]:02x}); kpatch reads UTF-8 patches "
                          "only (nothing was written)") from None
    lines = text.split("\n")  # a CRLF file's CRs are content: they stay in the diff
    cut = next((i for i, line in enumerate(lines) if _DIFF_START.match(line)), None)
    if cut is None:
        raise SeriesError(f"{path}: no diff in it (no 'diff --git', '--- ' or 'Index: ' line)")
    headers: dict[str, str] = {}
    body: list[str] = []
    for line in lines[:cut]:
        match = _HEADER.match(line.rstrip())
        key = _ALIASES.get(match.group(1), match.group(1)) if match else ""
        if match and not body and key not in headers:
            headers[key] = match.group(2).strip()
        elif line.startswith("From ") and not body and not headers:
            continue  # an mbox's separator line
        else:
            body.append(line.rstrip())
    while (body and body[-1] in ("", "---")) or (body and _diffstat(body[-1])):
        body.pop()
    while body and not body[0]:
        body.pop(0)
    subject = _PREFIX.sub("", headers.get("Subject", ""))
    if not subject:
        subject = body.pop(0) if body else _from_name(path)
        while body and not body[0]:
            body.pop(0)
    message = subject + ("\n\n" + "\n".join(body) if body else "") + "\n"
    author = headers.get("From")
    if author is not None:
        name, address = email.utils.parseaddr(author)
        author = f"{name or address} <{address}>" if address else None
    return Plain(path=path, message=message, author=author, date=headers.get("Date"),
                 diff="\n".join(lines[cut:]).encode("utf-8"), strip=strip, mail=_FORMAT_PATCH.match(text) is not None)


def _diffstat(line: str) -> bool:
    return bool(re.match(r"^ \S.* \| +\d+ ?[-+]*$", line) or re.match(r"^ \d+ files? changed", line))


def _from_name(path: Path) -> str:
    """`0003-fix_the-cache.patch` -> `fix the cache`."""
    words = _NUMBER.sub("", path.stem).replace("_", " ").replace("-", " ").split()
    return " ".join(words) or path.stem


def _check_paths(tree: Repository, plain: Plain) -> None:
    """Refuse a diff that writes outside the tree or into .git (before git sees it)."""
    bad = _outside(tree, [plain])
    if bad:
        raise SeriesError(f"{plain.path}: it writes {bad[0]!r}, outside the tree (nothing was written)")


def _outside(tree: Repository, plains: Sequence[Plain]) -> list[str] | None:
    """The paths the diffs (all with one -p level) write outside the tree or into .git, by one `git apply
    --numstat`; None when git cannot read them (git apply then names what is wrong)."""
    listed = _listed(tree, plains)
    return None if listed is None else [path for path in listed if _leaves(path)]


def _listed(repo: Repository, plains: Sequence[Plain]) -> list[str] | None:
    """The paths the diffs (all with one -p level) touch, by one `git apply --numstat` (it reads the diffs only:
    the mirror does); None when git cannot read them."""
    listing = repo.run(["apply", f"-p{plains[0].strip}", "--numstat", "-z", "-"],
                       stdin=b"\n".join(p.diff for p in plains), check=False)
    if listing.status != 0:
        return None
    entries = listing.stdout.decode("utf-8", "surrogateescape").split("\0")
    return [path for path in (e.split("\t")[-1] if "\t" in e else e for e in entries) if path]


def _leaves(path: str) -> bool:
    """Whether a path a diff writes is outside the tree or in .git."""
    parts = path.split("/")
    return path.startswith("/") or ".." in parts or ".git" in parts


def _touched(repo: Repository, plains: Sequence[Plain]) -> list[str] | None:
    """Every path the diffs touch, when git reads every diff and none writes outside the tree, asked once per -p
    level: then no patch needs its own check. Otherwise (a path outside, a diff git cannot read) None: each patch
    is checked as it comes, so that the refusal is the one the first such patch gets, in series order."""
    paths: set[str] = set()
    for strip in sorted({p.strip for p in plains}):
        listed = _listed(repo, [p for p in plains if p.strip == strip])
        if listed is None or any(_leaves(path) for path in listed):
            return None
        paths.update(listed)
    return sorted(paths)


def _runs(plains: Sequence[Plain], together: bool) -> list[list[Plain]]:
    """The patches in series order, in runs to apply at once: (`together`) the mails that follow each other with
    one -p level go to one `git am`; every other patch alone."""
    runs: list[list[Plain]] = []
    for plain in plains:
        last = runs[-1] if runs else None
        if together and last and plain.mail and last[-1].mail and last[-1].strip == plain.strip:
            last.append(plain)
        else:
            runs.append([plain])
    return runs


def _apply(tree: Repository, plain: Plain, base: str) -> None:
    proc = tree.run(["apply", "--index", f"-p{plain.strip}", "--whitespace=nowarn", "-"], stdin=plain.diff,
                    check=False)
    if proc.status != 0:
        raise _conflict(plain, base, proc.stderr)


def _am(tree: Repository, mails: Sequence[Plain], base: str) -> None:
    """`git am` of mails that follow each other in the series (one -p level): one process for all of them. When
    that stops, it is undone and each mail gets an am of its own, so that the first that does not apply is named
    with its hunk."""
    from kpatch.gitx.am import AM_OPTIONS

    options = [o for o in AM_OPTIONS if o != "-3"]  # a patch that does not apply is named, not merged
    if len(mails) > 1:
        proc = tree.run(["am", *options, f"-p{mails[0].strip}", "--", *(str(m.path) for m in mails)], check=False)
        if proc.status == 0:
            return
        tree.run(["am", "--abort"], check=False)
    for mail in mails:
        proc = tree.run(["am", *options, f"-p{mail.strip}", "--", str(mail.path)], check=False)
        if proc.status != 0:
            tree.run(["am", "--abort"], check=False)
            raise _conflict(mail, base, proc.stderr + proc.text)


def _conflict(plain: Plain, base: str, output: str) -> PatchConflict:
    """The refusal of a patch that does not apply: its first failing hunk (git's "patch failed: FILE:LINE")."""
    failed = _FAILED.search(output)
    said = [line.removeprefix("error: ") for line in output.splitlines() if line.startswith("error: ")]
    where = f"hunk at {failed.group(1)}:{failed.group(2)} does not apply" if failed else \
        (said or output.strip().splitlines() or ["git failed"])[0]
    return PatchConflict(f"{plain.path.name} does not apply onto {base[:12]}: {where} (nothing was written)")


def undated(mirror: Repository, base: str) -> str:
    """The date a patch without one gets: the base commit's (its committer date), so that importing the same
    patches onto the same base writes the same bytes every time (the time of the import would not)."""
    return "@" + mirror.out(["log", "-1", "--no-walk", "--date=raw", "--format=%cd", "--end-of-options", base])


def _reworded(plain: Plain) -> Reworded | None:
    """A patch whose subject git am reads with its spaces collapsed: a mail's (am does it), or a plain patch's
    (`_as_am_reads` does it, so that the patch file written gives back the commit)."""
    if plain.mail:
        data = read_input(plain.path, PATCH_FILE, SeriesError)
        header = email.parser.BytesHeaderParser(policy=email.policy.default).parsebytes(data)
        subject = _PREFIX.sub("", str(header.get("Subject", "")))
    else:
        subject = plain.subject_as_written
    now = am_subject(subject)
    if not now or now == subject.rstrip():
        return None
    return Reworded(commit="", file=plain.path.name, subject=subject, now=now)


def _as_am_reads(plain: Plain) -> Plain:
    """A plain patch whose one-line subject has runs of spaces, with them collapsed (the subject as written is
    kept for the report)."""
    message = None if plain.mail else as_am_reads(plain.message)
    if message is None:
        return plain
    return replace(plain, message=message, subject_as_written=plain.message.partition("\n")[0])


def _commit(tree: Repository, plain: Plain, author: str | None, undated: str) -> None:
    who = plain.author or author  # the header's own, else --author
    assert who is not None
    date = plain.date or undated
    env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    proc = tree.run(["commit", "--quiet", "--no-verify", "--no-gpg-sign", f"--author={who}", "--cleanup=verbatim",
                     "--file=-"], stdin=plain.message.encode("utf-8"), env=env, check=False)
    if proc.status != 0:
        said = [line.removeprefix("fatal: ") for line in proc.stderr.splitlines() if line.startswith("fatal: ")]
        why = f"its Date {plain.date!r} is not a date git reads" if plain.date and any(
            "date" in line for line in said) else f"git commit refused it ({(said or ['?'])[0]})"
        raise SeriesError(f"{plain.path}: {why} (nothing was written)")
