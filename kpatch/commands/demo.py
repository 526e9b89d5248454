"""`kpatch demo`: the whole pipeline on example upstreams kpatch builds itself, offline, in a folder of its own."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import click

from kpatch.commands._common import KpatchCommand, make_ui, output_options, start_log
from kpatch.commands._views import show_apply, show_rebase, show_test, show_verify
from kpatch.errors import UsageError
from kpatch.output.ui import UI, columns, escape, to_jsonable

if TYPE_CHECKING:
    from kpatch.demo.lines import ReleaseLine
    from kpatch.demo.pipeline import DemoResult, Step


@click.command("demo", cls=KpatchCommand)
@click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path),
              help="Build it in this new or empty folder, and keep it (default: a temp folder).")
@click.option("--keep", is_flag=True, help="Keep the temp folder (default: removed when the demo ends).")
@click.option("--adopt", is_flag=True,
              help="The second, short demo: a fork branch and a quilt folder adopted into an empty project (init, "
              "import, apply); builds nothing.")
@click.option("--scroll", is_flag=True,
              help="The scrolling demo: a planted test break three commits into the app's new day; one night "
              "bisects to the last green commit and names the culprit.")
@click.option("--runners", type=click.IntRange(min=1), metavar="N",
              help="With --scroll: the night's search tries N commits at once per round, on N local worker "
              "processes (default 1: a bisection).")
@click.option("--backend", type=click.Choice(["auto", "docker", "local"]), default="auto", show_default=True,
              help="auto: the Docker engine if it answers and has a base image, else this host.")
@click.option("--base-image", metavar="REF", envvar="KPATCH_BASE_IMAGE",
              help="A local image with python3, pip and setuptools to build on (default: $KPATCH_BASE_IMAGE, else "
              "kpatch-test-base:bookworm, else the oneAPI image, if the engine has one; never pulled).")
@output_options
def command(folder: Path | None, keep: bool, adopt: bool, scroll: bool, runners: int | None, backend: str,
            base_image: str | None, json_mode: bool, quiet: bool, verbose: bool) -> int:
    """Run the whole pipeline on example upstreams kpatch builds itself, offline: apply, an upstream that moved,
    rebase (a merged patch dropped, a conflict resolved by a recorded resolution), build-wheels, verify, test.
    With --adopt: a kernels fork branch and the app's quilt folder become a new project's stacks. With --scroll: a
    red night scrolls to the last green upstream commit."""
    # imported where used: the work loads when the command runs, not for its --help
    from kpatch.demo.pipeline import choose_backend, demo
    from kpatch.project.places import default_cache_dir

    ui = make_ui("demo", json_mode, quiet, verbose)
    if adopt and scroll:
        raise UsageError("--adopt and --scroll are two demos: give one")
    if runners is not None and not scroll:
        raise UsageError("--runners goes with --scroll (the scrolling demo's search)")
    if adopt:
        return adopt_demo(ui, folder, keep)
    source = click.get_current_context().get_parameter_source("base_image")
    image = None if backend == "local" and source is click.core.ParameterSource.ENVIRONMENT else base_image
    choice = choose_backend(backend, image)
    if not ui.json_mode and not ui.quiet:
        ui.line(f"[bold]backend:[/] {choice.backend.value} ({choice.why})")

    def on_step(step: Step, result: Any) -> None:
        if not ui.json_mode and not ui.quiet:  # --quiet: the summary alone
            show_step(ui, step, result)

    # The log goes to the usual cache, so the path an error names still exists after the demo's folder is removed.
    start_log(ui, default_cache_dir() / "logs", "demo")
    if scroll:
        from kpatch.demo.scrolling import demo_scroll

        scrolled = demo_scroll(folder, ui, choice, keep=keep, on_step=on_step, runners=runners or 1)
        return finish(ui, scrolled, "scrolling demo")
    result = demo(folder, ui, choice, keep=keep, on_step=on_step)
    if ui.json_mode:
        failed = next((s for s in result.steps if not s.ok), None)
        ui.result({"log": str(ui.log_file) if ui.log_file else None, **to_jsonable(result)},
                  exit_code=result.exit_code, message=(failed and f"demo failed at {failed.name}: {failed.summary}")
                  or "")
    else:
        show(ui, result)
    return result.exit_code


def adopt_demo(ui: UI, folder: Path | None, keep: bool) -> int:
    """`kpatch demo --adopt`: init, import (a fork branch, a quilt folder) and apply in an empty project."""
    from kpatch.demo.adoption import demo_adopt
    from kpatch.project.places import default_cache_dir

    context = click.get_current_context()
    given = [f"--{n.replace('_', '-')}" for n in ("backend", "base_image")
             if context.get_parameter_source(n) is click.core.ParameterSource.COMMANDLINE]
    if given:
        raise UsageError(f"{given[0]} does not go with --adopt: the adoption demo builds nothing")

    def on_step(step: Step, result: Any) -> None:
        if not ui.json_mode and not ui.quiet:
            show_step(ui, step, result)

    start_log(ui, default_cache_dir() / "logs", "demo")
    return finish(ui, demo_adopt(folder, ui, keep=keep, on_step=on_step), "adoption demo")


class _Demo(Protocol):
    """A second demo's result (--adopt, --scroll): its steps, where it ran, how long it took."""

    @property
    def steps(self) -> tuple[Step, ...]: ...
    @property
    def folder(self) -> Path: ...
    @property
    def kept(self) -> bool: ...
    @property
    def seconds(self) -> float: ...
    @property
    def exit_code(self) -> int: ...


