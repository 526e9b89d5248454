"""The report as markdown (people, GitHub, the job summary) and JSON (machines): one model, the same content."""

from __future__ import annotations

import html
import json
from pathlib import Path

from kpatch.dashboard.cells import GITHUB_LIMIT, _code, _longest_run, _table, _text
from kpatch.dashboard.night import REPORT_VERSION, Outcome, Report, StageStatus, hunk_text
from kpatch.engine.diff import Change, PatchChange
from kpatch.engine.reports import PatchReport
from kpatch.files import write_atomic
from kpatch.output.redact import redact_text
from kpatch.output.ui import count, to_jsonable
from kpatch.project.state import PatchClass

MARKDOWN, JSON, RANGE_DIFF = "report.md", "report.json", "range-diff.txt"


def to_json(report: Report) -> str:
    return redact_text(json.dumps({"version": REPORT_VERSION, "ok": report.ok, **to_jsonable(report)}, indent=2)) + "\n"


def write(folder: Path, report: Report) -> tuple[Path, Path]:
    """report.md and report.json in `folder`, each written whole (a reader never sees half of one); with the
    rebase's review, range-diff.txt too (the whole range-diff, which a pull request body may not hold)."""
    folder.mkdir(parents=True, exist_ok=True)
    md, js = folder / MARKDOWN, folder / JSON
    write_atomic(md, markdown(report).encode("utf-8"))
    write_atomic(js, to_json(report).encode("utf-8"))
    if report.reviews:
        write_atomic(folder / RANGE_DIFF, range_diff_text(report).encode("utf-8"))
    return md, js


def range_diff_text(report: Report) -> str:
    """Every stack's range-diff as git printed it, each under a line that says how to print it again."""
    return "".join(f"# {r.upstream}: git range-diff --no-color {r.old_range or '-'} {r.new_range or '-'}\n"
                   f"{r.range_diff}" for r in report.reviews)


def for_github(report: Report, run_url: str | None = None) -> str:
    """The markdown as GitHub takes it in one body or comment: when it is too long, the interdiffs that do not fit
    are left to range-diff.txt in the run's artifact (`run_url`: the run's page, where the artifact is), and if
    it still is, it is cut."""
    text = markdown(report, run_url=run_url)
    if len(text) <= GITHUB_LIMIT:
        return text
    if report.reviews:
        room = GITHUB_LIMIT - len(markdown(report, interdiffs=0, run_url=run_url))
        if room >= 0:
            return markdown(report, interdiffs=room, run_url=run_url)
        text = markdown(report, interdiffs=0, run_url=run_url)
    return text[:GITHUB_LIMIT] + "\n\n… (cut: the whole report is report.md in the run's artifact)\n"


def headline(report: Report) -> str:
    if report.outcome is Outcome.FAILED and report.failure:
        return f"kpatch nightly: FAILED at {report.failure.stage.value}"
    return f"kpatch nightly: {report.outcome.value}"


def markdown(report: Report, *, interdiffs: int | None = None, run_url: str | None = None) -> str:
    """The report; `interdiffs`: at most this many characters of changed patches' interdiff blocks (None: all of
    them), the others named, their interdiffs left to range-diff.txt (in the artifact of the run at `run_url`)."""
    lines = [f"# {headline(report)}", "", _text(report.summary), "",
             f"kpatch {report.kpatch_version}, started {report.started}, exit code {report.exit_code}", ""]
    lines += _table(["stage", "result", "time", "summary"],
                    [[s.stage.value, s.status.value.upper() if s.status is StageStatus.FAILED else s.status.value,
                      f"{s.seconds:.1f} s", _text(s.summary)] for s in report.stages])
    for section in (_clock, _moves, _scroll, _patches, _pulls, _wheels, _checks, _suites, _failure, _github):
        lines += section(report)
        if section is _moves:
            lines += _changes(report, interdiffs, run_url)
    return redact_text("\n".join(lines).rstrip() + "\n")


