"""How each command's result reads for a person (the CLI's printing half; --json prints the result itself)."""

from __future__ import annotations

from pathlib import Path

from kpatch.engine.apply import ApplyResult
from kpatch.engine.rebase import RebaseResult
from kpatch.engine.status import StatusResult
from kpatch.ui import UI, columns, escape


def print_status(ui: UI, result: StatusResult) -> None:
    for report in result.upstreams:
        behind = "?" if report.behind is None else str(report.behind)
        ui.line(f"[bold]{escape(report.name)}[/]  {escape(report.url)} ({escape(report.branch)})")
        resolved = report.base_commit or "unresolved (no mirror yet)"
        pin = report.base if report.base == report.base_commit else f"{report.base} = {resolved}"
        ui.plain(f"  base {pin}; mirror head {report.mirror_head or '-'}; {behind} commits behind")
        rows = [["#", "patch", "state", "upstream", "PR", "requires"]]
        rows += [[str(index), patch.name, patch.state.value, patch.upstream_status or "-",
                  ", ".join(patch.upstream_prs) or "-", ", ".join(patch.requires) or "-"]
                 for index, patch in enumerate(report.patches, start=1)]
        for line in columns(rows, indent="  "):
            ui.plain(line)
        if report.unexported:
            ui.plain(f"  {report.unexported} worktree commit(s) not in the patch files: run 'kpatch export'")
    if result.journal:
        ui.plain(f"an interrupted 'kpatch {result.journal}' is pending: run 'kpatch {result.journal} --continue' "
                 "or '--abort'")
    elif result.operation:
        ui.plain(f"a {result.operation} is in progress: 'kpatch {result.operation} --continue' or '--abort'")


def print_apply(ui: UI, result: ApplyResult) -> None:
    for line in columns([[stack.upstream, stack.outcome.value, f"{stack.applied}/{stack.total} patches",
                          f"on {stack.base[:12]} -> {stack.head[:12] if stack.head else '-'}", str(stack.worktree)]
                         for stack in result.stacks]):
        ui.plain(line)
    conflict = result.conflict
    if conflict:
        ui.error(f"{conflict.upstream}: patch {conflict.patch} does not apply in {conflict.worktree}", 1)
        for hunk in conflict.hunks:
            ui.detail(f"  {hunk.path}" + (f":{hunk.line}" if hunk.line else ""))
        if conflict.blocked:
            ui.detail(f"  not applied (they require {conflict.upstream}): {', '.join(conflict.blocked)}")
        ui.detail("  fix the files, 'git add' them, then 'kpatch apply --continue' (or 'kpatch apply --abort')")


def print_rebase(ui: UI, result: RebaseResult, scratch: Path) -> None:
    for stack in result.stacks:
        ui.line(f"[bold]{escape(stack.name)}[/]  {stack.old_base[:12]} -> {stack.new_base[:12]}  "
                f"({stack.outcome.value})")
        rows = [["patch", "class", "why"]]
        for patch in stack.patches:
            why = patch.why
            if patch.culprit:
                c = patch.culprit
                why = (f"broken by {c.sha[:12]} \"{c.subject}\" ({c.author}, {c.date}); "
                       f"found in {c.trials} trial applies over {c.commits} commits")
            if patch.hunks:
                why += " [" + ", ".join(p + (f":{line}" if line else "") for p, line in patch.hunks) + "]"
            rows.append([patch.name, patch.klass, why])
        for line in columns(rows, indent="  "):
            ui.plain(line)
    if result.github:
        ui.plain(f"note: {result.github}")
    if result.conflict:
        ui.error(f"patch {result.conflict.name} conflicts: nothing was written to kpatch.toml or patches/", 1)
        ui.detail(f"  resolve it in {scratch}/<name>, 'git add', then 'kpatch rebase --continue' "
                  "(or 'kpatch rebase --abort')")
    elif result.committed:
        ui.plain("kpatch.toml and patches/ updated; review with 'git diff'")