def finish(ui: UI, result: _Demo, title: str) -> int:
    """A second demo's end: its JSON envelope, or the summary of its steps as the main demo prints it."""
    failed = next((s for s in result.steps if not s.ok), None)
    if ui.json_mode:
        ui.result({"log": str(ui.log_file) if ui.log_file else None, **to_jsonable(result)},
                  exit_code=result.exit_code, message=(failed and f"demo failed at {failed.name}: {failed.summary}")
                  or "")
        return result.exit_code
    ui.line("\n[bold]summary[/]")
    for line in columns([[s.name, "ok" if s.ok else "FAILED", f"{s.seconds:.1f} s", s.summary] for s in result.steps],
                        indent="  "):
        ui.plain(line)
    report = getattr(result, "report", None)
    if result.kept:  # only what is still there is named: a removed folder's files are not
        if report is not None:
            ui.plain(f"  the night's report: {report}")
        ui.plain(f"  everything is in {result.folder}; look around: cd {result.folder / 'project'} && "
                 f"export KPATCH_CACHE_DIR={result.folder / 'cache'} && kpatch status")
    else:
        flag = "--adopt" if title.startswith("adoption") else "--scroll"
        held = " (the night's report with it)" if report is not None else ""
        ui.plain(f"  {result.folder} was removed with all of it{held}: 'kpatch demo {flag} --keep' keeps it")
    if failed is not None:
        ui.plain(f"  {failed.name} failed: {failed.summary}")
        for line in failed.detail:
            ui.plain(f"    {line}")
        ui.plain(f"  log: {ui.log_file}" if ui.log_file else "  log: none could be written")
    verdict = "[green]passed[/]" if failed is None else f"[bold red]FAILED[/] at {failed.name}"
    ui.line(f"{title} {verdict} in {result.seconds:.1f} s")
    return result.exit_code


def show_step(ui: UI, step: Step, result: object) -> None:
    """One demo step as it ends: a header line, then the step's own output as the command prints it."""
    from kpatch.adopt.branch import ImportResult
    from kpatch.adopt.init import InitResult
    from kpatch.dashboard.night import Report
    from kpatch.demo.adoption import FORK_BRANCH, Carried
    from kpatch.demo.lines import ReleaseLine
    from kpatch.engine.apply import ApplyResult
    from kpatch.engine.reports import RebaseResult
    from kpatch.examples.moves import UpstreamMove
    from kpatch.testing.run import TestRun
    from kpatch.verify.run import VerifyResult
    from kpatch.wheels.build import BuildResult

    mark = "[green]ok[/]" if step.ok else "[bold red]FAILED[/]"
    ui.line(f"\n[bold]== {escape(step.name)}[/] {mark} ({step.seconds:.1f} s): {escape(step.summary)}")
    for line in step.detail:
        ui.plain(f"  {line}")
    if isinstance(result, ApplyResult):
        show_apply(ui, result)
    elif isinstance(result, tuple) and result and isinstance(result[0], UpstreamMove):
        for move in result:
            ui.plain(f"  {move.upstream}: {move.commit[:12]} \"{move.subject}\": {move.effect}")
    elif isinstance(result, RebaseResult):
        show_rebase(ui, result, Path("work/.rebase"))
    elif isinstance(result, BuildResult):
        for wheel in result.wheels:
            ui.plain(f"  {wheel.upstream:<8} {'cached' if wheel.cached else 'built':<6} {wheel.filename}")
    elif isinstance(result, VerifyResult):
        show_verify(ui, result)
    elif isinstance(result, TestRun):
        show_test(ui, result)
    elif isinstance(result, ReleaseLine):
        show_release_line(ui, result)
    elif isinstance(result, Carried):
        ui.plain(f"  the fork:         {result.fork} (branch {FORK_BRANCH})")
        ui.plain(f"  the quilt folder: {result.quilt}")
    elif isinstance(result, InitResult):
        for path in result.written:
            ui.plain(f"  wrote {path.relative_to(result.root)}")
    elif isinstance(result, ImportResult):
        for path in result.files:
            ui.plain(f"  wrote patches/{result.name}/{path.name}")
    elif isinstance(result, Report):
        ui.plain(f"  the night: {escape(result.summary)}")
        for found in (result.scroll.steps if result.scroll else ()):
            ui.plain(f"  step {found.upstream} {found.commit[:12]} \"{escape(found.subject)}\": {found.result.value}"
                     f" ({found.seconds:.1f} s, round {found.round}, {escape(found.where)})")
        culprit = result.scroll.culprit if result.scroll else None
        if culprit is not None:
            ui.plain(f"  culprit: {culprit.commit[:12]} \"{escape(culprit.subject)}\" by {escape(culprit.author)}: "
                     + escape("; ".join(culprit.failing) or culprit.message))