def _clock(report: Report) -> list[str]:
    """Where the night's time went: each part, its share of the whole night, and the whole."""
    c = report.clock
    if c is None:
        return []
    parts = [("fetch", c.fetch), ("rebase", c.rebase), ("build", c.build), ("verify", c.verify), ("test", c.test),
             ("scroll", c.scroll), ("report", c.report), ("publish", c.publish)]
    return ["", "## Clock", "", *_table(
        ["part", "time", "share"],
        [*([name, f"{seconds:.1f} s", f"{100 * seconds / c.total:.0f} %" if c.total else "-"]
           for name, seconds in parts), ["**night**", f"**{c.total:.1f} s**", "100 %"]])]


def _moves(report: Report) -> list[str]:
    if not report.moves:
        return []
    return ["", "## Upstreams", "", *_table(
        ["upstream", "branch", "old base", "new base", "commits"],
        [[_text(m.upstream), _text(m.branch), _code(m.old_base[:12]), _code(m.new_base[:12]), str(m.commits)]
         for m in report.moves])]


def _scroll(report: Report) -> list[str]:
    """The search for the last green upstream commits (a red night), or the flaky tests of a passing one."""
    lines = []
    if report.flaky:
        lines += ["", "## Flaky tests", "", "Failed at the heads, passed on one retry at the same commit (not a "
                  "failure, never a culprit): " + ", ".join(_code(t) for t in report.flaky)]
    sc = report.scroll
    if sc is None:
        return lines
    green = ", ".join(f"{_text(p.upstream)} {_code(p.commit[:12])}" for p in sc.last_green)
    verdict = (f"The heads are red; the chain is green at {green}: the pull request proposes these commits."
               if sc.advanced else "The heads are red, and no commit past the pinned bases was found green: the "
               "pins stay.")
    budget = f", budget {sc.budget:g} s" if sc.budget is not None else ""
    rounds = f" in {count(sc.rounds, 'round')} of up to {sc.runners} at once" if sc.runners > 1 else ""
    lines += ["", "## Scrolling: the last green upstream commits", "", verdict, "",
              f"{count(len(sc.steps), 'step')}{rounds} in {sc.seconds:.1f} s (max-steps {sc.max_steps}{budget}); "
              + ("the search ended." if sc.complete else f"**stopped early: {_text(sc.stopped or '')}**"), ""]
    lines += _table(["upstream", "pinned base", "last green", "first red", "head", "commits"],
                    [[_text(s.upstream), _code(s.base[:12]), _code(s.last_green[:12]),
                      _code(s.first_red[:12]) if s.first_red else "-", _code(s.head[:12]), str(s.commits)]
                     for s in sc.spans])
    if sc.steps:
        lines += ["", "Steps:", "", *_table(
            ["#", "round", "upstream", "commit", "subject", "result", "stage", "where", "time"],
            [[str(n), str(st.round), _text(st.upstream), _code(st.commit[:12]), _text(st.subject),
              _text(st.result.value), _text(st.stage.value) if st.stage else "-", _text(st.where),
              f"{st.seconds:.1f} s"]
             for n, st in enumerate(sc.steps, 1)])]
    selected = [(n, sel) for n, st in enumerate(sc.steps, 1) for sel in st.selection]
    if selected:
        lines += ["", "Test selection (the tests the upstream diff touches ran first):", ""]
        for n, sel in selected:
            diff = f"{_code(sel.base[:12] + '..' + sel.commit[:12])}"
            if sel.first:
                why = "; ".join(f"{_code(f)} ({_text(w)})" for f, w in zip(sel.first, sel.why, strict=True))
                lines.append(f"- step {n}, {_text(sel.upstream)} {diff}: first {why}; then "
                             f"{count(sel.rest, 'other test file')}")
            else:
                lines.append(f"- step {n}, {_text(sel.upstream)} {diff}: touches none of its "
                             f"{count(sel.rest, 'test file')}; they ran in path order")
    c = sc.culprit
    if c is not None:
        lines += ["", "### Culprit", "",
                  f"The first red commit after the last green: {_text(c.upstream)} {_code(c.commit)} "
                  f"\"{_text(c.subject)}\" by {_text(c.author)} ({_text(c.date)}); {_text(c.stage.value)} fails: "
                  f"{_text(c.message)}"]
        if c.failing:
            lines += ["", "Failing tests:", "", *(f"- {_code(t)}" for t in c.failing)]
        if c.log_tail:
            fence = "`" * max(3, 1 + max(_longest_run(line, "`") for line in c.log_tail))
            lines += ["", "Log tail at the culprit:", "", f"{fence}text", *c.log_tail, fence]
    if sc.flaky:
        lines += ["", "Flaky (failed once, passed on the retry at the same commit; never a culprit): "
                  + ", ".join(_code(t) for t in sc.flaky)]
    return lines


