"""The dashboard as one GitHub issue body ("carry dashboard"): the same numbers as the page, within GitHub's limit.

Upstream text (subjects, culprits) is escaped as the nightly's report escapes it: no mention, no reference, no HTML.
"""

from __future__ import annotations

from kpatch.dashboard.cells import GITHUB_LIMIT, _code, _table, _text
from kpatch.dashboard.summary import Dashboard, PatchRow

TITLE = "carry dashboard"
LABEL = "carry-dashboard"
ABOUT = "kpatch's carry dashboard: one issue, edited in place by every nightly"
SPARK = "▁▂▃▄▅▆▇█"
RECENT = 14  # nights shown per sparkline


def issue_body(board: Dashboard, limit: int = GITHUB_LIMIT) -> str:
    """The body; patch rows are left off (and the cut said) when the whole would pass `limit` characters."""
    head = [f"# kpatch {TITLE}", "",
            f"{board.nights} night(s) in the history" + (f", {board.first} to {board.last}" if board.first else "")
            + f"; {len(board.patches)} patch(es). Edited in place by every nightly; the page is "
            "`kpatch report --html DIR`."]
    night = board.last_night
    if night is not None:
        head += ["", f"## Last nightly: {night.date}, {night.outcome}", "", _text(night.summary), "",
                 *_table(["stage", "status", "seconds"],
                         [[s.stage, s.status, f"{s.seconds:.1f}"] for s in night.stages])]
        if night.suites:
            head += ["", *_table(["suite", "outcome", "passed", "failed", "errors", "skipped"],
                                 [[_text(s.upstream), s.outcome, str(s.passed), str(s.failed), str(s.errors),
                                   str(s.skipped)] for s in night.suites])]
    head += ["", "## Commits behind the branch head", "",
             *_table(["upstream", "now", f"last {RECENT} nights"],
                     [[_text(s.name), str(s.points[-1].value), _spark([p.value for p in s.points])]
                      for s in board.behind])]
    tail = ["", "## Upstream PRs", "",
            *(_table(["PR", "state", "patch"], [[_text(p.pr, references=True), p.state or "not known",
                                                 _code(f"{p.upstream}/{p.patch}")] for p in board.pulls])
              if board.pulls else ["No patch names an Upstream-PR."])]
    rows = [_row(r) for r in board.patches]
    table_head = ["", "## The stack", "", *_table(
        ["upstream", "patch", "subject", "class", "conflicts", "changed", "culprit", "lines", "age (days)", "tests",
         f"size, last {RECENT}"], [])]
    while True:
        cut = len(board.patches) - len(rows)
        note = ["", f"… {cut} more patch(es): see the page"] if cut else []
        text = "\n".join([*head, *table_head, *rows, *note, *tail]) + "\n"
        if len(text) <= limit or not rows:
            return text if len(text) <= limit else text[:limit]
        rows.pop()


def _row(row: PatchRow) -> str:
    culprit = f"{_code(row.culprit[:12])} {_text(row.culprit_subject or '')}" if row.culprit else "–"
    cells = [_text(row.upstream), _code(row.patch), _text(row.subject), row.klass,
             f"{row.conflicts} of {row.nights}", str(row.churn), culprit, _num(row.lines), _num(row.age_days),
             row.tests or "–", _spark([p.value for p in row.size])]
    return "| " + " | ".join(cells) + " |"


def _num(value: int | None) -> str:
    return "–" if value is None else str(value)


def _spark(values: list[int | None]) -> str:
    """The last RECENT values as block characters (a blank for an unknown one)."""
    recent = values[-RECENT:]
    top = max((v for v in recent if v is not None), default=0) or 1
    return "".join(" " if v is None else SPARK[min(len(SPARK) - 1, v * (len(SPARK) - 1) // top)] for v in recent)
