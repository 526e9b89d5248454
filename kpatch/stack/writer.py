"""The stack writer: worktree commits -> patch files and series (what `export` and `rebase` write).

A patch file is only written when `git am` will read it back as the same commit: one mail, the same message
and trailers, the same author, a real diff. Otherwise export refuses and says which commit and why.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kpatch.errors import SeriesError, WorktreeError
from kpatch.files import SERIES_FILE
from kpatch.gitx import CommitFacts, MailReading, Repository, read_mail, read_mails
from kpatch.gitx.mails import plain_reading
from kpatch.gitx.patches import Formatting
from kpatch.stack.mbox import Patch, parse_patch_text, read_text
from kpatch.stack.series import SERIES, Series, header_comments, render_series

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

# What `git mailinfo` takes for a mail header when it opens the body (an "in-body header").
_IN_BODY_HEADER = re.compile(r"^(From|Subject|Date):", re.IGNORECASE)
_SPACES = re.compile(r"[ \t\r\n]+")  # git's isspace(): what mailinfo collapses in a subject


@dataclass(frozen=True)
class Rendered:
    """What a stack's folder should hold: patch files by path, and the series file's bytes."""

    files: dict[Path, bytes]
    series: bytes
    patches: tuple[Patch, ...] = ()  # each file as kpatch reads it back, in series order
    commits: dict[Path, str] = field(default_factory=dict)  # the commit each file was made from

    def as_series(self, series: Series, dropped: Mapping[str, str]) -> Series:
        """The stack as it reads once these files are written."""
        return Series(upstream=series.upstream, folder=series.folder, patches=self.patches, dropped=dict(dropped))


def render(tree: Repository, base: str, series: Series, dropped: Mapping[str, str], *,
           pinned: frozenset[str] | None = None, tip: str = "HEAD",
           stage: Callable[[Path, bytes, Path | None], None] | None = None) -> Rendered:
    """The patch files and series that base..tip of `tree` give, reusing the series' file names. With `pinned`
    (export: the file names a `Requires:` names, which must not change), a stack whose numbers no longer run in
    apply order (a reorder, a commit put between two) is renumbered 1..n: a rename, the contents as they were.

    Each patch is read (as git am and kpatch will read it) as soon as git has written it, while git writes the
    next, and handed to `stage` (a journal's Stager.put) with its path and the file git wrote it in; the refusals
    come afterwards, in the order they always came."""
    with Formatting(tree, base, tip) as formatting:
        listed, slugs = _listing(tree, base, tip)
        names = _names(series, listed, slugs)
        if pinned is not None:
            names = _renumbered(names, pinned)
        reader = _Reader(tree, series.folder, names, listed, {p.path: p for p in series.patches}, stage)
        try:
            texts = formatting.texts(reader.read)
        finally:
            reader.stop()
    if len(texts) != len(listed):
        raise WorktreeError(f"{tree.path}: {len(listed) - len(texts)} merge commit(s) in {base[:12]}..{tip}: "
                            "a patch stack is a straight line of commits")
    files: dict[Path, bytes] = {}
    commits: dict[Path, str] = {}
    changed: list[tuple[str, bytes]] = []
    readings: list[MailReading | None] = []
    for index, (name, (commit, _subject), data) in enumerate(zip(names, listed, texts, strict=True)):
        target = series.folder / name
        early = reader.early(index, data)
        if early.changed if early is not None else not (target.is_file() and _same_mail(target.read_bytes(), data)):
            changed.append((commit, data))
            readings.append(early.reading() if early is not None else None)
        files[target], commits[target] = data, commit
    check_round_trips(tree, changed, readings, reader.facts())
    patches = read_back(tree, files, commits, {p.path: p for p in series.patches},
                        [reader.early(index, data) for index, data in enumerate(texts)])
    series_file = series.folder / SERIES
    header = header_comments(read_text(series_file, SERIES_FILE)) if series_file.is_file() else ""
    return Rendered(files=files, series=render_series(header, dict(dropped), [p.name for p in files]),
                    patches=patches, commits=commits)


def _listing(tree: Repository, base: str, tip: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(SHA, subject) of each commit of base..tip, oldest first (`tree.commit_subjects`), and git's own file-name
    part of each (`%f`, what format-patch names its files by: letters, digits, '.' and '_' kept, every other run of
    characters one '-'), from one `git log`."""
    parts = tree.run(["log", "--reverse", "--format=%H %s%x00%f%x00", "--end-of-options", f"{base}..{tip}"]).stdout
    fields = parts.split(b"\0")[:-1]  # (sha and subject, slug) of each commit; each entry after a newline
    entries = [field.decode("utf-8", "replace").strip("\n") for field in fields[0::2]]
    return [(e[:40], e[41:]) for e in entries], [field.decode("ascii", "replace") for field in fields[1::2]]


def _names(series: Series, listed: list[tuple[str, str]], slugs: list[str]) -> list[str]:
    """The file name of each commit: the series' own where a patch of that subject is there, else git's."""
    old = list(series.patches)
    names: list[str] = []
    given: set[str] = set()  # the names so far
    taken = {p.name for p in old}  # the series' names and the names so far
    numbers = _numbers(taken)  # theirs
    for index, (_commit, subject) in enumerate(listed):
        same = next((p for p in old if p.subject == subject and p.name not in given), None)
        if index < len(old) and old[index].subject == subject and old[index].name not in given:
            name = old[index].name
        elif same is not None:
            name = same.name
        else:
            name = _fresh_name(index, slugs[index], taken, numbers)
        names.append(name)
        given.add(name)
        taken.add(name)
        numbers |= _numbers([name])
    return names


@dataclass
class _Early:
    """One patch text as it was read while git wrote the next: whether it differs from the file on disk (for git
    am), what git am reads out of it, and what kpatch reads (a Patch, or the error reading it raised)."""

    data: bytes
    changed: bool
    plain: MailReading | None = None  # read in process
    by_git: Future[MailReading] | None = None  # read by git's mailsplit and mailinfo, in a thread
    parsed: Patch | SeriesError | UnicodeDecodeError | None = None  # None: the same as the file on disk

    def reading(self) -> MailReading:
        if self.plain is not None:
            return self.plain
        assert self.by_git is not None
        return self.by_git.result()


class _Reader:
    """What render reads out of each patch text, done as each comes (`read`): the mail git am will read
    (plain ones in process, the rest by git in a thread), the commits' words to compare them with (one git log,
    in a thread), and the patch as kpatch reads it back."""

    def __init__(self, tree: Repository, folder: Path, names: list[str], listed: list[tuple[str, str]],
                 old: dict[Path, Patch], stage: Callable[[Path, bytes, Path | None], None] | None) -> None:
        self.tree, self.folder, self.names, self.listed, self.old, self.stage = tree, folder, names, listed, old, stage
        self.done: dict[int, _Early] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._facts: Future[dict[str, CommitFacts]] | None = None

    def read(self, index: int, data: bytes, written: Path | None) -> None:
        if index >= len(self.names):  # more texts than commits: refused afterwards
            return
        target = self.folder / self.names[index]
        on_disk = target.read_bytes() if target.is_file() else None
        early = _Early(data=data, changed=on_disk is None or not _same_mail(on_disk, data))
        if early.changed:
            early.plain = plain_reading(data)
            if early.plain is None:
                early.by_git = self._threads().submit(read_mail, self.tree, data)
            if self._facts is None:
                self._facts = self._threads().submit(self.tree.commit_facts, [c for c, _ in self.listed])
        if self.old.get(target) is None or on_disk != data:
            try:
                early.parsed = parse_patch_text(data.decode("utf-8"), target)
            except (SeriesError, UnicodeDecodeError) as err:
                early.parsed = err
        self.done[index] = early
        if self.stage is not None:
            self.stage(target, data, written)

    def _threads(self) -> ThreadPoolExecutor:
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor  # only here: most renders read plain mails only

            self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kpatch-read")
        return self._pool

    def early(self, index: int, data: bytes) -> _Early | None:
        """What was read of text `index` while git wrote the next, when it was this very text."""
        early = self.done.get(index)
        return early if early is not None and early.data is data else None

    def facts(self) -> dict[str, CommitFacts] | None:
        return self._facts.result() if self._facts is not None else None

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def read_back(tree: Repository, files: dict[Path, bytes], commits: dict[Path, str],
              old: dict[Path, Patch], early: Sequence[_Early | None] = ()) -> tuple[Patch, ...]:
    """Each file as kpatch will read it (a file the same as the one on disk was read already): a patch kpatch
    would refuse to read (a trailer it rejects, a path that is not UTF-8) is refused now, naming its commit.
    `early`: what render's reader read of each file already, in order (None where it did not)."""
    out = []
    for index, (path, data) in enumerate(files.items()):
        ahead = early[index] if index < len(early) else None
        same = old.get(path)
        if same is not None and (ahead.parsed is None if ahead is not None else
                                 path.is_file() and path.read_bytes() == data):
            out.append(same)
            continue
        try:
            parsed = ahead.parsed if ahead is not None else None
            if isinstance(parsed, Exception):
                raise parsed
            out.append(parsed if parsed is not None else parse_patch_text(data.decode("utf-8"), path))
        except UnicodeDecodeError as err:
            raise WorktreeError(f"{describe(tree, commits[path])}: its patch is not UTF-8 text (byte {err.start}); "
                                "kpatch reads UTF-8 patches only: nothing was written") from None
        except SeriesError as err:
            reason = str(err).removeprefix(f"{path}")
            line, _, rest = reason.removeprefix(":").partition(": ")
            why = f"line {line} of its patch: {rest}" if line.isdigit() else reason.removeprefix(": ")
            raise WorktreeError(f"{describe(tree, commits[path])}: kpatch would not read its patch back ({why}); "
                                "fix the commit: nothing was written") from None
    return tuple(out)


def describe(tree: Repository, commit: str) -> str:
    """`commit <sha> "<subject>"`, as the writer's refusals name a commit."""
    return f"commit {commit[:12]} \"{tree.commit_info(commit).subject}\""


def _same_mail(old: bytes, new: bytes) -> bool:
    """Whether git am reads `new` as it reads `old`, the file it replaces: both are the same bytes up to the first
    `diff --git` line (mail headers, message and diffstat; whatever ends the message for mailinfo is at or before
    it), `new` has a diff after it, and no other line of that part starts a mail for mailsplit. A file whose text
    is unchanged needs no read-back check; nor does one where only the diff moved (a rebase shifted its lines).
    """
    if old == new:
        return True
    marker = b"\ndiff --git "
    cut = new.find(marker) + len(marker)
    if cut < len(marker) or old[:cut] != new[:cut]:
        return False
    return b"\nFrom " not in new[:cut]


def check_round_trips(tree: Repository, texts: Sequence[tuple[str, bytes]],
                      readings: Sequence[MailReading | None] = (), facts: dict[str, CommitFacts] | None = None) -> None:
    """Refuse a patch text that `git am` would not turn back into its commit (message, trailers, author, diff), for
    each (commit, patch text): git reads all the mails, and the commits, in a few calls. `readings` (in order, None
    where not read yet) and `facts` (of these commits or more): what was read of them already."""
    if not texts:
        return
    missing = [index for index in range(len(texts)) if index >= len(readings) or readings[index] is None]
    read = dict(zip(missing, read_mails(tree, [texts[index][1] for index in missing]), strict=True))
    if facts is None or any(commit not in facts for commit, _ in texts):
        facts = tree.commit_facts([commit for commit, _ in texts])
    for index, (commit, _) in enumerate(texts):
        reading = read[index] if index in read else readings[index]
        assert reading is not None
        _check(commit, reading, facts[commit])


def _check(commit: str, reading: MailReading, fact: CommitFacts) -> None:
    what = f"commit {commit[:12]} \"{fact.subject}\""
    if reading.mails == 0 or (reading.mails == 1 and not reading.has_diff):
        raise WorktreeError(f"{what} changes nothing (an empty commit): drop it from the stack")
    if reading.mails != 1:
        raise WorktreeError(f"{what}: a message line that starts with 'From ' makes git am read {reading.mails} "
                            "mails out of its patch; reword that line")
    original = _lines(fact.message)
    read_back = _lines(reading.message)
    if read_back != original:
        raise WorktreeError(f"{what}: git am would not read its message back: {_difference(original, read_back)}; "
                            "reword it")
    name = fact.author.rpartition(" <")[0]
    if _read_past_its_end(name):
        raise WorktreeError(f"{what}: git am reads the author name {name!r} past its end "
                            "(a '(' or '\"' left open in a non-ASCII name): what it takes differs from run to run; "
                            "fix the name")
    if reading.author != fact.author:
        raise WorktreeError(f"{what}: git am would read its author as {reading.author!r}, not {fact.author!r}")


def changed_words(reading: MailReading, fact: CommitFacts) -> str | None:
    """What of a commit's words a patch file does not hold ('message', 'author'), or None: git am of that file
    gives the commit's message and author (a diff with the same patch-id then makes it the same commit)."""
    if _lines(reading.message) != _lines(fact.message):
        return "message"
    if reading.author != fact.author:
        return "author"
    return None


def _read_past_its_end(name: str) -> bool:
    """Whether git's mailinfo, unquoting the comments and quoted strings of a From: header it decoded from RFC 2047
    (format-patch encodes a non-ASCII name that way, an ASCII one it quotes), runs off the name's end: a comment or
    quoted string still open there makes it read the bytes that follow in memory (git 2.39: author names with
    garbage after them, a different one each run; the read-back may even see the right name)."""
    if name.isascii():
        return False
    open_: list[str] = []  # the '(' and '"' still open, innermost last
    literal = False
    for char in name:
        if not open_:
            if char in "(\"":
                open_.append(char)
        elif literal:
            literal = False
        elif char == "\\":
            literal = True
        elif open_[-1] == '"':
            if char == '"':
                open_.pop()
        elif char == "(":
            open_.append(char)
        elif char == ")":
            open_.pop()
    return bool(open_)


def am_subject(subject: str) -> str:
    """A subject as `git am` reads it out of the mail format-patch writes: mailinfo makes every run of spaces and
    tabs one space and trims the ends ("Fix  the  cache" -> "Fix the cache")."""
    return _SPACES.sub(" ", subject).strip(" ")


def as_am_reads(message: str) -> str | None:
    """`message` with its one-line subject as git am reads it (`am_subject`), when that differs; else None (a
    subject paragraph of several lines is refused elsewhere, with its own reason)."""
    first, newline, rest = message.partition("\n")
    now = am_subject(first)
    one_line = not rest.strip() or rest.startswith("\n")
    return now + newline + rest if now and now != first.rstrip() and one_line else None


def _difference(original: list[str], read_back: list[str]) -> str:
    """Why git am reads a message back otherwise, in words that say what to change."""
    subject_end = original.index("") if "" in original else len(original)
    if subject_end > 1:
        return (f"its first paragraph ({subject_end} lines) is the subject, which git am reads as one line: "
                "put a blank line after the first line")
    body = original[subject_end + 1] if len(original) > subject_end + 1 else ""
    header = _IN_BODY_HEADER.match(body)
    if header:
        return f"its body starts with a {header.group(1)!r} line, which git am takes for a mail header"
    if read_back[:1] != original[:1] and read_back[:1] == [am_subject(original[0])]:
        return f"git am reads its subject as {read_back[0][:60]!r} (it makes every run of spaces one space)"
    if read_back[:1] != original[:1]:
        return (f"git am reads its subject as {(read_back or [''])[0][:60]!r} (it drops 'Re:', ':' and "
                "'[PATCH ...]' at the start)")
    cut = next((i for i, line in enumerate(original) if i and line.startswith(("---", "diff -", "Index: "))), None)
    if cut is not None and original[:len(read_back)] == read_back:
        return (f"line {cut + 1} ({original[cut][:60]!r}) ends the message for git am, as every line starting "
                "with '---', 'diff -' or 'Index: ' does")
    pairs = zip(original, read_back, strict=False)
    at = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(original), len(read_back)))
    return f"it differs from line {at + 1} ({(original[at] if at < len(original) else '')[:60]!r})"