def _changes(report: Report, room: int | None, run_url: str | None) -> list[str]:
    """What the rebase did to each patch: the unchanged in one line, each changed one as a collapsed block with
    its interdiff (while `room` lasts), the dropped with the upstream commit that carries them, the new."""
    if not report.reviews:
        return []
    lines = ["", "## What changed in the patches", ""]
    dropped = {(p.upstream, p.name): p for p in report.patches if p.klass is PatchClass.UPSTREAM}
    left: list[str] = []
    for review in report.reviews:
        counts = ", ".join(f"{review.count(c)} {c.value}" for c in Change)
        lines += [f"**{_text(review.upstream)}**: {counts}.", ""]
        same = [p for p in review.patches if p.change is Change.UNCHANGED]
        if same:
            lines += ["Unchanged (only offsets or context moved): " + ", ".join(_code(p.name) for p in same), ""]
        for p in review.patches:
            if p.change is not Change.CHANGED:
                continue
            block = _interdiff_block(review.upstream, p.name, p.interdiff, _behind(p))
            if room is not None and len(block) + 1 > room:
                left.append(f"{review.upstream}/{p.name}")
                continue
            room = None if room is None else room - len(block) - 1
            lines += [block, ""]
        for p in review.patches:
            if p.change is Change.UNCHANGED and p.upstream_commits:  # three-way: its context moved upstream
                lines.append(f"- three-way {_code(f'{review.upstream}/{p.name}')}: {_behind(p)}")
            elif p.change is Change.DROPPED:
                line = dropped.get((review.upstream, p.name))
                why = (f"merged upstream as {_code(line.commit[:12])} ({_text(line.why)})" if line and line.commit
                       else f"dropped ({_text(line.why)})" if line else "dropped")
                lines.append(f"- dropped {_code(f'{review.upstream}/{p.name}')}: {why}")
            elif p.change is Change.NEW:
                lines.append(f"- new {_code(f'{review.upstream}/{p.name}')}")
        if lines[-1]:
            lines.append("")
    if left:
        where = f"[the run's artifact]({run_url})" if run_url else "the run's artifact"
        more = count(len(left), "more changed patch", "more changed patches")
        lines += [f"The body is at GitHub's limit: the interdiffs of {more} ({', '.join(_code(n) for n in left)}) "
                  f"are in {_code(RANGE_DIFF)}, the whole range-diff, in {where}.", ""]
    return lines[:-1]


def _interdiff_block(upstream: str, name: str, interdiff: str, behind: str) -> str:
    """One changed patch as a collapsed block: its interdiff as range-diff printed it, in a fence none of its
    lines can close, then the upstream commits that touched its lines."""
    body = interdiff.rstrip("\n").splitlines()
    fence = "`" * max(3, 1 + max((_longest_run(line, "`") for line in body), default=0))
    return "\n".join([f"<details><summary>changed <code>{html.escape(f'{upstream}/{name}')}</code></summary>", "",
                      f"{fence}diff", *body, fence, "", *([behind, ""] if behind else []), "</details>"])


