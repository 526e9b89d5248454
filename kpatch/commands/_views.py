"""How the results that more than one command shows read for a person: apply, rebase, build, verify and test
(each its own command's output, and a step of the demo and the nightly). Imported by the command modules only."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kpatch.gitx.checkout import in_git_checkout
from kpatch.output.printable import printable
from kpatch.output.ui import UI, columns, count, escape, styled_columns

if TYPE_CHECKING:  # the result types only: printing a status must not import verify, test, rebase or the nightly
    from kpatch.engine.apply import ApplyResult
    from kpatch.engine.diff import StackDiff
    from kpatch.engine.evidence import UpstreamCommit
    from kpatch.engine.reports import RebaseResult
    from kpatch.nightly.run import Night
    from kpatch.testing.run import TestRun
    from kpatch.verify.contract import ContractReport
    from kpatch.verify.run import VerifyResult
    from kpatch.wheels.build import BuildResult


def show_apply(ui: UI, result: ApplyResult) -> None:
    for line in columns([[stack.upstream, stack.outcome.value, f"{stack.applied}/{stack.total} patches",
                          f"on {stack.base[:12]} -> {stack.head[:12] if stack.head else '-'}", str(stack.worktree)]
                         for stack in result.stacks]):
        ui.plain(line)
    conflict = result.conflict
    if conflict:
        ui.error(f"{conflict.upstream}: patch {conflict.patch} does not apply in {conflict.worktree}", 1,
                 final=False)
        for hunk in conflict.hunks:
            ui.detail(f"  {hunk.path}" + (f":{hunk.line}" if hunk.line else ""))
        if conflict.cause:
            ui.detail(f"  {conflict.cause}")
        if conflict.blocked:
            ui.detail(f"  not applied (they require {conflict.upstream}): {', '.join(conflict.blocked)}")
        ui.detail("  fix the files, 'git add' them, then 'kpatch apply --continue' (or 'kpatch apply --abort')")


def show_rebase(ui: UI, result: RebaseResult, scratch: Path, project: Path | None = None) -> None:
    for stack in result.stacks:
        ui.line(f"[bold]{escape(stack.name)}[/]  {stack.old_base[:12]} -> {stack.new_base[:12]}  "
                f"({stack.outcome.value})")
        rows = [["patch", "class", "why"]]
        for patch in stack.patches:
            why = patch.why
            if patch.culprit:
                c = patch.culprit
                why = (f"broken by {c.sha[:12]} \"{c.subject}\" ({c.author}, {c.date}); "
                       f"found in {count(c.trials, 'trial apply', 'trial applies')} over {count(c.commits, 'commit')}")
            if patch.hunks:
                why += " [" + ", ".join(h.path + (f":{h.line}" if h.line else "") for h in patch.hunks) + "]"
            rows.append([patch.name, patch.klass, why])
        for line in columns(rows, indent="  "):
            ui.plain(line)
        for patch in stack.patches:  # a conflict's, beside its culprit (where the rebase stops)
            show_upstream_commits(ui, patch.name, patch.klass.value, patch.upstream_commits)
        if stack.review is not None:
            for change in stack.review.patches:  # a changed or three-way patch's, once the rebase is committed
                show_upstream_commits(ui, change.name, "changed" if change.change.value == "changed" else "three-way",
                                      change.upstream_commits)
            ui.plain("  " + review_counts(stack.review))
    if result.conflict:
        where = next(s.name for s in result.stacks if result.conflict in s.patches)
        ui.error(f"patch {result.conflict.name} conflicts: nothing was written to kpatch.toml or patches/", 1,
                 final=False)
        ui.detail(f"  resolve it in {scratch / where}, 'git add', then 'kpatch rebase --continue' "
                  "(or 'kpatch rebase --abort')")
    elif result.committed:
        ui.plain(_written(result.changed, project))


SHOWN_UPSTREAM_COMMITS = 3  # per patch in human output; --json carries them all


def show_upstream_commits(ui: UI, patch: str, klass: str, commits: Sequence[UpstreamCommit],
                          shown: int = SHOWN_UPSTREAM_COMMITS) -> None:
    """The upstream commits that touched a patch's lines, newest first: up to `shown`, then how many more."""
    if not commits:
        return
    ui.plain(f"  {patch} ({klass}): touched upstream by {count(len(commits), 'commit')}")
    for c in commits[:shown]:
        pr = f" {c.link}" if c.link else f" (#{c.pr})" if c.pr else ""
        ui.plain(f"    {c.sha[:12]} \"{printable(c.subject)}\" ({printable(c.author.split(' <')[0])}, "
                 f"{c.date[:10]}){pr}")
    if len(commits) > shown:
        ui.plain(f"    and {len(commits) - shown} more (--json lists them all)")