def _lines(message: str) -> list[str]:
    """A commit message as git keeps it: no trailing spaces, no leading, trailing or doubled blank lines."""
    out: list[str] = []
    for line in message.replace("\r\n", "\n").split("\n"):
        line = line.rstrip()
        if line or (out and out[-1]):
            out.append(line)
    while out and not out[-1]:
        out.pop()
    return out


# format-patch's longest name (its --filename-max-length, 64 unless configured) less ".patch" and one more byte.
_NAME_MAX = 64 - len(".patch") - 1
_NUMBERED = re.compile(r"^(\d{4})-(.+)$")


def _numbers(names: Iterable[str]) -> set[int]:
    """The NNNN of each numbered name."""
    return {int(m.group(1)) for m in map(_NUMBERED.match, names) if m}


def _fresh_name(index: int, slug: str, taken: set[str], numbers: set[int] | None = None) -> str:
    """`NNNN-slug.patch` as `git format-patch` names the file (cut where it cuts), unique in the folder, its number
    too: where another file has NNNN already, the next number after the highest. `numbers`: `_numbers(taken)`."""
    numbers = _numbers(taken) if numbers is None else numbers
    number = index + 1 if index + 1 not in numbers else max(numbers) + 1
    stem = f"{number:04d}-{slug}"[:_NAME_MAX]
    name, extra = f"{stem}.patch", 2
    while name in taken:
        name, extra = f"{stem}-{extra}.patch", extra + 1
    return name


def _renumbered(names: list[str], pinned: frozenset[str]) -> list[str]:
    """`names` (in apply order) renumbered 0001..n when their numbers do not rise in that order, so that the
    folder's order is the apply order; as they were when they do, when one is not numbered, or when a file that
    would be renamed is one a `Requires:` names."""
    found = [_NUMBERED.match(name) for name in names]
    if not all(found):
        return names
    numbers = [int(m.group(1)) for m in found if m]
    if all(a < b for a, b in itertools.pairwise(numbers)):
        return names
    new = [f"{index + 1:04d}-{m.group(2)}" for index, m in enumerate(found) if m]
    if any(old != renamed and old in pinned for old, renamed in zip(names, new, strict=True)):
        return names
    return new
