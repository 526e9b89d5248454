"""The dashboard as one static HTML page: no server, nothing fetched (its Content-Security-Policy says so).

Every value from the history is escaped (patch subjects and culprits are other people's text); the script is
fixed text that reads the table, never interpolated.

A project with release lines gets one page holding every line's board, each in its own section, and a row of
links between them: without JavaScript every section shows and a link jumps to it; with it, one line shows at a
time (the link's #fragment chooses which, so a line's view can be bookmarked). One page, not one per line: the
page stays one self-contained file a CI job uploads as it is, and the lines sit side by side for comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from kpatch.dashboard.summary import Dashboard, PatchRow
from kpatch.dashboard.svg import line_chart, sparkline
from kpatch.files import write_atomic

INDEX = "index.html"
_NUM = ' class="num"'
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 1400px; color: #222; padding: 0 1em }
h1 { font-size: 1.5em; margin-bottom: .2em } h2 { font-size: 1.15em; margin-top: 1.6em }
.meta { color: #666 } table { border-collapse: collapse; width: 100% }
th, td { border-bottom: 1px solid #ddd; padding: .3em .5em; text-align: left; vertical-align: middle }
table.stack th { cursor: pointer; user-select: none; background: #f5f5f5; white-space: nowrap }
table.stack th[aria-sort=ascending]::after { content: " \\25B2" }
table.stack th[aria-sort=descending]::after { content: " \\25BC" }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums } code { font-size: .92em }
.k-clean, .s-passed { color: #1a7f37 } .k-three-way { color: #9a6700 }
.k-conflict, .s-failed { color: #cf222e; font-weight: 600 } .k-upstream { color: #8250df } .s-skipped { color: #666 }
.spark polyline { fill: none; stroke: #1f77b4; stroke-width: 1.5 }
.spark-conflicts polyline { stroke: #cf222e } .spark circle { fill: #1f77b4 } .spark-conflicts circle { fill: #cf222e }
.spark circle.unknown { fill: #fff; stroke: #999 } .chart .axis { stroke: #999 } .chart polyline { stroke-width: 2 }
.chart text { font-size: 11px; fill: #444; stroke: none }
table.stack td:nth-child(3) { min-width: 10em }
table.stack { font-size: 13px } input.filter { padding: .3em; width: 22em; margin-bottom: .5em }
#lines { margin: .8em 0; padding: .5em 0; position: sticky; top: 0; background: #fff; z-index: 1 }
#lines a { margin-right: .8em; padding: .2em .6em; border: 1px solid #ccc; border-radius: 4px; text-decoration: none }
#lines a[aria-current=true] { background: #1f77b4; color: #fff }
section.line { border-top: 2px solid #ddd; margin-top: 1em; scroll-margin-top: 3.5em }
"""

_SCRIPT = """
(function () {
  function stack(table) {
    var body = table.tBodies[0];
    var heads = table.tHead.rows[0].cells;
    function key(row, i) {
      var cell = row.cells[i];
      var raw = cell.getAttribute("data-sort");
      return raw === null ? cell.textContent.trim().toLowerCase() : raw;
    }
    function sortBy(i) {
      var th = heads[i];
      var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
      var numeric = th.getAttribute("data-type") === "num";
      for (var j = 0; j < heads.length; j++) { heads[j].removeAttribute("aria-sort"); }
      th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a, i), y = key(b, i);
        if (numeric) {
          var nx = x === "" ? -Infinity : Number(x), ny = y === "" ? -Infinity : Number(y);
          return nx === ny ? 0 : (nx < ny ? -dir : dir);
        }
        return x === y ? 0 : (x < y ? -dir : dir);
      });
      rows.forEach(function (row) { body.appendChild(row); });
    }
    Array.prototype.forEach.call(heads, function (th, i) {
      th.addEventListener("click", function () { sortBy(i); });
    });
    var filter = document.getElementById(table.getAttribute("data-filter"));
    filter.addEventListener("input", function () {
      var q = filter.value.trim().toLowerCase();
      Array.prototype.forEach.call(body.rows, function (row) {
        row.hidden = q !== "" && row.textContent.toLowerCase().indexOf(q) < 0;
      });
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.stack"), stack);
  var nav = document.getElementById("lines");
  if (!nav) { return; }
  var links = nav.getElementsByTagName("a");
  var sections = document.querySelectorAll("section.line");
  function show(id) {
    var known = Array.prototype.some.call(sections, function (s) { return s.id === id; });
    if (!known) { id = sections[0].id; }
    Array.prototype.forEach.call(sections, function (s) { s.hidden = s.id !== id; });
    Array.prototype.forEach.call(links, function (a) {
      a.setAttribute("aria-current", a.getAttribute("href") === "#" + id ? "true" : "false");
    });
  }
  window.addEventListener("hashchange", function () { show(window.location.hash.slice(1)); });
  show(window.location.hash.slice(1));
})();
"""

