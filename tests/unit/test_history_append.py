"""Appending to the carry history reads only the file's last days: what `read` gives back is still one record per
key, the last appended, whatever the order of days; the lines before the rewritten day are kept byte for byte; a
file whose ends are no history is refused naming file:line and left as it was."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import subprocess
import sys
import threading
import types
import typing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpatch.dashboard import history
from kpatch.errors import UsageError
from kpatch.files import write_atomic
from tests.support.dashboard_data import night, patch

DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")


def _record(day: str, which: int, lines: int) -> history.Record:
    return night(day, {"kernels": lines}) if which == 0 else patch(day, "kernels", f"{which:04}.patch", lines=lines)


@settings(max_examples=150, deadline=None)
@given(runs=st.lists(st.lists(st.tuples(st.sampled_from(DAYS), st.integers(0, 3), st.integers(1, 99)),
                              min_size=1, max_size=6), min_size=1, max_size=8),
       block=st.sampled_from([16, 64, 1 << 16]))
def test_read_gives_the_last_record_of_every_key_whatever_the_order_of_days_and_the_block_size(
        tmp_path_factory: pytest.TempPathFactory, runs: list[list[tuple[str, int, int]]], block: int) -> None:
    path = tmp_path_factory.mktemp("h") / "h.jsonl"
    every: list[history.Record] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(history, "_BLOCK", block)  # the backwards read crosses block boundaries mid-line
        for run in runs:
            records = [_record(*r) for r in run]
            written = history.append(path, records)
            every += records
            assert written == len(history.compact(records))
    held = history.read(path)
    expected = history.compact(every)
    assert sorted(map(repr, [*held.nights, *held.patches])) == sorted(map(repr, expected))


def test_a_day_already_at_the_end_is_rewritten_and_the_lines_before_it_are_kept_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    history.append(path, [night(DAYS[0], {"kernels": 3}), patch(DAYS[0], "kernels", "a.patch")])
    # an older kpatch's line: version 1, `klass`, keys in another order: read, never rewritten by a later append
    fields = json.loads(history.to_line(patch("2026-11-27", "kernels", "a.patch")))
    fields.update(v=1, klass=fields.pop("class"))
    older = json.dumps(dict(reversed(fields.items()))) + "\n"
    path.write_text(older + path.read_text())
    before = path.read_bytes()
    history.append(path, [patch(DAYS[1], "kernels", "a.patch", lines=5)])
    assert path.read_bytes().startswith(before)  # a new day: appended
    history.append(path, [patch(DAYS[1], "kernels", "a.patch", lines=7)])
    text = path.read_bytes()
    assert text.startswith(before) and len(text.splitlines()) == 4  # the day rewritten, one record for the patch
    assert [(r.date, r.lines) for r in history.read(path).patches] == [
        ("2026-11-27", 10), (DAYS[0], 10), (DAYS[1], 7)]


@pytest.mark.parametrize(("first", "last", "message"), [
    ("{not json", None, "h.jsonl:1: not JSON"),
    (None, '{"v": 1, "kind": "moon"}', "h.jsonl:3: 'kind' must be one of"),
    (None, "\xff\xfe", "h.jsonl:3: not UTF-8 text"),
])
def test_a_file_whose_first_or_last_line_is_no_record_is_refused_naming_the_line_and_kept(
        tmp_path: Path, first: str | None, last: str | None, message: str) -> None:
    path = tmp_path / "h.jsonl"
    history.append(path, [night(DAYS[0], {"kernels": 3}), patch(DAYS[0], "kernels", "a.patch")])
    data = path.read_bytes()
    if first is not None:
        data = first.encode() + b"\n" + data
    if last is not None:
        data += last.encode("latin-1") + b"\n"
    path.write_bytes(data)
    with pytest.raises(UsageError) as err:
        history.append(path, [night(DAYS[1], {"kernels": 3})])
    assert str(err.value).startswith(f"{tmp_path}/{message}"), str(err.value)
    assert path.read_bytes() == data


def test_a_history_that_is_no_regular_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real.jsonl").write_text("")
    (tmp_path / "h.jsonl").symlink_to(tmp_path / "real.jsonl")
    with pytest.raises(UsageError, match="not a carry history kpatch reads"):
        history.append(tmp_path / "h.jsonl", [night(DAYS[0], {"kernels": 3})])
    assert (tmp_path / "real.jsonl").read_text() == ""


@settings(max_examples=100, deadline=None)
@given(runs=st.lists(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 99)), min_size=1, max_size=6),
                     min_size=1, max_size=8),
       steps=st.lists(st.booleans(), min_size=8, max_size=8), block=st.sampled_from([16, 64, 1 << 16]))
def test_days_appended_in_order_leave_one_line_per_key_the_file_grows_by_a_day_never_by_a_run(
        tmp_path_factory: pytest.TempPathFactory, runs: list[list[tuple[int, int]]], steps: list[bool],
        block: int) -> None:
    path = tmp_path_factory.mktemp("h") / "h.jsonl"
    every: list[history.Record] = []
    day = 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(history, "_BLOCK", block)
        for run, step in zip(runs, steps, strict=False):
            day = min(day + step, len(DAYS) - 1)  # the same day again, or the next
            records = [_record(DAYS[day], which, lines) for which, lines in run]
            history.append(path, records)
            every += records
    assert len(path.read_text().splitlines()) == len(history.compact(every))
    assert history.read_records(path) == history.compact(every)


def _pull(day: str, pr: str, state: str) -> history.PullRecord:
    return history.PullRecord(date=day, started=f"{day}T02:00:00Z", pr=pr, upstream="kernels", patch="a.patch",
                              state=state)


@pytest.mark.parametrize("block", [16, 1 << 16])
def test_the_last_state_of_each_pr_asked_is_read_from_the_end_back_to_the_oldest_it_needs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    monkeypatch.setattr(history, "_BLOCK", block)
    path = tmp_path / "h.jsonl"
    history.append(path, [night(DAYS[0], {"kernels": 3}), _pull(DAYS[0], "o/k#1", "open"),
                          _pull(DAYS[0], "o/k#2", "open, approved")])
    history.append(path, [night(DAYS[1], {"kernels": 3}), _pull(DAYS[1], "o/k#1", "merged")])
    history.append(path, [night(DAYS[2], {"kernels": 3})])
    assert history.last_pull_states(path, ["o/k#1", "o/k#2", "o/k#9"]) == {"o/k#1": "merged",
                                                                            "o/k#2": "open, approved"}
    assert history.last_pull_states(path, []) == {}
    assert history.last_pull_states(tmp_path / "none.jsonl", ["o/k#1"]) == {}
    # a PR found in the last day is never looked for further back: a bad older line is not reached
    text = path.read_text().splitlines(keepends=True)
    path.write_text("".join(["{not json\n", *text[1:]]))
    assert history.last_pull_states(path, ["o/k#1"]) == {"o/k#1": "merged"}
    with pytest.raises(UsageError, match=r"h.jsonl:1: not JSON"):
        history.last_pull_states(path, ["o/k#9"])  # never recorded: read back to the first line


def test_check_reads_the_first_and_last_lines_and_refuses_a_file_that_is_no_history(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    history.check(path)  # none yet: an empty history
    history.append(path, [night(DAYS[0], {"kernels": 3}), patch(DAYS[0], "kernels", "a.patch")])
    history.check(path)
    path.write_text(path.read_text() + "not a record\n")
    with pytest.raises(UsageError, match=r"h.jsonl:3: not JSON"):
        history.check(path)
    with pytest.raises(UsageError, match="not a carry history kpatch reads"):
        history.check(tmp_path)


@pytest.mark.parametrize("blank", [b" \n", b"\r\n", b"\t \r\n"])
def test_blank_lines_that_fill_a_block_at_the_end_do_not_end_the_read_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blank: bytes) -> None:
    monkeypatch.setattr(history, "_BLOCK", 16)  # a block of only blank lines (a CRLF file's are "\r")
    path = tmp_path / "h.jsonl"
    history.append(path, [night(DAYS[0], {"kernels": 3}), _pull(DAYS[0], "o/k#1", "open")])
    data = b"{not json\n" + path.read_bytes() + blank * 40
    path.write_bytes(data)
    assert history.last_pull_states(path, ["o/k#1"]) == {"o/k#1": "open"}
    with pytest.raises(UsageError, match=r"h.jsonl:1: not JSON"):
        history.check(path)
    with pytest.raises(UsageError, match=r"h.jsonl:1: not JSON"):
        history.append(path, [night(DAYS[1], {"kernels": 3})])
    assert path.read_bytes() == data


def test_a_first_line_that_is_blank_does_not_hide_a_second_that_is_no_record(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    history.append(path, [night(DAYS[0], {"kernels": 3})])
    data = b"\n# not a carry history\n" + path.read_bytes()
    path.write_bytes(data)
    with pytest.raises(UsageError, match=r"h.jsonl:2: not JSON"):
        history.append(path, [night(DAYS[1], {"kernels": 3})])
    assert path.read_bytes() == data


def test_a_last_record_without_its_newline_is_not_glued_to_the_next_one_appended(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"  # an editor that saves without the final newline
    history.append(path, [night(DAYS[0], {"kernels": 3})])
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    history.append(path, [night(DAYS[1], {"kernels": 4})])
    assert [n.date for n in history.read(path).nights] == [DAYS[0], DAYS[1]]


def test_a_field_holding_a_unicode_line_break_is_read_back_as_appended(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"  # JSON leaves U+2028, U+2029 and U+0085 unescaped; str.splitlines breaks at them
    record = dataclasses.replace(patch(DAYS[0], "kernels", "a.patch"), subject="one\u2028two\u2029three\x85four")
    history.append(path, [record])
    history.append(path, [night(DAYS[1], {"kernels": 3})])
    assert history.read(path).patches == (record,)


class _Counted(bytes):
    """A block as read: counts the bytes copied when it is joined to another with `+`."""

    copied = 0

    def __add__(self, other: bytes) -> bytes:  # type: ignore[override]
        _Counted.copied += len(self) + len(other)
        return bytes(self) + other


def test_a_line_longer_than_many_blocks_is_not_copied_again_at_every_block(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history, "_BLOCK", 64)
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"x" * 64 * 1000)  # no newline: one line of 1,000 blocks (a 64 MiB one took 37 s to refuse)
    _Counted.copied = 0
    with path.open("rb") as raw:
        handle = typing.cast(typing.BinaryIO, types.SimpleNamespace(
            seek=raw.seek, read=lambda n=-1: _Counted(raw.read(n)), fileno=raw.fileno))
        with pytest.raises(UsageError, match=r"h.jsonl:1: not JSON"):
            list(history._backwards(handle, path.stat().st_size, path))
    assert _Counted.copied <= 2 * path.stat().st_size


def test_a_full_disk_leaves_the_history_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    history.append(path, [night(DAYS[0], {"kernels": 3})])
    before = path.read_bytes()
    script = (  # a file size limit fails the write part-way through, as a full disk does
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from kpatch.dashboard import history\n"
        "from tests.support.dashboard_data import night, patch\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) + 100}, resource.RLIM_INFINITY))\n"
        "day = sys.argv[1]\n"
        "try:\n"
        f"    history.append(Path({str(path)!r}), [night(day, {{'kernels': 4}}),\n"
        "                   *(patch(day, 'kernels', f'{n}.patch') for n in range(3))])\n"
        "except OSError as err:\n"
        "    print(err)\n")
    for day in (DAYS[1], DAYS[0]):  # a new day (appended) and the same day again (rewritten)
        done = subprocess.run([sys.executable, "-c", script, day], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).resolve().parents[2])
        assert "File too large" in done.stdout, done.stdout + done.stderr
        assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".h.jsonl")] == []  # no temp file left


def test_an_append_made_between_anothers_read_and_its_rewrite_waits_for_it_and_is_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A same-day rewrite writes what it read; another append (a replay beside a nightly) that came in between
    would be lost. The other append runs in a thread here: `flock` locks between two opens of the folder even in
    one process. The rewrite goes on once the other is either done (no lock: its day is then lost) or waiting at
    the lock (it then appends after the rewrite), so nothing here waits on time."""
    path = tmp_path / "h.jsonl"
    history.append(path, [night(DAYS[0], {"kernels": 3})])
    real_write, real_flock = write_atomic, fcntl.flock
    other_waits = threading.Event()
    other: list[threading.Thread] = []

    def flock(fd: int, operation: int) -> None:
        if threading.current_thread() in other:
            other_waits.set()
        real_flock(fd, operation)

    def another_append_comes_first(target: Path, data: bytes) -> None:
        thread = threading.Thread(target=history.append, args=(path, [night(DAYS[1], {"kernels": 5})]))
        other.append(thread)
        thread.start()
        while thread.is_alive() and not other_waits.wait(0.01):
            pass
        real_write(target, data)

    monkeypatch.setattr(fcntl, "flock", flock)
    monkeypatch.setattr(history, "write_atomic", another_append_comes_first)
    history.append(path, [night(DAYS[0], {"kernels": 4})])  # the same day again: a rewrite
    other[0].join()
    assert other_waits.is_set()
    assert [(n.date, n.behind[0].commits) for n in history.read(path).nights] == [(DAYS[0], 4), (DAYS[1], 5)]


def test_a_record_line_is_the_json_of_dataclasses_asdict_byte_for_byte() -> None:
    """to_line walks each record once (no asdict copy first) and writes what asdict's form wrote, nested records
    (a night's behind and stages) and tuples included."""
    from kpatch.output.redact import redact_text

    def by_asdict(record: history.Record) -> str:
        kind = "patch" if isinstance(record, history.PatchRecord) else \
            "pull" if isinstance(record, history.PullRecord) else "night"
        data = {f.metadata.get("json", f.name): value for f, value in
                zip(dataclasses.fields(record), dataclasses.asdict(record).values(), strict=True)}
        return redact_text(json.dumps({"v": history.VERSION, "kind": kind, **data}, ensure_ascii=False,
                                      separators=(",", ":")))

    records: list[history.Record] = [night(DAYS[0], {"kernels": 3, "app": 1}),
                                     patch(DAYS[1], "kernels", "0001-ü.patch", lines=7, prs=("o/r#1",)),
                                     _pull(DAYS[2], "o/r#12", "merged")]
    assert [history.to_line(r) for r in records] == [by_asdict(r) for r in records]
    assert '"behind":[{' in history.to_line(records[0])  # the nested records were reached
