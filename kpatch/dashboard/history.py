"""The carry history: one JSON line per patch per night, and one per night, versioned, append-only, compacted.

A line is `{"v": 2, "kind": "patch" | "night" | "pull", ...}` (a "pull": one Upstream-PR's state that night); a
patch's class is `class`, as in every command's JSON (version 1 lines, with `klass`, are still read).
Appending a night whose day is already at the end of the file rewrites that day with one record per patch (and
PR) per day (the last) and one night per day: the file grows by a day, never by a run. An append reads only the
last days, so it costs the night, not the years before it; `read` compacts a day found twice apart.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import json
import os
import types
import typing
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kpatch.errors import UsageError
from kpatch.files import NotAFile, TooLarge, named, open_regular, read_regular, write_atomic
from kpatch.output.redact import redact_text

VERSION = 2  # of a line: +1 when a field is renamed or removed (2: `klass` is `class`)
READS = (1, 2)  # the versions this kpatch reads
NAME = "history.jsonl"  # in the nightly's report folder unless [dashboard] history says where
MAX_BYTES = 256 * 2**20  # a history is read whole: a bigger file (years of nights of hundreds of patches is tens
# of MiB) is refused, never read into memory (`--history /dev/zero`)


@dataclass(frozen=True)
class PatchRecord:
    """One patch on one night: what keeping it cost. A line of the carry history (its own version, `v`), so flat
    and plain strings: it adds to the rebase's `PatchReport` what the file and the night say (subject, size, age,
    PR state, tests) and drops what only that night needs (hunks, why)."""

    date: str  # the night's day, UTC, YYYY-MM-DD
    started: str  # the night's start, UTC, ISO 8601
    upstream: str
    behind: int  # upstream commits between the pinned base and the branch head that night
    patch: str  # the patch file's name
    subject: str
    klass: str = field(metadata={"json": "class"})  # clean, three-way, upstream, conflict, not tried
    conflict: bool
    culprit: str | None  # for a conflict: the upstream commit that broke it
    culprit_subject: str | None
    lines: int | None  # lines the diff adds or removes; None: the patch file is gone (dropped as upstream)
    files: int | None  # files the diff touches
    age_days: int | None  # days since the patch's Date: header
    prs: tuple[str, ...]  # its Upstream-PR trailers
    pr_state: str | None  # merged, not merged, or None (not known that night)
    tests: str | None  # its upstream's suite outcome that night (passed, failed, ...); None: not run
    # what the rebase did to it (range-diff: unchanged, changed, dropped, new); None: not known (a conflict, or a
    # line an older kpatch wrote, which has no such field)
    change: str | None = None

    @property
    def key(self) -> tuple[str, ...]:
        return ("patch", self.date, self.upstream, self.patch)


@dataclass(frozen=True)
class PullRecord:
    """One Upstream-PR's state on one night, as the forge answered (the next night reports what changed)."""

    date: str
    started: str
    pr: str  # owner/repo#N
    upstream: str
    patch: str
    state: str  # "open, approved, checks green", "merged", "closed unmerged", "not found", ...

    @property
    def key(self) -> tuple[str, ...]:
        return ("pull", self.date, self.pr, self.upstream, self.patch)


@dataclass(frozen=True)
class Behind:
    upstream: str
    branch: str
    commits: int  # upstream commits between the pinned base and the branch head
    head: str  # the branch head that night


@dataclass(frozen=True)
class StageLine:
    stage: str
    status: str
    seconds: float
    summary: str


@dataclass(frozen=True)
class SuiteLine:
    upstream: str
    outcome: str
    passed: int
    failed: int
    errors: int
    skipped: int
    message: str


@dataclass(frozen=True)
class NightRecord:
    """One night: its outcome, stages, suites and how far behind each upstream the pins were."""

    date: str
    started: str
    outcome: str  # passed, failed, no-op
    summary: str
    behind: tuple[Behind, ...]
    stages: tuple[StageLine, ...]
    suites: tuple[SuiteLine, ...]

    @property
    def key(self) -> tuple[str, ...]:
        return ("night", self.date)


Record = PatchRecord | NightRecord | PullRecord
_KINDS: dict[str, type[PatchRecord] | type[NightRecord] | type[PullRecord]] = {
    "patch": PatchRecord, "night": NightRecord, "pull": PullRecord}