# (header, how it sorts: "text", "num", or "chart": by the number its sparkline ends on) of the stack table
COLUMNS = (("upstream", "text"), ("patch", "text"), ("subject", "text"), ("class", "text"), ("conflicts", "num"),
           ("changed", "num"), ("culprit", "text"), ("lines", "num"), ("files", "num"), ("age (days)", "num"),
           ("PR", "text"), ("tests", "text"), ("size", "chart"), ("conflict history", "chart"))


def e(value: object) -> str:
    """Any value as HTML text, escaped; None as a dash."""
    return "–" if value is None else escape(str(value), quote=True)


def write(folder: Path, boards: Sequence[tuple[str, Dashboard]], title: str) -> Path:
    """index.html in `folder`: the board of each (line, board), one page."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / INDEX
    text = render(boards[0][1], title) if len(boards) == 1 else render_lines(boards, title)
    write_atomic(path, text.encode("utf-8"))
    return path


def _head(title: str) -> list[str]:
    return ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<link rel="icon" href="data:,">', f"<title>{e(title)}</title>", f"<style>{_STYLE}</style></head><body>",
            f"<h1>{e(title)}</h1>"]


def render(board: Dashboard, title: str) -> str:
    """One line's page (a project without release lines, or `--line`)."""
    parts = [*_head(title), *_board(board, ""), f"<script>{_SCRIPT}</script>", "</body></html>"]
    return "\n".join(parts) + "\n"


def render_lines(boards: Sequence[tuple[str, Dashboard]], title: str) -> str:
    """Every line's board on one page: a section per line (ids `line-1`, ... : a line's name is kpatch.toml's
    text, shown escaped, never an id) and the links between them."""
    parts = [*_head(title), '<nav id="lines" aria-label="release lines">release line: '
             + " ".join(f'<a href="#line-{i}" data-line="{e(name)}">{e(name)}</a>'
                        for i, (name, _) in enumerate(boards, 1)) + "</nav>"]
    for i, (name, board) in enumerate(boards, 1):
        parts += [f'<section class="line" id="line-{i}" data-line="{e(name)}">', f"<h2>line {e(name)}</h2>",
                  *_board(board, f"-{i}"), "</section>"]
    parts += [f"<script>{_SCRIPT}</script>", "</body></html>"]
    return "\n".join(parts) + "\n"


def _board(board: Dashboard, suffix: str) -> list[str]:
    """One board: its numbers, last night, stack table, behind chart and PRs; `suffix` ends each element id."""
    parts = [f'<p class="meta">{board.nights} night(s) in the history'
             + (f", {e(board.first)} to {e(board.last)}" if board.first else "")
             + f"; {len(board.patches)} patch(es); drawn from <code>{e(board.history)}</code></p>"]
    parts += _last_night(board, suffix)
    parts += _stack(board, suffix)
    parts += ['<h2>Commits behind the branch head, per upstream</h2>',
              line_chart(board.behind, f"behind-chart{suffix}", "upstream commits between the pinned base and the "
                         "branch head, per night") if board.behind else "<p>No night recorded yet.</p>"]
    parts += _pulls(board, suffix)
    return parts


