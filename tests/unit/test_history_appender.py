"""A history appended to step after step by one process (a replay) reads the file once, and leaves it exactly as
`history.append` at every step would: appends, and the compacting rewrite when a day comes again."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpatch.dashboard import history
from tests.support.dashboard_data import night, patch

STEPS: list[list[history.Record]] = [
    [night("2026-11-28", {"kernels": 3}), patch("2026-11-28", "kernels", "0001-Add-the-op.patch")],
    [night("2026-11-29", {"kernels": 5}), patch("2026-11-29", "kernels", "0001-Add-the-op.patch", lines=12)],
    # the same day again (a replay's second step on one day): the file is rewritten with the last of each
    [night("2026-11-29", {"kernels": 6}, "failed"), patch("2026-11-29", "kernels", "0001-Add-the-op.patch",
                                                            klass="conflict")],
    [night("2026-11-30", {"kernels": 7}), patch("2026-11-30", "kernels", "0002-Tune.patch")],
]


def test_an_appender_leaves_the_file_as_append_does_at_every_step(tmp_path: Path) -> None:
    by_append, by_appender = tmp_path / "append.jsonl", tmp_path / "appender.jsonl"
    history.append(by_append, [night("2026-11-27", {"kernels": 1})])
    history.append(by_appender, [night("2026-11-27", {"kernels": 1})])
    kept = history.Appender(by_appender)
    for step in STEPS:
        assert kept.add(step) == history.append(by_append, step)
        assert by_appender.read_bytes() == by_append.read_bytes()
    assert len(history.read(by_appender).nights) == 4  # 27, 28, 29 (the failed one, last), 30


def test_an_appender_reads_the_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "history.jsonl"
    history.append(path, [night("2026-11-27", {"kernels": 1})])
    reads: list[Path] = []
    real = history.read_records

    def counted(where: Path) -> list[history.Record]:
        reads.append(where)
        return real(where)

    monkeypatch.setattr(history, "read_records", counted)
    kept = history.Appender(path)
    for step in STEPS:
        kept.add(step)
    assert reads == [path]