@dataclass(frozen=True)
class History:
    nights: tuple[NightRecord, ...]
    patches: tuple[PatchRecord, ...]
    pulls: tuple[PullRecord, ...] = ()


def to_line(record: Record) -> str:
    """The record as one JSON line; a secret kpatch knows of (a token in a failure message) never lands in it."""
    kind = "patch" if isinstance(record, PatchRecord) else "pull" if isinstance(record, PullRecord) else "night"
    data = {f.metadata.get("json", f.name): _plain(getattr(record, f.name)) for f in dataclasses.fields(record)}
    return redact_text(json.dumps({"v": VERSION, "kind": kind, **data}, ensure_ascii=False, separators=(",", ":")))


def _plain(value: object) -> object:
    """What `dataclasses.asdict` makes of a record's field, as json.dumps writes it (a tuple as a list), without
    asdict's copy of every value first (150 records a rebase)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def from_line(text: str, where: str) -> Record:
    """One line back as its record; UsageError naming `where` (file:line) if it is not one."""
    try:
        data = json.loads(text)
    except ValueError as err:
        raise UsageError(f"{where}: not JSON ({err})") from None
    except RecursionError:
        raise UsageError(f"{where}: not a history record (JSON nested too deeply)") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: not a history record (a JSON object)")
    version = data.pop("v", None)
    if version == 1 and "klass" in data:
        data["class"] = data.pop("klass")
    if version not in READS:
        newer = isinstance(version, int) and version > VERSION
        raise UsageError(f"{where}: history version {version!r} " + ("is newer than this kpatch reads (upgrade "
                         "kpatch)" if newer else f"is not {' or '.join(map(str, READS))}"))
    kind = _KINDS.get(str(data.pop("kind", None)))
    if kind is None:
        raise UsageError(f"{where}: 'kind' must be one of {', '.join(_KINDS)}")
    try:
        value = _decode(kind, data)
    except (ValueError, TypeError) as err:
        raise UsageError(f"{where}: not a {kind.__name__}: {err}") from None
    assert isinstance(value, (PatchRecord, NightRecord, PullRecord))
    return value


def _decode(kind: object, data: object) -> object:
    """`data` as `kind`: a record dataclass, tuple[X, ...], X | None, str, int, float or bool."""
    how, inner, nullable = _plan(kind)
    if how == "union":
        return None if data is None and nullable else _decode(inner, data)
    if how == "tuple":
        if not isinstance(data, list):
            raise ValueError(f"expected a list, got {data!r}"[:120])
        return tuple(_decode(inner, item) for item in data)
    if how == "record":
        assert isinstance(kind, type)
        if not isinstance(data, dict):
            raise ValueError(f"expected an object for {kind.__name__}")
        shape = _shape(kind)
        missing = [key for _, key, _, required in shape if required and key not in data]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        return kind(**{name: _decode(hint, data[key]) for name, key, hint, _ in shape if key in data})
    if kind is float and isinstance(data, int) and not isinstance(data, bool):
        return float(data)
    if not isinstance(kind, type) or not isinstance(data, kind) or (isinstance(data, bool) and kind is not bool):
        raise ValueError(f"expected {getattr(kind, '__name__', kind)}, got {data!r}"[:120])
    return data


@functools.cache
def _plan(kind: object) -> tuple[str, object, bool]:
    """How `_decode` reads a value of `kind`: ("union", the first type that is not None, whether None is one),
    ("tuple", its items' type, False), ("record", kind, False) or ("plain", kind, False); worked out once per type,
    not once per line (a year of nights is over 100,000 lines)."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        return "union", next(k for k in options if k is not type(None)), type(None) in options
    if typing.get_origin(kind) is tuple:
        return "tuple", typing.get_args(kind)[0], False
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return "record", kind, False
    return "plain", kind, False


@functools.cache
def _shape(kind: type) -> tuple[tuple[str, str, object, bool], ...]:
    """(name, JSON key, type, required) of each field of a record dataclass. `typing.get_type_hints` evaluates
    every annotation again on each call: asked once per class, it cost 0.7 ms a line."""
    hints = typing.get_type_hints(kind)
    return tuple((f.name, f.metadata.get("json", f.name), hints[f.name], f.default is dataclasses.MISSING)
                 for f in dataclasses.fields(kind))


def read(path: Path) -> History:
    """Every record in the file, in order (a missing file is an empty history)."""
    records = compact(read_records(path))  # a day appended twice apart (a replay of older commits) counts once
    return History(nights=tuple(r for r in records if isinstance(r, NightRecord)),
                   patches=tuple(r for r in records if isinstance(r, PatchRecord)),
                   pulls=tuple(r for r in records if isinstance(r, PullRecord)))


def read_records(path: Path) -> list[Record]:
    """Every record in the file (none when there is no file); UsageError naming it when it is no history kpatch
    can read: not a regular file (a link, a device such as /dev/zero, a FIFO), larger than MAX_BYTES, not UTF-8,
    a line that is no record."""
    try:
        text = read_regular(path, MAX_BYTES).decode("utf-8")
    except FileNotFoundError:
        return []
    except (NotAFile, TooLarge) as err:
        raise UsageError(f"{err}: not a carry history kpatch reads") from None
    except UnicodeDecodeError as err:
        raise UsageError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot read: {err.strerror}") from None
    # lines end at "\n" only, as the writer ends them: `splitlines` would also break at a U+2028, U+2029 or U+0085
    # that JSON leaves inside a string (a patch's subject, a suite's message)
    return [from_line(line, f"{path}:{number}") for number, line in enumerate(text.split("\n"), 1)
            if line.strip()]


def compact(records: Sequence[Record]) -> list[Record]:
    """One record per patch per day and one night per day: the last of each, in file order."""
    seen: set[tuple[str, ...]] = set()
    kept: list[Record] = []
    for record in reversed(records):
        if record.key not in seen:
            seen.add(record.key)
            kept.append(record)
    return kept[::-1]


def append(path: Path, records: Iterable[Record]) -> int:
    """Add the records; when a record's day is already at the end of the file, that day is rewritten with one
    record per key (the last). Returns the number of records written.

    The cost grows with the records and their day, not with the file: only the file's last days are read (back to
    the first line of another day), checked as records (a line that is no record is refused naming file:line, and
    nothing is written) and, when one repeats a new key, rewritten; the lines before them are copied as they are.
    A day found further back (a replay of older commits appended after a later day) is compacted by `read`."""
    new = compact(list(records))
    path.parent.mkdir(parents=True, exist_ok=True)
    with _appending(path):
        tail, prefix = _ends(path, {r.date for r in new}, {r.key for r in new})
        keys = {t.key for t in tail}
        if any(r.key in keys for r in new):
            kept = compact([*tail, *new])
            write_atomic(path, prefix + "".join(to_line(r) + "\n" for r in kept).encode("utf-8"))
        else:
            _add(path, "".join(to_line(r) + "\n" for r in new).encode("utf-8"))
    return len(new)


@contextlib.contextmanager
def _appending(path: Path) -> Iterator[None]:
    """Hold the history's folder's `flock` while an append reads the file's end and writes: a rewrite (a new temp
    file renamed over the history) writes what it read, so another process's append made in between (a replay
    beside a nightly) would be lost. The folder, not the file, is locked: the rename replaces the file's inode,
    and a lock file of its own would be one more file beside a history that may be published. Readers take no
    lock (they see the file before or after a rename); the lock goes with the process if it is killed."""
    try:
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise UsageError(f"{path.parent}: cannot open the history's folder: {err.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _add(path: Path, data: bytes) -> None:
    """Append `data` to the file's end. A last line without its newline (a file an editor saved) gets one first,
    so that no record is glued to it; a write that fails part-way (a full disk) is cut off again, so that the file
    is as it was, never ending in half a record (which every later append would refuse)."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
        except OSError as err:
            os.ftruncate(fd, size)
            raise named(err, path) from None
    finally:
        os.close(fd)


def check(path: Path) -> None:
    """Refuse, naming it, a file that is no history kpatch appends to: not a regular file, too large, or its first
    or last line no record (a missing file is an empty history). Reads those two lines, not the file."""
    _ends(path, set(), set())


def _ends(path: Path, days: set[str], keys: set[tuple[str, ...]]) -> tuple[list[Record], bytes]:
    """The file's last records of `days` (`_tail`) and, when one has a key in `keys`, the bytes before them (to be
    written again as they are); a file that is not there has none."""
    with _opened(path) as opened:
        if opened is None:
            return [], b""
        handle, size = opened
        start, tail = _tail(handle, size, path, days)
        prefix = b""
        if any(t.key in keys for t in tail):
            handle.seek(0)
            prefix = handle.read(start)
        return tail, prefix


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[tuple[typing.BinaryIO, int] | None]:
    """The history file open for reading, with its size (None when it is not there); UsageError naming it when it
    is no regular file, larger than MAX_BYTES, or cannot be read."""
    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_BYTES:
                raise UsageError(f"{path} is larger than {MAX_BYTES >> 20} MiB: not a carry history kpatch reads")
            yield handle, size
    except FileNotFoundError:
        yield None
    except NotAFile as err:
        raise UsageError(f"{err}: not a carry history kpatch reads") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot read: {err.strerror}") from None

_BLOCK = 1 << 16


def _tail(handle: typing.BinaryIO, size: int, path: Path, days: set[str]) -> tuple[int, list[Record]]:
    """The records at the end of the open file whose day is one of `days`, in file order, and the offset of the
    first of them (`size` when none). The first line of another day is read and checked too, and the file's first
    line: a file whose ends are no history is never appended to."""
    found: list[Record] = []
    end = size
    for offset, record in _backwards(handle, size, path):
        if record.date not in days:
            if offset > 0:
                _first_line(handle, path)
            break
        found.append(record)
        end = offset
    return end, found[::-1]


def _backwards(handle: typing.BinaryIO, size: int, path: Path) -> Iterator[tuple[int, Record]]:
    """The open file's records from its last line to its first, each with the offset of its line, read a block at
    a time from the end (blank lines skipped, as `read` skips them); a line that is no record is a UsageError
    naming file:line. Each byte is read and copied once, however long its line."""
    pieces: list[bytes] = []  # the line being gathered, back to front: it started in a block not read yet
    end = size
    while end > 0:
        start = max(0, end - _BLOCK)
        handle.seek(start)
        parts = handle.read(end - start).split(b"\n")
        if len(parts) > 1:  # the gathered line starts in this block, after its last newline
            pieces.append(parts[-1])
            at = end - len(parts[-1])
            line = b"".join(reversed(pieces))
            if line.strip():
                yield at, _record_at(handle, path, at, line)
            for line in reversed(parts[1:-1]):
                at -= len(line) + 1
                if line.strip():
                    yield at, _record_at(handle, path, at, line)
            pieces = [parts[0]]
        else:
            pieces.append(parts[0])
        end = start
    line = b"".join(reversed(pieces))
    if line.strip():
        yield 0, _record_at(handle, path, 0, line)


def last_pull_states(path: Path, prs: Iterable[str]) -> dict[str, str]:
    """The last state the history records for each of `prs` (those it records), read from the file's end back only
    as far as the oldest of them needs: a night's question costs the nights since each PR was last asked about, not
    the whole history. UsageError when the file is no history kpatch reads."""
    wanted = set(prs)
    found: dict[str, str] = {}
    if not wanted:
        return found
    with _opened(path) as opened:
        for _offset, record in _backwards(*opened, path) if opened is not None else ():
            if isinstance(record, PullRecord) and record.pr in wanted and record.pr not in found:
                found[record.pr] = record.state
                if len(found) == len(wanted):
                    break
    return found


def _record_at(handle: typing.BinaryIO, path: Path, offset: int, line: bytes) -> Record:
    """The line starting at `offset` as a record; UsageError naming its line number (counted only then)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"{path}:{_line_number(handle, offset)}: not UTF-8 text (byte {err.start})") from None
    try:
        return from_line(text, "")
    except UsageError as err:
        raise UsageError(f"{path}:{_line_number(handle, offset)}{err}") from None


def _first_line(handle: typing.BinaryIO, path: Path) -> None:
    """Check the file's first line that is not blank (as `read` skips blank lines, so does the check)."""
    handle.seek(0)
    offset = 0
    while line := handle.readline():
        if line.strip():
            _record_at(handle, path, offset, line.rstrip(b"\n"))
            return
        offset += len(line)


def _line_number(handle: typing.BinaryIO, offset: int) -> int:
    handle.seek(0)
    return handle.read(offset).count(b"\n") + 1