def _behind(p: PatchChange) -> str:
    """The upstream commits that touched the patch's lines: subject, author, date, and the PR as a link."""
    if not p.upstream_commits:
        return ""
    return "upstream commits that touched its lines: " + "; ".join(
        f"{_code(c.sha[:12])} \"{_text(c.subject)}\" by {_text(c.author)} ({_text(c.date)})"
        + (f", [PR {c.pr}]({c.link})" if c.link else f", PR {c.pr}" if c.pr else "") for c in p.upstream_commits)


def _patches(report: Report) -> list[str]:
    if not report.patches:
        return []
    lines = ["", "## Patches", "", *_table(["upstream", "patch", "class", "why"],
                                           [[_text(p.upstream), _text(p.name), _text(p.klass), _why(p)]
                                            for p in report.patches])]
    conflicts = [p for p in report.patches if p.klass is PatchClass.CONFLICT]
    if conflicts:
        lines += ["", "### Conflicts", ""]
        for p in conflicts:
            c = p.culprit
            what = (f"broken by upstream commit {_code(c.sha)} \"{_text(c.subject)}\" by {_text(c.author)} "
                    f"({_text(c.date)}); found in {count(c.trials, 'trial apply', 'trial applies')} over "
                    f"{count(c.commits, 'commit')}" if c else "culprit not found")
            where = f"; hunks: {_text(', '.join(hunk_text(h) for h in p.hunks))}" if p.hunks else ""
            lines.append(f"- {_code(f'{p.upstream}/{p.name}')}"
                         f"{' (trial apply)' if p.why.startswith('trial') else ''}: {what}{where}")
    dropped = [p for p in report.patches if p.klass is PatchClass.UPSTREAM]
    if dropped:
        lines += ["", "### Dropped as already upstream", ""]
        lines += [f"- {_code(f'{p.upstream}/{p.name}')}: {_text(p.why)}"
                  + (f" (upstream commit {_code(p.commit)})" if p.commit else "") for p in dropped]
    if report.flags:
        lines += ["", "### Merged upstream, not yet in the base", ""]
        lines += [f"- {_code(f'{f.upstream}/{f.patch}')}: {_text(f.pr, references=True)}"
                  + (f" merged as {_code(f.merge_commit[:12])}" if f.merge_commit else " merged")
                  + f": **{_text(f.note)}**" for f in report.flags]
    return lines


def _pulls(report: Report) -> list[str]:
    """The Upstream-PRs whose state changed since the last night, and each closed without a merge."""
    if not report.pulls:
        return []
    changed = [p for p in report.pulls if p.changed]
    lines = ["", "## Upstream PRs", ""]
    if changed:
        lines += ["Changed since the last night:", "",
                  *_table(["PR", "patch", "was", "now"],
                          [[_text(p.pr, references=True), _code(f"{p.upstream}/{p.patch}"),
                            _text(p.before or "not known"), _text(p.state)] for p in changed])]
    else:
        lines.append("No pull request changed state since the last night.")
    same = len(report.pulls) - len(changed)
    if changed and same:
        lines += ["", f"{count(same, 'other pull request')} unchanged."]
    closed = [p for p in report.pulls if p.note]
    if closed:
        lines += ["", *(f"- {_text(p.pr, references=True)} ({_code(f'{p.upstream}/{p.patch}')}): **{_text(p.note)}**"
                        for p in closed)]
    return lines


def _why(p: PatchReport) -> str:
    if p.culprit:
        why = f"{_text(p.why)}; " if p.why else ""
        return f"{why}broken by {_code(p.culprit.sha[:12])} ({_text(p.culprit.author)})"
    return _text(p.why)


