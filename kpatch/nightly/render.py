"""The report as markdown (people, GitHub, the job summary) and JSON (machines): one model, the same content."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from kpatch.files import write_atomic
from kpatch.nightly.model import Outcome, PatchLine, Report, StageStatus
from kpatch.redact import redact_text
from kpatch.ui import count, to_jsonable

MARKDOWN, JSON = "report.md", "report.json"
GITHUB_LIMIT = 60_000  # GitHub refuses bodies and comments over 65,536 characters


def to_json(report: Report) -> str:
    return redact_text(json.dumps({"ok": report.ok, **to_jsonable(report)}, indent=2)) + "\n"


def write(folder: Path, report: Report) -> tuple[Path, Path]:
    """report.md and report.json in `folder`, each written whole (a reader never sees half of one)."""
    folder.mkdir(parents=True, exist_ok=True)
    md, js = folder / MARKDOWN, folder / JSON
    write_atomic(md, markdown(report).encode("utf-8"))
    write_atomic(js, to_json(report).encode("utf-8"))
    return md, js


def for_github(report: Report) -> str:
    """The markdown, cut to what GitHub takes in one body or comment."""
    text = markdown(report)
    if len(text) <= GITHUB_LIMIT:
        return text
    return text[:GITHUB_LIMIT] + "\n\n… (cut: the whole report is report.md in the run's artifact)\n"


def headline(report: Report) -> str:
    if report.outcome is Outcome.FAILED and report.failure:
        return f"kpatch nightly: FAILED at {report.failure.stage.value}"
    return f"kpatch nightly: {report.outcome.value}"


def markdown(report: Report) -> str:
    lines = [f"# {headline(report)}", "", _cell(report.summary, table=False), "",
             f"kpatch {report.kpatch_version}, started {report.started}, exit code {report.exit_code}", ""]
    lines += _table(["stage", "result", "time", "summary"],
                    [[s.stage.value, s.status.value.upper() if s.status is StageStatus.FAILED else s.status.value,
                      f"{s.seconds:.1f} s", s.summary] for s in report.stages])
    for section in (_moves, _patches, _wheels, _checks, _suites, _failure, _github):
        lines += section(report)
    return redact_text("\n".join(lines).rstrip() + "\n")


def _moves(report: Report) -> list[str]:
    if not report.moves:
        return []
    return ["", "## Upstreams", ""] + _table(
        ["upstream", "branch", "old base", "new base", "commits"],
        [[m.upstream, m.branch, f"`{m.old_base[:12]}`", f"`{m.new_base[:12]}`", str(m.commits)] for m in report.moves])


def _patches(report: Report) -> list[str]:
    if not report.patches:
        return []
    lines = ["", "## Patches", ""] + _table(["upstream", "patch", "class", "why"],
                                            [[p.upstream, p.patch, p.klass, _why(p)] for p in report.patches])
    conflicts = [p for p in report.patches if p.klass == "conflict"]
    if conflicts:
        lines += ["", "### Conflicts", ""]
        for p in conflicts:
            c = p.culprit
            what = (f"broken by upstream commit `{c.sha}` \"{c.subject}\" by {c.author} ({c.date}); found in "
                    f"{count(c.trials, 'trial apply', 'trial applies')} over {count(c.commits, 'commit')}"
                    if c else "culprit not found")
            where = f"; hunks: {', '.join(p.hunks)}" if p.hunks else ""
            lines.append(f"- `{p.upstream}/{p.patch}`{' (trial apply)' if p.why.startswith('trial') else ''}: "
                         f"{_cell(what + where, table=False)}")
    dropped = [p for p in report.patches if p.klass == "upstream"]
    if dropped:
        lines += ["", "### Dropped as already upstream", ""]
        lines += [f"- `{p.upstream}/{p.patch}`: {_cell(p.why, table=False)}"
                  + (f" (upstream commit `{p.commit}`)" if p.commit else "") for p in dropped]
    if report.flags:
        lines += ["", "### Merged upstream, not yet in the base", ""]
        lines += [f"- `{f.upstream}/{f.patch}`: {f.pr}" + (f" merged as `{f.merge_commit[:12]}`" if f.merge_commit
                                                           else " merged") + f": **{f.note}**" for f in report.flags]
    return lines


def _why(p: PatchLine) -> str:
    if p.culprit:
        return f"{p.why + '; ' if p.why else ''}broken by `{p.culprit.sha[:12]}` ({p.culprit.author})"
    return p.why


def _wheels(report: Report) -> list[str]:
    if not report.wheels:
        return []
    lines = ["", "## Wheels and lock", ""] + _table(
        ["upstream", "wheel", "version", "sha256", "", "torch"],
        [[w.upstream, f"`{w.filename}`", w.version, f"`{w.sha256[:16]}…`", "cached" if w.cached else "built",
          w.torch or "none"] for w in report.wheels])
    lines += ["", f"Lock: `{report.lock}`" + (f", kept for the branch as `{report.kept_lock}`" if report.kept_lock
                                              else "") + f"; {report.containers} build container(s) started."]
    return lines


def _checks(report: Report) -> list[str]:
    if not report.checks:
        return []
    lines = ["", "## Verify: the pair and the op contract", ""] + _table(
        ["status", "check", "subject", "detail"],
        [[c.status.value, c.area, c.subject, c.detail + (f" (next: {c.fix})" if c.fix and c.status.value != "pass"
                                                          else "")] for c in report.checks])
    if report.contract:
        lines += ["", "Op contract:", "", *(f"- {_cell(line, table=False)}" for line in report.contract)]
    return lines


def _suites(report: Report) -> list[str]:
    if not report.suites:
        return []
    lines = ["", "## Tests", ""] + _table(
        ["upstream", "outcome", "passed", "failed", "errors", "skipped", "time"],
        [[s.upstream, s.outcome, str(s.passed), str(s.failed), str(s.errors), str(s.skipped), f"{s.seconds:.1f} s"]
         for s in report.suites])
    for s in report.suites:
        if s.newly_failing:
            lines.append(f"\n**{s.upstream} newly failing:** " + ", ".join(f"`{t}`" for t in s.newly_failing))
        if s.newly_passing:
            lines.append(f"\n{s.upstream} newly passing: " + ", ".join(f"`{t}`" for t in s.newly_passing))
        if s.failing:
            lines += ["", f"{s.upstream} failing:", *(f"- `{_cell(t, table=False)}`" for t in s.failing)]
        if s.message:
            lines.append(f"\n{s.upstream}: {s.message}" + (f" (running: `{s.running}`)" if s.running else ""))
        if not s.compared and s.outcome != "no-device":
            lines.append(f"\n{s.upstream}: no previous report to compare with.")
    return lines


def _failure(report: Report) -> list[str]:
    f = report.failure
    if f is None:
        return []
    lines = ["", "## Failure", "",
             f"Stage **{f.stage.value}**, exit code {f.exit_code}: {_cell(f.message, table=False)}"]
    if f.resolve:
        lines += ["", "What to do:", "", *(f"{n}. {_cell(step, table=False)}" for n, step in enumerate(f.resolve, 1))]
    if f.log_tail:
        fence = "````" if any("```" in line for line in f.log_tail) else "```"
        lines += ["", "Log tail:", "", f"{fence}text", *f.log_tail, fence]
    if f.log:
        lines += ["", f"The whole log: `{f.log}` (on the machine that ran the night)"]
    return lines


def _github(report: Report) -> list[str]:
    lines = []
    if report.dry_run:
        lines.append(f"- dry run ({report.dry_run}): nothing is pushed, opened, commented on or closed")
    if report.push:
        lines.append(f"- branch `{report.push.branch}`: {report.push.message}")
    lines += [f"- {r.message}" for r in report.github]
    lines += [f"- note: {note}" for note in report.notes]
    return ["", "## GitHub and notes", "", *lines] if lines else []


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)]


def _cell(text: str, *, table: bool = True) -> str:
    """One line of text safe in a markdown table cell (or list item): no newlines, no bare pipes."""
    flat = " ".join(text.split("\n"))
    return flat.replace("|", "\\|") if table else flat
