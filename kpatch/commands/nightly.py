"""`kpatch nightly`: rebase onto the upstream heads, build, verify and test the pair, and report it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from kpatch.commands._common import BACKEND_HELP, BACKENDS, Context, checked_base_image, chosen_backend, kpatch_command
from kpatch.commands._views import show_build, show_night, show_rebase, show_test, show_verify
from kpatch.errors import UsageError
from kpatch.output.ui import UI, escape

if TYPE_CHECKING:
    from kpatch.dashboard.night import Stage


@kpatch_command("nightly")
@click.option("--dry-run", is_flag=True, help="Run every stage, but push, open, comment on or close nothing on GitHub "
              "(say what would be).")
@click.option("--report", "report_dir", type=click.Path(path_type=Path),
              help="Where report.md and report.json go (default: reports/nightly/ next to kpatch.toml; "
              "reports-LINE/nightly/ with --line).")
@click.option("--backend", type=click.Choice(BACKENDS), default="auto", show_default=True, help=BACKEND_HELP)
@click.option("--image", metavar="REF", help="Build in this existing image (as build-wheels).")
@click.option("--base-image", metavar="REF", envvar="KPATCH_BASE_IMAGE",
              help="BASE_IMAGE for the Dockerfile (as build-wheels; default: $KPATCH_BASE_IMAGE).")
@click.option("--device", "devices", multiple=True, metavar="PATH", help="Pass this device to the tests (as test).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="Stop a test suite after S seconds (as test).")
@click.option("--max-steps", type=click.IntRange(min=0), metavar="N",
              help="When the heads are red, bisect at most N steps for the last green upstream commits (default: "
              "[nightly] max-steps, else 8; 0: no search).")
@click.option("--budget", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="Stop that search after S seconds of wall clock (default: [nightly] budget, else none).")
@click.option("--runners", type=click.IntRange(min=1), metavar="N",
              help="Try N commits at once per round of that search, as N local worker processes (default: "
              "[nightly] runners, else 1: a bisection, in this process).")
@click.option("--no-publish", is_flag=True, help="Write the report and the refreshed files only; ask GitHub nothing "
              "(a later 'nightly --publish-saved', with the token, reports it).")
@click.option("--publish-saved", is_flag=True, help="Run no stage: report to GitHub the night in --report (run "
              "with --no-publish elsewhere; its refreshed files in this checkout).")
@click.option("--released-pairs", is_flag=True, help="Also say in the report whether the newest released "
              "application on the package index, with the kernels it pins and with the newest kernels, carries the "
              "fix (no op it reaches on XPU in the folder the application's patches change is missing or declared "
              "differently); skipped, saying why, when the index cannot be asked. See docs/verify.md.")
@click.option("--replay", "replay_range", metavar="[NAME=]FROM..TO",
              help="Run no night: replay upstream NAME's first-parent history FROM..TO (default NAME: the first "
              "upstream), the rebase stage once per step, in a scratch folder, appending each step's night to the "
              "carry history; --max-steps bounds the steps (default 100).")
@click.option("--step", "every", type=click.IntRange(min=1), metavar="N",
              help="With --replay: one step every N upstream commits.")
@click.option("--daily", is_flag=True, help="With --replay: one step per day, the day's last commit (the default).")
@click.option("--plan-round", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="When the heads are red, run no search here: write its first round's plan to DIR/plan.json (the "
              "CI's matrix runs its steps: --run-step, then --collect).")
@click.option("--run-step", nargs=2, type=(click.Path(dir_okay=False, path_type=Path), click.IntRange(min=1)),
              metavar="PLAN K", help="Run no night: step K of the round's PLAN (plan.json), in scratch; its result "
              "and logs go to --step-out (default: PLAN's folder, steps/round-R-step-K/).")
@click.option("--step-out", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="With --run-step: where the step's result.json and logs go.")
@click.option("--collect", "collect_dir", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Run no night: take the round's step results in DIR/steps/ and write the next round's plan to "
              "DIR, or, when the search is over, the night's report (in --report) with it.")
@click.option("--final", is_flag=True, help="With --collect: the workflow runs no round after this one (the search "
              "stops here, saying how far it got).")
@click.option("--history", "history_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="With --replay: the carry history to append to (default: [dashboard] history, else "
              "history.jsonl in the --report folder).")
def command(ctx: Context, dry_run: bool, report_dir: Path | None, backend: str, image: str | None,
            base_image: str | None, devices: tuple[str, ...], timeout: float | None, max_steps: int | None,
            budget: float | None, runners: int | None, no_publish: bool, publish_saved: bool, released_pairs: bool,
            replay_range: str | None, every: int | None, daily: bool, plan_round: Path | None,
            run_step: tuple[Path, int] | None, step_out: Path | None, collect_dir: Path | None, final: bool,
            history_file: Path | None) -> int:
    """Rebase onto the upstream heads, build, verify and test the pair; report (markdown, JSON, GitHub)."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.commands.nightly_matrix import matrix_command
    from kpatch.nightly import run
    from kpatch.nightly.scroll import Limits
    from kpatch.nightly.stages import Settings

    if run_step is not None or collect_dir is not None:
        return matrix_command(ctx, run_step, step_out, collect_dir, final, report_dir,
                              given=[n for n, on in (("--replay", replay_range is not None), ("--plan-round",
                                     plan_round is not None), ("--publish-saved", publish_saved)) if on])
    if step_out is not None or final:
        raise UsageError(f"{'--step-out' if step_out is not None else '--final'} goes with "
                         f"{'--run-step' if step_out is not None else '--collect'}")

    if replay_range is None:
        given = [name for name, on in (("--step", every is not None), ("--daily", daily),
                                       ("--history", history_file is not None)) if on]
        if given:
            raise UsageError(f"{given[0]} goes with --replay FROM..TO")
    else:
        if publish_saved:
            raise UsageError("--replay runs no night and reports none: it does not go with --publish-saved")
        if every is not None and daily:
            raise UsageError("--step N and --daily are two ways to cut the replay: give one")
        return replay_command(ctx, replay_range, every, max_steps, history_file, report_dir)
    backend = chosen_backend(ctx.ui, backend, image, base_image)
    base = checked_base_image(backend, image, base_image)
    if no_publish and publish_saved:
        raise UsageError("--no-publish and --publish-saved are the two halves of a night: give one")
    if plan_round is not None and not no_publish:  # the night ends in --collect; --publish-saved reports it then
        raise UsageError("--plan-round goes with --no-publish: the night ends when '--collect' ends its search")
    ws = ctx.workspace()
    folder = (report_dir or ws.nightly_dir).resolve()
    settings = Settings(backend=backend, image=image, base_image=base, devices=devices, timeout=timeout)
    limits = Limits(max_steps=ws.stack.max_steps if max_steps is None else max_steps,
                    budget=ws.stack.budget if budget is None else budget,
                    runners=ws.stack.runners if runners is None else runners)
    options = run.Options(report_dir=folder, dry_run=dry_run, settings=settings, publish=not no_publish,
                          limits=limits, scroll=limits.max_steps > 0, released_pairs=released_pairs,
                          plan_round=plan_round.resolve() if plan_round is not None else None)
    if publish_saved:
        night = run.publish_saved_night(ws, ctx.ui, options)
    else:
        night = run.run_night(ws, ctx.ui, options, lambda stage, result: None if ctx.ui.json_mode else
                              show_stage(ctx.ui, ws.scratch_dir, stage, result))
    report = night.report
    failure = report.failure
    message = f"nightly failed at {failure.stage.value}: {failure.message}" if failure else ""
    if ctx.ui.json_mode:
        ctx.ui.result(report, exit_code=report.exit_code, message=message)
    else:
        show_night(ctx.ui, night)
    if failure is not None:
        ctx.ui.error(message, report.exit_code, final=False)
    return report.exit_code