def _wheels(report: Report) -> list[str]:
    if not report.wheels:
        return []
    lines = ["", "## Wheels and lock", "", *_table(
        ["upstream", "wheel", "version", "sha256", "", "torch"],
        [[_text(w.upstream), _code(w.filename), _text(w.version), _code(f"{w.sha256[:16]}…"),
          "cached" if w.cached else "built", _text(w.torch or "none")] for w in report.wheels])]
    lines += ["", f"Lock: {_code(str(report.lock))}" + (f", kept for the branch as {_code(report.kept_lock)}"
                                                       if report.kept_lock else "")
              + f"; {report.containers} build container(s) started."]
    return lines


def _checks(report: Report) -> list[str]:
    if not report.checks:
        return []
    lines = ["", "## Verify: the pair and the op contract", "", *_table(
        ["status", "check", "subject", "detail"],
        [[c.status.word, _text(c.area), _text(c.subject),
          _text(c.detail + (f" (next: {c.fix})" if c.fix and c.status.word != "pass" else ""))]
         for c in report.checks])]
    if report.contract:
        lines += ["", "Op contract:", "", *(f"- {_text(line)}" for line in report.contract)]
    if report.accepted:
        lines += ["", f"Accepted op-contract findings ({len(report.accepted)}, the verify baseline; not failures):",
                  "", *(f"- {_code(a.pair)}: {_code(a.op)} ({_text(a.kind)}) in {_code(a.function)} at "
                        f"{_code(a.site)}: {_text(a.reason)}" for a in report.accepted)]
    return lines


def _suites(report: Report) -> list[str]:
    if not report.suites:
        return []
    lines = ["", "## Tests", "", *_table(
        ["upstream", "outcome", "passed", "failed", "errors", "skipped", "time"],
        [[_text(s.upstream), _text(s.outcome), str(s.passed), str(s.failed), str(s.errors), str(s.skipped),
          f"{s.seconds:.1f} s"] for s in report.suites])]
    for s in report.suites:
        name = _text(s.upstream)
        if s.newly_failing:
            lines.append(f"\n**{name} newly failing:** " + ", ".join(_code(t) for t in s.newly_failing))
        if s.newly_passing:
            lines.append(f"\n{name} newly passing: " + ", ".join(_code(t) for t in s.newly_passing))
        if s.failing:
            lines += ["", f"{name} failing:", *(f"- {_code(t)}" for t in s.failing)]
        if s.message:
            lines.append(f"\n{name}: {_text(s.message)}" + (f" (running: {_code(s.running)})" if s.running else ""))
        if not s.compared and s.outcome != "no-device":
            lines.append(f"\n{name}: no previous report to compare with.")
    return lines


def _failure(report: Report) -> list[str]:
    f = report.failure
    if f is None:
        return []
    lines = ["", "## Failure", "",
             f"Stage **{f.stage.value}**, exit code {f.exit_code}: {_text(f.message)}"]
    if f.resolve:
        lines += ["", "What to do:", "", *(f"{n}. {_text(step)}" for n, step in enumerate(f.resolve, 1))]
    if f.log_tail:
        fence = "`" * max(3, 1 + max(_longest_run(line, "`") for line in f.log_tail))
        lines += ["", "Log tail:", "", f"{fence}text", *f.log_tail, fence]
    if f.log:
        lines += ["", f"The whole log: `{f.log}` (on the machine that ran the night)"]
    return lines


def _github(report: Report) -> list[str]:
    lines = []
    if report.dry_run:
        lines.append(f"- dry run ({_text(report.dry_run)}): nothing is pushed, opened, commented on or closed")
    if report.push:
        lines.append(f"- branch {_code(report.push.branch)}: {_text(report.push.message, references=True)}")
    lines += [f"- {_text(r.message, references=True)}" for r in report.github]
    lines += [f"- note: {_text(note)}" for note in report.notes]
    return ["", "## GitHub and notes", "", *lines] if lines else []
