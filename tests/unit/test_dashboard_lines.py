"""The carry dashboard of a project with release lines: `kpatch report` holds every line that has a history (one
page, a section per line, links between them; --json names the lines), `--line` one line alone. The page is read
with a real HTML parser (html.parser): ids are unique, each section holds its own stack, charts and numbers."""

from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path

from click.testing import CliRunner

from kpatch.cli import main
from kpatch.dashboard import history
from tests.support.dashboard_data import HOSTILE, night, patch, three_nights
from tests.support.json_envelope import checked

SHA = "a" * 40
TOML = f'''version = 1
[[upstream]]
name = "kernels"
url = "https://example.invalid/kernels.git"
branch = "main"
base = "{SHA}"
patches = "patches/kernels"

[[upstream]]
name = "app"
url = "https://example.invalid/app.git"
branch = "main"
base = "{SHA}"
patches = "patches/app"

[line."0.9".kernels]
branch = "release/0.9"
base = "v0.9"

[line."0.9".app]
branch = "release/0.9"
base = "v0.9"

[line."0.8".kernels]
branch = "release/0.8"
base = "v0.8"

[line."0.8".app]
branch = "release/0.8"
base = "v0.8"
'''


def _kpatch(root: Path, *args: str) -> tuple[int, str]:
    old = Path.cwd()
    os.chdir(root)
    try:
        result = CliRunner().invoke(main, [*args, "--cache-dir", str(root / "cache")], catch_exceptions=False)
    finally:
        os.chdir(old)
    return result.exit_code, result.output


def _project(root: Path) -> Path:
    """main with three nights; line 0.9 with one night of its own (a backported patch, a hostile subject); line
    0.8 with no history at all."""
    (root / "kpatch.toml").write_text(TOML)
    three_nights(root / "reports" / "nightly" / "history.jsonl")
    history.append(root / "reports-0.9" / "nightly" / "history.jsonl", [
        night("2026-11-30", {"kernels": 2, "app": 1}),
        patch("2026-11-30", "kernels", "0001-Guard-the-layernorm-kernel.patch", lines=7, subject=HOSTILE)])
    return root