def replay_command(ctx: Context, text: str, every: int | None, max_steps: int | None, history_file: Path | None,
                   report_dir: Path | None) -> int:
    """`kpatch nightly --replay`: the replayed nights, step by step, and what they would have cost."""
    from kpatch.dashboard import history
    from kpatch.dashboard.record import location
    from kpatch.nightly.replay import MAX_STEPS, parse_range, replay

    ws = ctx.workspace()
    span = parse_range(text, ws.stack)
    folder = (report_dir or ws.nightly_dir).resolve()
    path = (history_file or location(ws.stack, folder)).resolve()
    if path.is_dir():
        raise UsageError(f"--history {path}: a folder is there, not a file")
    history.check(path)  # one it cannot append to (a device, too big, not a history) is refused before any step
    done = replay(ws, ctx.ui, span, every=every, max_steps=MAX_STEPS if max_steps is None else max_steps,
                  path=path)
    if ctx.ui.json_mode:
        ctx.ui.result(done)
        return 0
    ui = ctx.ui
    ui.line(f"\n[bold]replay of {escape(done.upstream)} {done.since[:12]}..{done.until[:12]}[/]: {done.commits} "
            f"commit(s), {len(done.steps)} step(s) (one per {escape(done.per)})")
    for step in done.steps:
        mark = "[bold red]person[/]" if step.person else "[green]ok[/]    "
        ui.line(f"  {step.date[:10]} {step.commit[:12]} {mark} behind {step.behind:>4}  {escape(step.summary)}")
        for c in step.conflicts:
            why = f": culprit {c.culprit[:12]} \"{escape(c.culprit_subject or '')}\"" if c.culprit else ""
            ui.line(f"      conflict {escape(c.patch)}{why}")
    ui.line(f"nights a person would have been needed: {done.person_nights} of {len(done.steps)}; "
            f"{done.conflicts} conflict(s), {len(done.culprits)} culprit(s)")
    for culprit in done.culprits:
        ui.line(f"  culprit {culprit.sha[:12]} \"{escape(culprit.subject)}\": {culprit.nights} night(s), "
                f"{escape(', '.join(culprit.patches))}")
    ui.line(f"carry history: {escape(done.history)} ({done.records} record(s) written); draw it: kpatch report "
            f"--html DIR --history {escape(done.history)}")
    return 0


def show_stage(ui: UI, scratch: Path, _stage: Stage, result: object) -> None:
    """A stage's own result, as its command prints it (inside the stage's log group)."""
    from kpatch.engine.reports import RebaseResult
    from kpatch.testing.run import TestRun
    from kpatch.verify.run import VerifyResult
    from kpatch.wheels.build import BuildResult

    if isinstance(result, RebaseResult):
        show_rebase(ui, result, scratch)
    elif isinstance(result, BuildResult):
        show_build(ui, result)
    elif isinstance(result, VerifyResult):
        show_verify(ui, result)
    elif isinstance(result, TestRun):
        show_test(ui, result)
