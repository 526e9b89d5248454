"""The op contract of each (kernels, application) pair of the stacks: the gate build-wheels runs before it builds,
and the pairs and first-problem line `kpatch verify` reports with."""

from __future__ import annotations

from kpatch.errors import VerifyFailed, WorktreeError
from kpatch.project.workspace import Workspace
from kpatch.verify import baseline
from kpatch.verify.contract import ContractReport, check


def contract_pairs(ws: Workspace) -> list[tuple[str, str]]:
    """(kernels, application) upstream pairs: each upstream with every upstream it requires."""
    return [(dep, up.name) for up in ws.stack.upstreams for dep in up.requires]


def applied(ws: Workspace, name: str) -> bool:
    """Whether `name`'s stack is applied cleanly in its worktree (so its contract can be read from it)."""
    run = ws.read_state()
    in_progress = run.operation is not None and name in run.operation.stacks
    return name in run.settled and not in_progress and ws.worktree(name).is_dir()


def gate(ws: Workspace) -> list[ContractReport]:
    """The contract of every pair, for build-wheels' last step: raises VerifyFailed (exit 1) naming the first
    problem when any pair breaks it, so no lock is written; returns the reports when all hold."""
    reports = []
    for kernels, app in contract_pairs(ws):
        for name in (kernels, app):
            if not applied(ws, name):
                raise WorktreeError(f"no applied worktree for {name} at {ws.worktree(name)}: run 'kpatch apply'")
        report = baseline.apply(check(ws.worktree(kernels), ws.worktree(app), ws.stack.cuda_only),
                                f"{kernels} -> {app}", baseline.read(baseline.path_of(ws.stack)),
                                baseline.stack_ops(ws.stack))
        if not report.ok:
            raise VerifyFailed(f"op contract {kernels} -> {app}: {first_problem(report)}; "
                               "'kpatch verify' shows the whole report")
        reports.append(report)
    return reports


def first_problem(report: ContractReport) -> str:
    """One line naming the first thing wrong with a contract, and how many more there are."""
    problems = [f"{op.namespace}.{op.op} ({op.gap.value}) called from {op.sites[0]}"
                for module in report.missing for op in module.ops]
    problems += [f"{m.namespace}.{m.op} schema differs: {m.diffs[0].detail} ({m.declared} vs {m.registered})"
                 for m in report.mismatches if m.breaking]
    problems += [f"{u.namespace}.{u.op} call at {u.call} {u.reason}" for u in report.unbound]
    problems += list(report.problems)
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return (problems[0] if problems else "no problem") + more