def _last_night(board: Dashboard, suffix: str) -> list[str]:
    night = board.last_night
    if night is None:
        return ["<h2>Last nightly</h2>", "<p>No night recorded yet: run <code>kpatch nightly</code>.</p>"]
    out = [f"<h2>Last nightly: {e(night.date)}, <span class=\"s-{e(night.outcome)}\">{e(night.outcome)}</span></h2>",
           f"<p>{e(night.summary)}</p>", f'<table id="stages{suffix}"><thead><tr><th>stage</th><th>status</th>'
           '<th class="num">seconds</th><th>summary</th></tr></thead><tbody>']
    out += [f'<tr><td>{e(s.stage)}</td><td class="s-{e(s.status)}">{e(s.status)}</td>'
            f'<td class="num">{s.seconds:.1f}</td><td>{e(s.summary)}</td></tr>' for s in night.stages]
    out.append("</tbody></table>")
    if night.suites:
        out.append(f'<table id="suites{suffix}"><thead><tr><th>suite</th><th>outcome</th>'
                   + "".join(f'<th class="num">{n}</th>' for n in ("passed", "failed", "errors", "skipped"))
                   + "<th>message</th></tr></thead><tbody>")
        out += [f'<tr><td>{e(s.upstream)}</td><td class="s-{e(s.outcome)}">{e(s.outcome)}</td>'
                f'<td class="num">{s.passed}</td><td class="num">{s.failed}</td><td class="num">{s.errors}</td>'
                f'<td class="num">{s.skipped}</td><td>{e(s.message)}</td></tr>' for s in night.suites]
        out.append("</tbody></table>")
    else:
        out.append("<p>No test suite ran that night.</p>")
    return out


def _stack(board: Dashboard, suffix: str) -> list[str]:
    out = ["<h2>The stack</h2>",
           f'<input id="filter{suffix}" class="filter" type="search" placeholder="filter rows (patch, class, '
           'culprit, ...)" aria-label="filter the stack table">',
           f'<table id="stack{suffix}" class="stack" data-filter="filter{suffix}"><thead><tr>'
           + "".join(f'<th data-type="{"text" if kind == "text" else "num"}"{_NUM if kind == "num" else ""}>'
                     f"{e(name)}</th>" for name, kind in COLUMNS)
           + "</tr></thead><tbody>"]
    out += [_row(row) for row in board.patches]
    out.append("</tbody></table>")
    return out


def _num(value: int | None) -> str:
    return f'<td class="num" data-sort="{"" if value is None else value}">{e(value)}</td>'


def _row(row: PatchRow) -> str:
    culprit = (f'<code title="{e(row.culprit)}">{e(row.culprit[:12])}</code> {e(row.culprit_subject)}'
               if row.culprit else "–")
    prs = ", ".join(f"{e(pr)} ({e(row.pr_state or 'state unknown')})" for pr in row.prs) or "–"
    label = f"{row.upstream}/{row.patch}"
    return (f'<tr data-upstream="{e(row.upstream)}" data-patch="{e(row.patch)}">'
            f"<td>{e(row.upstream)}</td><td><code>{e(row.patch)}</code></td><td>{e(row.subject)}</td>"
            f'<td class="k-{e(row.klass)}">{e(row.klass)}</td>{_num(row.conflicts)}{_num(row.churn)}'
            f"<td>{culprit}</td>"
            f"{_num(row.lines)}{_num(row.files)}{_num(row.age_days)}<td>{prs}</td><td>{e(row.tests)}</td>"
            f'<td data-sort="{"" if row.lines is None else row.lines}">'
            f'{sparkline(row.size, "size", f"{label}: lines per night")}</td>'
            f'<td data-sort="{row.conflicts}">'
            f'{sparkline(row.conflict, "conflicts", f"{label}: 1 on a night it conflicted")}</td></tr>')


def _pulls(board: Dashboard, suffix: str) -> list[str]:
    out = ["<h2>Upstream PRs</h2>"]
    if not board.pulls:
        return [*out, "<p>No patch names an Upstream-PR.</p>"]
    out.append(f'<table id="pulls{suffix}"><thead><tr><th>PR</th><th>state</th><th>patch</th><th>as of</th></tr>'
               "</thead><tbody>")
    out += [f"<tr><td>{e(p.pr)}</td><td>{e(p.state or 'not known')}</td><td>{e(p.upstream)}/<code>{e(p.patch)}"
            f"</code></td><td>{e(p.date)}</td></tr>" for p in board.pulls]
    out.append("</tbody></table>")
    return out
