"""`kpatch nightly --run-step PLAN K` and `kpatch nightly --collect DIR`: the search's rounds as jobs of the CI's
matrix (kpatch/nightly/matrix.py); this module parses and prints."""

from __future__ import annotations

from pathlib import Path

from kpatch.commands._common import Context
from kpatch.commands._views import show_night
from kpatch.errors import UsageError
from kpatch.output.ui import escape, to_jsonable


def matrix_command(ctx: Context, run_step: tuple[Path, int] | None, step_out: Path | None, collect_dir: Path | None,
                   final: bool, report_dir: Path | None, given: list[str]) -> int:
    """One job of the matrix (--run-step), or the round's results taken (--collect); exit 0 once done, whatever the
    step's verdict (the night's exit code is the night's job's)."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.nightly import matrix

    if run_step is not None and collect_dir is not None:
        raise UsageError("--run-step and --collect are two jobs of the search: give one")
    option = "--run-step" if run_step is not None else "--collect"
    if given:
        raise UsageError(f"{option} runs no night: it does not go with {given[0]}")
    ui = ctx.ui
    ws = ctx.workspace()
    if run_step is not None:
        if final:
            raise UsageError("--final goes with --collect")
        record = matrix.run_step(ws, ui, run_step[0].resolve(), run_step[1], step_out.resolve() if step_out else None)
        if ui.json_mode:
            ui.result(to_jsonable(record))
        else:
            ui.line(f"step {record.entry} of round {record.round}: {escape(record.upstream)} {record.commit[:12]} "
                    f"[bold]{record.tried.result.value}[/] ({escape(record.tried.summary)}), {record.seconds:.1f} s")
        return 0
    if step_out is not None:
        raise UsageError("--step-out goes with --run-step")
    assert collect_dir is not None
    folder = (report_dir or ws.nightly_dir).resolve()
    done = matrix.collect(ws, ui, collect_dir.resolve(), folder, final=final)
    if done.plan is not None:
        if ui.json_mode:
            ui.result(to_jsonable(done.plan))
        else:
            ui.line(f"round {done.plan.round}: {len(done.plan.entries)} step(s) planned in "
                    f"{escape(str(collect_dir / matrix.PLAN))}")
        return 0
    assert done.report is not None
    from kpatch.nightly.render import JSON, MARKDOWN
    from kpatch.nightly.run import Night

    if ui.json_mode:
        ui.result(done.report)
    else:
        show_night(ui, Night(done.report, folder / MARKDOWN, folder / JSON))
    return 0
