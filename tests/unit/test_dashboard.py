"""The carry dashboard without a browser: the history file (version, compaction, bad lines), the page's markup
(escaping, points per chart), `kpatch report` (its JSON, its errors) and `[dashboard] history` in kpatch.toml."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kpatch.cli import main
from kpatch.dashboard import history, page
from kpatch.dashboard.summary import summarise
from kpatch.errors import UsageError
from tests.support.dashboard_data import HOSTILE, night, patch, three_nights
from tests.support.json_envelope import checked


def _kpatch(*args: str, cwd: Path | None = None) -> tuple[int, str]:
    old = Path.cwd()
    if cwd:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)
    return result.exit_code, result.output


def test_records_come_back_from_the_file_as_they_were_written(tmp_path: Path) -> None:
    written: list[history.Record] = [night("2026-11-28", {"kernels": 3}),
                                     patch("2026-11-28", "kernels", "0001-a.patch", subject=HOSTILE)]
    history.append(tmp_path / "h.jsonl", written)
    held = history.read(tmp_path / "h.jsonl")
    assert (list(held.nights), list(held.patches)) == ([written[0]], [written[1]])
    first = json.loads((tmp_path / "h.jsonl").read_text().splitlines()[0])
    assert (first["v"], first["kind"]) == (history.VERSION, "night")


def test_a_new_day_is_appended_and_the_same_day_again_is_compacted_to_one_record_per_patch(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    history.append(path, [night("2026-11-28", {"kernels": 3}), patch("2026-11-28", "kernels", "a.patch")])
    before = path.read_text()
    history.append(path, [night("2026-11-29", {"kernels": 5}), patch("2026-11-29", "kernels", "a.patch")])
    assert path.read_text().startswith(before) and len(path.read_text().splitlines()) == 4  # appended
    held = history.append(path, [night("2026-11-29", {"kernels": 6}),
                                 patch("2026-11-29", "kernels", "a.patch", lines=99)])
    assert held == 2 and len(path.read_text().splitlines()) == 4  # the same day twice: the later run kept
    records = history.read(path)
    assert [(r.date, r.lines) for r in records.patches] == [("2026-11-28", 10), ("2026-11-29", 99)]
    assert [n.behind[0].commits for n in records.nights] == [3, 6]


@pytest.mark.parametrize(("line", "message"), [
    ('{"v": 3, "kind": "night"}', "h.jsonl:2: history version 3 is newer than this kpatch reads (upgrade kpatch)"),
    ("{not json", "h.jsonl:2: not JSON"),
    ('{"v": 1, "kind": "moon"}', "h.jsonl:2: 'kind' must be one of patch, night"),
    ('{"v": 1, "kind": "patch", "date": "2026-11-28"}', "h.jsonl:2: not a PatchRecord: missing started"),
    ('{"v": 1, "kind": "night", "date": 5, "started": "x", "outcome": "passed", "summary": "", "behind": [],'
     ' "stages": [], "suites": []}', "h.jsonl:2: not a NightRecord: expected str, got 5"),
])
def test_a_bad_line_is_refused_naming_the_file_and_line_and_nothing_is_appended(tmp_path: Path, line: str,
                                                                                 message: str) -> None:
    path = tmp_path / "h.jsonl"
    history.append(path, [night("2026-11-28", {"kernels": 3})])
    path.write_text(path.read_text() + line + "\n")
    before = path.read_bytes()
    with pytest.raises(UsageError) as err:
        history.append(path, [night("2026-11-29", {"kernels": 3})])
    assert str(err.value).startswith(f"{path.parent}/{message}"), str(err.value)
    assert path.read_bytes() == before


def test_the_page_escapes_a_hostile_subject_and_runs_only_its_own_script(tmp_path: Path) -> None:
    board = summarise(history.read(three_nights(tmp_path / "h.jsonl")), "h.jsonl")
    html = page.render(board, "dashboard <b>")
    assert html.count("<script") == 1 and "<img" not in html and "<b>" not in html
    assert "&lt;script&gt;document.title=&quot;owned&quot;&lt;/script&gt;" in html
    assert "Rework &lt;it&gt;" in html and "dashboard &lt;b&gt;" in html
    assert "http://" not in html and "https://" not in html  # nothing to fetch


def test_every_chart_has_one_point_per_record_the_history_holds(tmp_path: Path) -> None:
    held = history.read(three_nights(tmp_path / "h.jsonl"))
    html = page.render(summarise(held, "h"), "t")
    chart = re.search(r'<svg id="behind-chart".*?</svg>', html, re.S)
    assert chart is not None
    assert len(re.findall(r'<circle class="pt"', chart.group(0))) == sum(len(n.behind) for n in held.nights) == 6
    for name in ("0001-Add-the-op.patch", "0002-Tune.patch", "0001-Route.patch"):
        row = re.search(rf'<tr data-upstream="[^"]*" data-patch="{re.escape(name)}">.*?</tr>', html, re.S)
        assert row is not None
        for kind in ("size", "conflicts"):
            spark = re.search(rf'<svg class="spark spark-{kind}".*?</svg>', row.group(0), re.S)
            assert spark is not None and spark.group(0).count("<circle") == 3
    assert 'data-date="2026-11-29" data-value="1"' in html  # the conflict night of 0001-Add-the-op


def test_report_json_gives_the_numbers_the_page_draws(tmp_path: Path) -> None:
    source = three_nights(tmp_path / "h.jsonl")
    code, output = _kpatch("report", "--history", str(source), "--html", str(tmp_path / "site"), "--json")
    assert code == 0, output
    result = checked(output, "report")["result"]
    data = result["board"]
    assert data["nights"] == 3 and data["last"] == "2026-11-30" and result["page"] == str(tmp_path / "site/index.html")
    assert {s["name"]: [p["value"] for p in s["points"]] for s in data["behind"]} == \
        {"kernels": [3, 7, 11], "app": [10, 9, 8]}
    (op,) = [p for p in data["patches"] if p["patch"] == "0001-Add-the-op.patch"]
    assert (op["conflicts"], op["lines"], op["culprit"], op["class"]) == (1, 20, "c" * 40, "clean")
    assert [p["value"] for p in op["size"]] == [10, 15, 20]
    assert data["prs"] == [{"pr": "acme/kernels#5", "upstream": "kernels", "patch": "0001-Add-the-op.patch",
                              "state": "not merged", "date": "2026-11-30"}]
    assert (tmp_path / "site" / "index.html").read_text().count('class="pt"') == 6 + 3 * 3 * 2


def test_a_bare_report_prints_the_dashboards_summary_on_the_terminal(tmp_path: Path) -> None:
    three_nights(tmp_path / "h.jsonl")
    code, output = _kpatch("report", "--history", str(tmp_path / "h.jsonl"))
    assert code == 0, output
    lines = output.splitlines()
    assert lines[0] == f"carry history {tmp_path / 'h.jsonl'}: 3 nights, 3 patches, 2026-11-28 to 2026-11-30"
    row = next(line.split() for line in lines if "0001-Add-the-op.patch" in line)
    assert row[:5] == ["kernels", "0001-Add-the-op.patch", "clean", "1/3", "20"]
    assert "acme/kernels#5 (not merged)" in output
    assert lines[-1] == "the page: kpatch report --html DIR; the numbers: kpatch report --json"
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize(("args", "message"), [
    (("--html", "{tmp}/site"),
     "error: no carry history at {tmp}/none.jsonl (each 'kpatch nightly' and 'kpatch rebase' appends to it"),
    (("--history", "{tmp}/h.jsonl", "--html", "{tmp}/h.jsonl"), "error: --html {tmp}/h.jsonl: a file is there"),
])
def test_report_refuses_bad_input_in_one_line_naming_it(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    three_nights(tmp_path / "h.jsonl")
    argv = [a.format(tmp=tmp_path) for a in args]
    if "--history" not in argv:
        argv += ["--history", str(tmp_path / "none.jsonl")]
    code, output = _kpatch("report", *argv)
    assert code == 2 and output.startswith(message.format(tmp=tmp_path)), output
    assert not (tmp_path / "site").exists()


UPSTREAM = f'[[upstream]]\nname = "k"\nurl = "https://example.invalid/k.git"\nbranch = "main"\nbase = "{"a" * 40}"\n' \
    'patches = "patches/k"\n'


def test_report_finds_the_history_kpatch_toml_names(tmp_path: Path) -> None:
    (tmp_path / "kpatch.toml").write_text(f'version = 1\n[dashboard]\nhistory = "carry/h.jsonl"\n\n{UPSTREAM}')
    three_nights(tmp_path / "carry" / "h.jsonl")
    code, output = _kpatch("report", "--json", "--cache-dir", str(tmp_path / "cache"), cwd=tmp_path)
    assert code == 0, output
    assert checked(output, "report")["result"]["board"]["history"] == str(tmp_path / "carry" / "h.jsonl")


def test_an_unknown_dashboard_key_is_refused_naming_its_line(tmp_path: Path) -> None:
    (tmp_path / "kpatch.toml").write_text(f'version = 1\n[dashboard]\nhistroy = "h.jsonl"\n\n{UPSTREAM}')
    code, output = _kpatch("report", "--json", "--cache-dir", str(tmp_path / "cache"), cwd=tmp_path)
    assert code == 2 and f"{tmp_path / 'kpatch.toml'}:3: unknown key 'histroy' in [dashboard]" in output, output


def test_a_secret_in_a_failure_message_never_lands_in_the_history(tmp_path: Path) -> None:
    from dataclasses import replace

    from kpatch.output.redact import MASK, add_secret

    secret = "ghs_dashboardSECRETdashboard0123456789"
    add_secret(secret)
    record = replace(night("2026-11-28", {"kernels": 1}), summary=f"push to https://x:{secret}@github.com failed")
    history.append(tmp_path / "h.jsonl", [record])
    text = (tmp_path / "h.jsonl").read_text()
    assert secret not in text and MASK in text


def test_the_issue_body_escapes_upstream_text_and_stays_within_the_limit(tmp_path: Path) -> None:
    from kpatch.dashboard.markdown import issue_body

    path = three_nights(tmp_path / "h.jsonl")
    history.append(path, [patch("2026-11-30", "app", f"{n:04}-More.patch", subject="@someone fixes #12")
                          for n in range(2, 200)])
    board = summarise(history.read(path), "h")
    whole = issue_body(board, limit=10**6)
    assert "<script" not in whole and "&lt;script&gt;" in whole and "@someone" not in whole and "#12" not in whole
    assert "| kernels | `0001-Add-the-op.patch` | Add the op | clean | 1 of 3 |" in whole
    cut = issue_body(board, limit=8000)
    assert len(cut) <= 8000 and "more patch(es): see the page" in cut and "## Upstream PRs" in cut


def test_the_pulls_table_shows_each_prs_last_asked_state_over_the_patchs_merged_or_not(tmp_path: Path) -> None:
    path = three_nights(tmp_path / "h.jsonl")
    assert [p.state for p in summarise(history.read(path), "h").pulls] == ["not merged"]
    history.append(path, [history.PullRecord("2026-11-29", "2026-11-29T02:00:00Z", "acme/kernels#5", "kernels",
                                             "0001-Add-the-op.patch", "draft, checks red"),
                          history.PullRecord("2026-11-30", "2026-11-30T02:00:00Z", "acme/kernels#5", "kernels",
                                             "0001-Add-the-op.patch", "open, approved, checks green")])
    (row,) = summarise(history.read(path), "h").pulls
    assert (row.pr, row.state) == ("acme/kernels#5", "open, approved, checks green")


def test_churn_counts_the_nights_a_rebase_changed_a_patch_beside_its_conflicts(tmp_path: Path) -> None:
    from dataclasses import replace

    from kpatch.dashboard.markdown import issue_body

    path = tmp_path / "h.jsonl"
    for day, change in (("2026-12-01", "changed"), ("2026-12-02", "unchanged"), ("2026-12-03", "changed")):
        history.append(path, [night(day, {"kernels": 3}), replace(patch(day, "kernels", "0001-Add-the-op.patch"),
                                                                  change=change)])
    older = json.loads(path.read_text().splitlines()[-1])
    del older["change"]  # a line an older kpatch wrote has no such field: read as not known
    history.append(path, [night("2026-12-04", {"kernels": 3}),
                          history.from_line(json.dumps({**older, "date": "2026-12-04",
                                                        "started": "2026-12-04T02:00:00Z"}), "old")])
    board = summarise(history.read(path), "h")
    row = next(r for r in board.patches if r.patch == "0001-Add-the-op.patch")
    assert (row.churn, row.conflicts, row.nights) == (2, 0, 4)
    assert "| kernels | `0001-Add-the-op.patch` | Add the op | clean | 0 of 4 | 2 |" in issue_body(board)
    assert '<td class="num" data-sort="0">0</td><td class="num" data-sort="2">2</td>' in page.render(board, "t")


def test_history_lines_name_a_patchs_class_class_and_version_1_lines_with_klass_still_read(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    history.append(path, [patch("2026-11-28", "kernels", "a.patch", klass="three-way")])
    (line,) = [json.loads(text) for text in path.read_text().splitlines()]
    assert line["v"] == history.VERSION == 2 and line["class"] == "three-way" and "klass" not in line
    old = {**line, "v": 1, "date": "2026-11-27", "started": "2026-11-27T02:00:00Z"}
    old["klass"] = old.pop("class")
    path.write_text(json.dumps(old) + "\n" + path.read_text())
    assert [(r.date, r.klass) for r in history.read(path).patches] == [("2026-11-27", "three-way"),
                                                                        ("2026-11-28", "three-way")]