class _Page(HTMLParser):
    """The elements of a page: every id, each section's ids, the nav's links, the rows of each stack table."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: list[str] = []
        self.sections: dict[str, dict[str, object]] = {}  # data-line -> {"id", "ids", "rows"}
        self.links: list[tuple[str, str]] = []  # (href, data-line) of the nav's links
        self.scripts = 0
        self._section: str | None = None
        self._nav = False
        self._table: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        held = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if held.get("id"):
            self.ids.append(str(held["id"]))
            if self._section is not None:
                ids = self.sections[self._section]["ids"]
                assert isinstance(ids, list)
                ids.append(held["id"])
        if tag == "section":
            self._section = str(held["data-line"])
            self.sections[self._section] = {"id": held["id"], "ids": [], "rows": []}
        elif tag == "nav":
            self._nav = True
        elif tag == "a" and self._nav:
            self.links.append((str(held["href"]), str(held["data-line"])))
        elif tag == "table":
            self._table = held.get("class")
        elif tag == "tr" and self._table == "stack" and "data-patch" in held and self._section is not None:
            rows = self.sections[self._section]["rows"]
            assert isinstance(rows, list)
            rows.append(held["data-patch"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self._section = None
        elif tag == "nav":
            self._nav = False
        elif tag == "table":
            self._table = None


def _parse(path: Path) -> _Page:
    parsed = _Page()
    parsed.feed(path.read_text(encoding="utf-8"))
    parsed.close()
    return parsed


def test_report_html_on_a_project_with_lines_holds_every_line_with_a_history_on_one_page(tmp_path: Path) -> None:
    root = _project(tmp_path)
    code, output = _kpatch(root, "report", "--html", str(root / "site"))
    assert code == 0, output
    page = _parse(root / "site" / "index.html")
    assert page.links == [("#line-1", "main"), ("#line-2", "0.9")]  # 0.8 has no history: not on the page
    assert list(page.sections) == ["main", "0.9"]
    assert [s["id"] for s in page.sections.values()] == ["line-1", "line-2"]
    assert len(page.ids) == len(set(page.ids))  # every id once, whatever the lines
    assert page.sections["main"]["rows"] == ["0001-Route.patch", "0001-Add-the-op.patch", "0002-Tune.patch"]
    assert page.sections["0.9"]["rows"] == ["0001-Guard-the-layernorm-kernel.patch"]
    for section in page.sections.values():  # each line its own stack, filter, chart
        ids = section["ids"]
        assert isinstance(ids, list)
        suffix = str(section["id"]).removeprefix("line")
        assert {f"stack{suffix}", f"filter{suffix}", f"behind-chart{suffix}"} <= set(ids)
    assert page.scripts == 1
    text = (root / "site" / "index.html").read_text()
    assert "<script>document.title" not in text and "&lt;script&gt;document.title=&quot;owned&quot;" in text
    assert "3 night(s) in the history" in text and "1 night(s) in the history" in text


def test_report_json_on_a_project_with_lines_names_the_lines_it_holds(tmp_path: Path) -> None:
    root = _project(tmp_path)
    code, output = _kpatch(root, "report", "--json")
    assert code == 0, output
    result = checked(output, "report")["result"]
    assert (result["line"], result["lines"]) == ("main", ["main", "0.9"])
    assert result["board"]["history"] == str(root / "reports" / "nightly" / "history.jsonl")
    (other,) = result["others"]
    assert other["line"] == "0.9" and other["board"]["history"] == str(root / "reports-0.9" / "nightly" /
                                                                       "history.jsonl")
    assert [p["patch"] for p in other["board"]["patches"]] == ["0001-Guard-the-layernorm-kernel.patch"]


def test_report_line_keeps_the_page_to_that_line(tmp_path: Path) -> None:
    root = _project(tmp_path)
    code, output = _kpatch(root, "report", "--line", "0.9", "--html", str(root / "site"), "--json")
    assert code == 0, output
    result = checked(output, "report")["result"]
    assert (result["line"], result["lines"], result["others"]) == ("0.9", ["0.9"], [])
    page = _parse(root / "site" / "index.html")
    assert page.links == [] and page.sections == {}  # one line: the page as before lines, no selector
    assert "stack" in page.ids and "0001-Guard-the-layernorm-kernel.patch" in (root / "site" / "index.html").read_text()
    assert "0001-Add-the-op.patch" not in (root / "site" / "index.html").read_text()


def test_a_bare_report_on_a_project_with_lines_prints_each_lines_board(tmp_path: Path) -> None:
    root = _project(tmp_path)
    code, output = _kpatch(root, "report")
    assert code == 0, output
    lines = output.splitlines()
    assert lines.index("line main") < lines.index("line 0.9")
    assert output.count("carry history ") == 2 and "line 0.8" not in output
    assert lines[-1] == "the page: kpatch report --html DIR; the numbers: kpatch report --json"


def test_a_dashboard_history_names_mains_board_and_each_line_keeps_its_own(tmp_path: Path) -> None:
    """`[dashboard] history` is main's carry history: the line's board stays its own file, never main's twice."""
    root = _project(tmp_path)
    text = TOML.replace("version = 1\n", 'version = 1\n[dashboard]\nhistory = "carry.jsonl"\n')
    (root / "kpatch.toml").write_text(text)
    three_nights(root / "carry.jsonl")
    code, output = _kpatch(root, "report", "--json")
    assert code == 0, output
    result = checked(output, "report")["result"]
    assert result["lines"] == ["main", "0.9"] and result["board"]["history"] == str(root / "carry.jsonl")
    assert result["others"][0]["board"]["history"] == str(root / "reports-0.9" / "nightly" / "history.jsonl")


def test_a_project_whose_only_history_is_a_release_lines_reports_that_line(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "reports" / "nightly" / "history.jsonl").unlink()  # main never ran a night nor a rebase
    code, output = _kpatch(root, "report", "--json")
    assert code == 0, output
    result = checked(output, "report")["result"]
    assert (result["line"], result["lines"], result["others"]) == ("0.9", ["0.9"], [])
    assert result["board"]["history"] == str(root / "reports-0.9" / "nightly" / "history.jsonl")


def test_a_project_with_lines_and_no_history_at_all_names_mains_missing_history(tmp_path: Path) -> None:
    (tmp_path / "kpatch.toml").write_text(TOML)
    code, output = _kpatch(tmp_path, "report", "--html", str(tmp_path / "site"))
    assert code == 2 and output.startswith(f"error: no carry history at {tmp_path / 'reports' / 'nightly'}"), output
    assert not (tmp_path / "site").exists()
