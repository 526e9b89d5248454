"""A journaled rebase of one release line, interrupted with its journal committed, then another line's base
written into kpatch.toml: going forward or back through the journal writes only the first line's bases."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from kpatch import config
from kpatch.project import journal

TOML = """[[upstream]]
name = "kernels"
url = "https://example.com/kernels.git"
branch = "main"
base = "{main}"

[line."0.9".kernels]
branch = "release/0.9"
base = "{line}"
"""
OLD, NEW, MAIN_NEW = "v0.9", "1" * 40, "2" * 40


def _interrupted(root: Path) -> tuple[Path, Path]:
    """The line's journal as a kill right after its commit point leaves it: journal.json written, nothing moved
    (kpatch.toml still old), its new and old copies staged."""
    toml = root / "kpatch.toml"
    toml.write_text(TOML.format(main="v1.0", line=OLD))
    folder = root / ".kpatch" / "lines" / "0.9" / "journal"
    (folder / "new").mkdir(parents=True)
    (folder / "old").mkdir()
    (folder / "operation").write_text("rebase")
    (folder / "new" / "0").write_bytes(config.with_new_bases(toml, {"kernels": NEW}, line="0.9"))
    (folder / "old" / "w0").write_bytes(toml.read_bytes())
    (folder / "journal.json").write_text(json.dumps({"operation": "rebase", "steps": [
        {"target": str(toml.resolve()), "new": "0", "old": "w0"}]}))
    toml.write_bytes(config.with_new_bases(toml, {"kernels": MAIN_NEW}))  # main's rebase, committed meanwhile
    return toml, folder


def _line_only(toml: Path) -> dict[Path, journal.Merge]:
    return {toml.resolve(): lambda now, copy: config.with_line_bases_of(now, copy, ("kernels",), line="0.9")}


def _bases(toml: Path) -> tuple[str, str]:
    data = tomllib.loads(toml.read_text())
    return data["upstream"][0]["base"], data["line"]["0.9"]["kernels"]["base"]


def test_going_forward_writes_the_lines_base_and_keeps_mains_written_since(tmp_path: Path) -> None:
    toml, folder = _interrupted(tmp_path)
    journal.forward(folder, _line_only(toml))
    assert _bases(toml) == (MAIN_NEW, NEW)


def test_going_back_restores_the_lines_base_and_keeps_mains_written_since(tmp_path: Path) -> None:
    toml, folder = _interrupted(tmp_path)
    journal.forward(folder, _line_only(toml))
    (folder / "new" / "0").unlink(missing_ok=True)
    assert journal.back(folder, _line_only(toml)) is None
    assert _bases(toml) == (MAIN_NEW, OLD)


def test_with_nothing_written_since_going_back_gives_the_old_file_byte_for_byte(tmp_path: Path) -> None:
    toml = tmp_path / "kpatch.toml"
    toml.write_text("# a comment\n" + TOML.format(main="v1.0", line=OLD))
    old = toml.read_bytes()
    new = config.with_new_bases(toml, {"kernels": NEW}, line="0.9")
    assert config.with_line_bases_of(new, old, ("kernels",), line="0.9") == old