def review_counts(review: StackDiff) -> str:
    """`kernels patches: 3 unchanged, 1 changed (NAME), 1 dropped, 0 new`: what a range-diff found, in one line."""
    from kpatch.engine.diff import Change  # only when there is a review to show

    changed = [p.name for p in review.patches if p.change is Change.CHANGED]
    parts = [f"{review.count(c)} {c.value}" + (f" ({', '.join(changed)})" if c is Change.CHANGED and changed else "")
             for c in Change]
    return f"{review.upstream} patches: " + ", ".join(parts)


def _written(changed: int | None, project: Path | None) -> str:
    """What a committed rebase did to kpatch.toml and patches/, and how to review it when git can show it."""
    if changed == 0:
        return "kpatch.toml and patches/ unchanged: the rebase gave the same files"
    what = "kpatch.toml and patches/ updated" + (f" ({count(changed, 'file')})" if changed else "")
    if project is not None and in_git_checkout(project):
        return f"{what}; review with 'git diff'"
    return what


def show_verify(ui: UI, result: VerifyResult, explain: bool = False) -> None:
    styles = {"pass": "green", "fail": "bold red", "warn": "yellow", "skip": "dim"}
    rows: list[list[str]] = [["", "check", "subject", "detail"]]
    row_styles: list[str | None] = [None]
    for check in result.checks:
        status = check.status.word
        rows.append([status, check.area, check.subject, check.detail])
        row_styles.append(styles[status])
        if check.fix and status != "pass":
            rows.append(["", "", "", f"next: {check.fix}"])
            row_styles.append(None)
    for line in styled_columns(rows, row_styles):
        ui.line(line)
    for contract in result.contracts:
        if contract.report is not None and (explain or not contract.report.ok):
            show_contract(ui, contract.kernels, contract.app, contract.report, explain)
        for seen in contract.seen:
            where = f" in {escape(seen.function)}" if seen.function else ""
            ui.line(f"  [bold]what a user sees[/]: the first call at {escape(seen.site)}{where} raises "
                    f"{escape(seen.error)}")
    ui.line("verify " + ("[green]passed[/]" if result.ok else "[bold red]FAILED[/]"))


def show_contract(ui: UI, kernels: str, app: str, report: ContractReport, explain: bool = False) -> None:
    ui.line(f"\n[bold]op contract {escape(kernels)} -> {escape(app)}[/] (libraries {', '.join(report.namespaces)})")
    for module in report.missing:
        ui.line(f"  [bold]{escape(module.module)}[/] calls, not served on XPU:")
        for op in module.ops:
            where = ", ".join(str(s) for s in op.sites[:3]) + (" …" if len(op.sites) > 3 else "")
            keys = f" (kernels: {', '.join(op.keys)})" if op.keys else ""
            ui.line(f"    {op.namespace}.{escape(op.op)}: {op.gap.value}{keys}  [dim]{escape(where)}[/]")
            if op.sites[0].why:
                ui.line(f"      [dim]reached via: {escape(op.sites[0].why)}[/]")
    for m in report.mismatches:
        head = "[bold red]schema differs[/]" if m.breaking else "[yellow]schema differs (not an error by itself)[/]"
        ui.line(f"  {head} {m.namespace}.{escape(m.op)}: {app} {m.declared} vs {kernels} {m.registered}")
        for diff in m.diffs:
            ui.line(f"    {diff.kind.value}: {escape(diff.detail)}")
    for u in report.unbound:
        ui.line(f"  [bold red]call does not bind[/] {u.namespace}.{escape(u.op)} at {u.call}: {escape(u.reason)} "
                f"(schema {u.registered})")
        if u.call.why:
            ui.line(f"      [dim]reached via: {escape(u.call.why)}[/]")
    for problem in report.problems:
        ui.line(f"  [bold red]unreadable[/] {escape(problem)}")
    if explain:
        for d in report.not_reached:
            ui.line(f"  not reached on XPU: {d.namespace}.{escape(d.op)} at {d.site} ({escape(d.site.function)}): "
                    f"{escape(d.site.why)}")
    if report.keys_unread:
        more = " …" if len(report.keys_unread) > 5 else ""
        ui.line(f"  [yellow]dispatch keys not in the binary[/] for {len(report.keys_unread)} called op(s) the "
                f"kernels define: {escape(', '.join(report.keys_unread[:5]))}{more}")
    ui.line(f"  [dim]not counted: {len(report.cuda_only)} listed cuda-only, {len(report.other_backends)} only "
            f"declared by {app}'s CPU/ROCm builds and not reached on XPU, {report.off_xpu_calls} call sites in "
            f"non-XPU branches, "
            f"{report.probes} hasattr/getattr probes, {len(report.not_reached)} calls XPU never reaches, "
            f"{len(report.accepted)} accepted findings (the verify baseline)"
            f"{'' if explain else ' (--explain says why)'}[/]")