def show_release_line(ui: UI, result: ReleaseLine) -> None:
    """The release-line step as a person would type it: the cut, the tables, the line's stacks, then apply, backport
    and status --lines with what each prints."""
    from kpatch.commands.backport import show as show_backport
    from kpatch.commands.status import show_matrix

    for cut in result.cuts:
        ui.plain(f"  {cut.upstream}: branch {result.branch} and tag {cut.tag} at {cut.commit[:12]}, an older commit "
                 "of main")
    tables = ", ".join(f'[line."{result.line}".{name}]' for name, _ in result.bases)
    ui.plain(f"  kpatch.toml: {tables}, branch {result.branch}, base "
             f"{', '.join(sorted({base for _, base in result.bases}))}")
    ui.plain(f"  the line's stacks, what the release carries (the kimi op upstream merged on main after the cut): "
             f"{', '.join(result.carried)} in patches/{result.line}/")
    ui.plain(f"  $ kpatch apply --line {result.line}")
    show_apply(ui, result.applied)
    ui.plain(f"  $ kpatch backport {result.picked} --to {result.line}")
    show_backport(ui, result.backport)
    ui.plain(f"  $ kpatch apply --line {result.line}")
    show_apply(ui, result.reapplied)
    ui.plain("  $ kpatch status --lines")
    show_matrix(ui, result.matrix)


def show(ui: UI, result: DemoResult) -> None:
    """What happened, how long each step took, and where the wheels and the lock are (or that they went away)."""
    ui.line("\n[bold]summary[/]")
    for line in columns([[s.name, "ok" if s.ok else "FAILED", f"{s.seconds:.1f} s", s.summary] for s in result.steps],
                        indent="  "):
        ui.plain(line)
    ui.plain(f"  backend: {result.backend.backend.value} ({result.backend.why})")
    if result.wheels:
        ui.plain(f"  wheels:  {', '.join(w.name for w in result.wheels)}")
    if result.kept:  # only what is still there is named: a removed folder's lock is not
        if result.lock:
            ui.plain(f"  lock:    {result.lock}")
        ui.plain(f"  everything is in {result.folder}; look around: cd {result.folder / 'project'} && "
                 f"export KPATCH_CACHE_DIR={result.folder / 'cache'} && kpatch status")
    else:
        held = " (the worktrees, the wheels and their lock, the reports)" if result.lock else ""
        ui.plain(f"  {result.folder} was removed with all of it{held}: 'kpatch demo --keep' or "
                 "'kpatch demo --dir DIR' keeps it")
    failed = next((s for s in result.steps if not s.ok), None)
    if failed is not None:  # the cause where it is reported: the error's own lines, then where the whole log is
        ui.plain(f"  {failed.name} failed: {failed.summary}")
        for line in failed.detail:
            ui.plain(f"    {line}")
        ui.plain(f"  log: {ui.log_file}" if ui.log_file else "  log: none could be written")
    verdict = "[green]passed[/]" if failed is None else f"[bold red]FAILED[/] at {failed.name}"
    ui.line(f"demo {verdict} in {result.seconds:.1f} s")