def show_test(ui: UI, result: TestRun) -> None:
    rows: list[list[str]] = [["upstream", "outcome", "passed", "failed", "errors", "skipped", "time"]]
    row_styles: list[str | None] = [None]
    for suite in result.suites:
        c = suite.counts
        numbers = [str(n) for n in (c.passed, c.failed, c.errors, c.skipped)] if c else ["-"] * 4
        rows.append([suite.upstream, suite.outcome.value, *numbers, f"{suite.seconds:.1f} s"])
        row_styles.append({"passed": "green", "no-device": "yellow"}.get(suite.outcome.value, "red"))
    for line in styled_columns(rows, row_styles, column=1):
        ui.line(line)
    for suite in result.suites:
        new = set(suite.changes.newly_failing) if suite.changes else set()
        for case in suite.failing:
            ui.line(f"  {escape(suite.upstream)} [red]{case.verdict.value.upper()}[/] {escape(case.id)}"
                    f"{' (new)' if case.id in new else ''}: {escape(case.message)}")
        if suite.running:
            ui.line(f"[bold]{escape(suite.upstream)}[/] was running: {escape(suite.running)}")
        if suite.slowest:
            ui.line(f"[bold]{escape(suite.upstream)}[/] slowest: "
                    + ", ".join(f"{escape(c.id)} {c.seconds:.2f} s" for c in suite.slowest[:3]))
        if suite.changes is not None:
            for label, ids in (("newly failing", suite.changes.newly_failing),
                               ("newly passing", suite.changes.newly_passing)):
                if ids:
                    ui.line(f"[bold]{escape(suite.upstream)}[/] {label}: " + ", ".join(escape(i) for i in ids))
        elif suite.junit is not None:
            ui.line(f"[bold]{escape(suite.upstream)}[/] no previous report to compare with")
    ui.line(f"reports: {escape(str(result.reports))} (lock {escape(str(result.lock))}; devices: "
            f"{escape(' '.join(result.devices)) or 'none'})")


def show_build(ui: UI, result: BuildResult) -> None:
    from kpatch.wheels.compiler_cache import describe

    for wheel in result.wheels:
        cache = f"; {describe(wheel.compiler_cache)}" if wheel.compiler_cache else ""
        ui.line(f"{escape(wheel.upstream):<20} {'cached' if wheel.cached else 'built':<7} {escape(wheel.filename)}"
                f"  (torch {wheel.torch or 'none'}{cache})")
    if result.image_digest.startswith("local:"):  # the local backend: no image, no container
        ui.line(f"lock: {result.lock} (built on this host, toolchain {result.image_digest[6:18]})")
        return
    ui.line(f"lock: {result.lock} (image {escape(result.image)} {result.image_digest[:19]}; "
            f"{count(result.containers, 'build container')} started)")


def show_night(ui: UI, night: Night) -> None:
    """A night's report on the terminal: its headline, each stage, flags, the next steps, where it went."""
    from kpatch.nightly.render import headline

    report = night.report
    styles = {"passed": "green", "failed": "bold red", "skipped": "dim"}
    ui.line(f"\n[bold]{escape(headline(report))}[/]")
    for run in report.stages:
        ui.line(f"  {run.stage.value:<7} [{styles[run.status.value]}]{run.status.value:<7}[/] {run.seconds:6.1f} s  "
                f"{escape(run.summary)}")
    for flag in report.flags:
        ui.line(f"  [yellow]flag[/] {escape(flag.upstream)}/{escape(flag.patch)}: {escape(flag.pr)} {flag.note}")
    if report.failure:
        for step in report.failure.resolve:
            ui.line(f"  next: {escape(step)}")
    if report.dry_run:
        ui.line(f"  dry run ({escape(report.dry_run)}): nothing pushed, opened, commented on or closed")
    if report.push:
        ui.line(f"  {escape(report.push.branch)}: {escape(report.push.message)}")
    for result in report.github:
        ui.line(f"  GitHub: {escape(result.message)}")
    ui.line(f"report: {escape(str(night.markdown))} and {escape(night.json.name)}")
