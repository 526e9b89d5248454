"""The command line: click parsing and printing only. The one place that turns errors into exit codes."""

from __future__ import annotations

import functools
import os
import platform
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from kpatch import __version__, config
from kpatch.errors import ExitCode, KpatchError, UsageError
from kpatch.ui import UI, escape, setup_logging
from kpatch.workspace import Workspace

F = TypeVar("F", bound=Callable[..., Any])


class Context:
    """What every command gets: the UI and, lazily, the workspace built from the shared options."""

    def __init__(self, ui: UI, options: dict[str, Any]) -> None:
        self.ui = ui
        self.options = options

    def workspace(self) -> Workspace:
        path = Path(self.options["config_path"]) if self.options["config_path"] else config.find_config(Path.cwd())
        stack = config.load(path)
        overrides = config.parse_assignments(self.options["urls"], "--url")
        stack = config.with_url_overrides(stack, overrides, os.environ)
        cache = Path(self.options["cache_dir"]) if self.options["cache_dir"] else None
        workdir = Path(self.options["workdir"]) if self.options["workdir"] else None
        ws = Workspace.create(stack, cache, workdir)
        self.ui.log_file = setup_logging(ws.log_dir, self.options["command"])
        return ws


def kpatch_command(func: F) -> F:
    """Shared options (config, cache, workdir, URL overrides, --json) and the error boundary."""

    @click.option("--config", "config_path", type=click.Path(dir_okay=False), help="kpatch.toml (default: nearest).")
    @click.option("--cache-dir", type=click.Path(file_okay=False), envvar="KPATCH_CACHE_DIR",
                  help="Mirrors and logs (default: $XDG_CACHE_HOME/kpatch).")
    @click.option("--workdir", type=click.Path(file_okay=False),
                  help="Worktrees (default: ./work next to kpatch.toml).")
    @click.option("--url", "urls", multiple=True, metavar="NAME=URL", help="Fetch upstream NAME from URL instead.")
    @click.option("--json", "json_mode", is_flag=True, help="Print the result as JSON.")
    @functools.wraps(func)
    def wrapper(config_path: str | None, cache_dir: str | None, workdir: str | None, urls: tuple[str, ...],
                json_mode: bool, **kwargs: Any) -> None:
        ui = UI(json_mode=json_mode)
        ctx = Context(ui, {"config_path": config_path, "cache_dir": cache_dir, "workdir": workdir, "urls": urls,
                           "command": func.__name__.rstrip("_")})
        sys.exit(_guarded(ui, lambda: func(ctx, **kwargs)))

    return wrapper  # type: ignore[return-value]


def _guarded(ui: UI, body: Callable[[], int | None]) -> int:
    try:
        return int(body() or ExitCode.OK)
    except KpatchError as err:
        ui.error(str(err))
        if ui.log_file:
            ui.err.print(f"log: {ui.log_file}", markup=False)
        return int(err.exit_code)
    except KeyboardInterrupt:
        ui.error("interrupted")
        return int(ExitCode.INTERRUPTED)
    except Exception:  # a bug: keep the evidence
        crash = Path(os.environ.get("TMPDIR", "/tmp")) / f"kpatch-crash-{os.getpid()}.log"
        crash.write_text(f"kpatch {__version__}, Python {platform.python_version()}, {platform.platform()}\n"
                         f"argv: {sys.argv}\n\n{traceback.format_exc()}", encoding="utf-8")
        ui.error(f"kpatch crashed (a bug); details in {crash}")
        return int(ExitCode.INTERNAL)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kpatch")
def main() -> None:
    """Keep fixes as ordered patch stacks on their upstreams, kernels first."""


@main.command("apply")
@click.option("--onto", multiple=True, metavar="NAME=REF", help="Apply NAME's stack onto REF instead of its base.")
@click.option("--continue", "continue_", is_flag=True, help="Go on after resolving a conflict (git add first).")
@click.option("--abort", is_flag=True, help="Put every worktree back as it was before the stopped apply.")
@kpatch_command
def apply_(ctx: Context, onto: tuple[str, ...], continue_: bool, abort: bool) -> int:
    """Apply every stack onto its upstream, in dependency order."""
    from kpatch.commands import apply as cmd

    if continue_ and abort or (continue_ or abort) and onto:
        raise UsageError("--continue, --abort and --onto go alone")
    ws = ctx.workspace()
    if abort:
        restored = cmd.abort_apply(ws, ctx.ui)
        if ctx.ui.json_mode:
            ctx.ui.json({"restored": restored})
        return 0
    if continue_:
        result = cmd.continue_apply(ws, ctx.ui)
    else:
        result = cmd.apply(ws, ctx.ui, config.parse_assignments(onto, "--onto"))
    if ctx.ui.json_mode:
        ctx.ui.json(result)
    else:
        _print_apply(ctx.ui, result)
    return int(ExitCode.CONFLICT) if result.conflict else 0


@main.command("rebase")
@click.option("--onto", multiple=True, metavar="NAME=REF", help="Rebase NAME onto REF (default: its branch head).")
@click.option("--force", is_flag=True, help="Allow a new base that is not a descendant of the pinned one.")
@click.option("--continue", "continue_", is_flag=True, help="Go on after resolving a conflict (git add first).")
@click.option("--abort", is_flag=True, help="Drop the rebase; kpatch.toml and patches/ stay as they were.")
@kpatch_command
def rebase_(ctx: Context, onto: tuple[str, ...], force: bool, continue_: bool, abort: bool) -> int:
    """Move every stack onto its upstream's new head, as one transaction: all stacks or none."""
    from kpatch.commands import rebase as cmd

    if continue_ and abort or (continue_ or abort) and (onto or force):
        raise UsageError("--continue and --abort go alone")
    ws = ctx.workspace()
    if abort:
        names = cmd.abort_rebase(ws, ctx.ui)
        if ctx.ui.json_mode:
            ctx.ui.json({"aborted": names})
        return 0
    if continue_:
        result = cmd.continue_rebase(ws, ctx.ui)
    else:
        result = cmd.rebase(ws, ctx.ui, config.parse_assignments(onto, "--onto"), force=force)
    if ctx.ui.json_mode:
        ctx.ui.json({"committed": result.committed, "github": result.github, "stacks": result.stacks})
    else:
        _print_rebase(ctx.ui, result)
    return int(ExitCode.CONFLICT) if result.conflict else 0


@main.command("build-wheels")
@click.option("--backend", type=click.Choice(["docker", "local"]), default="docker", show_default=True,
              help="docker: the engine (local, or DOCKER_HOST); local: this host (with oneAPI installed).")
@click.option("--image", metavar="REF", help="Build in this existing image instead of building docker/Dockerfile.")
@click.option("--base-image", metavar="REF", help="BASE_IMAGE for docker/Dockerfile (default: Intel oneAPI).")
@click.option("--out", type=click.Path(file_okay=False),
              help="Where the wheel pair and pylock.toml go (default: dist/ next to kpatch.toml).")
@kpatch_command
def build_wheels_(ctx: Context, backend: str, image: str | None, base_image: str | None, out: str | None) -> int:
    """Build the kernels wheel, then vLLM against exactly it; write the pair's pylock.toml."""
    from kpatch.commands import build_wheels as cmd

    if image and base_image or backend == "local" and (image or base_image):
        raise UsageError("--image and --base-image go alone, and only with --backend docker")
    ws = ctx.workspace()
    result = cmd.build_wheels(ws, ctx.ui, backend=backend, image=image, base_image=base_image,
                              out=Path(out).resolve() if out else ws.stack.root / "dist")
    if ctx.ui.json_mode:
        ctx.ui.json(result)
        return 0
    for wheel in result.wheels:
        ctx.ui.line(f"{escape(wheel.upstream):<20} {'cached' if wheel.cached else 'built':<7} {escape(wheel.filename)}")
    ctx.ui.line(f"lock: {result.lock} (image {escape(result.image)} {result.image_digest[:19]}; "
                f"{result.containers} build container(s) started)")
    return 0


@main.command("test")
@click.option("--upstream", "names", multiple=True, metavar="NAME", help="Only NAME's tests (default: every suite).")
@click.option("--device", "devices", multiple=True, metavar="PATH",
              help="Pass this device (HOST[:CONTAINER]) instead of /dev/dri; repeatable.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="Stop a suite after S seconds (default: its [upstream.test] timeout).")
@click.option("--lock", "lock_path", type=click.Path(dir_okay=False),
              help="The pair's lock (default: dist/pylock.toml next to kpatch.toml).")
@click.option("--reports", type=click.Path(file_okay=False),
              help="Where JUnit XML and logs go (default: reports/ next to kpatch.toml).")
@kpatch_command
def test_(ctx: Context, names: tuple[str, ...], devices: tuple[str, ...], timeout: float | None,
          lock_path: str | None, reports: str | None) -> int:
    """Run each upstream's tests in the build image, with the locked pair installed from its lock."""
    from kpatch.commands import test as cmd

    result = cmd.test(ctx.workspace(), ctx.ui, names=names, devices=devices, timeout=timeout,
                      lock=Path(lock_path).resolve() if lock_path else None,
                      reports=Path(reports).resolve() if reports else None)
    if ctx.ui.json_mode:
        ctx.ui.json(result)
    else:
        _print_test(ctx.ui, result)
    for suite in result.suites:
        if suite.message:
            ctx.ui.error(f"{suite.upstream}: {suite.message}")
    return int(result.exit_code)


@main.command("export")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when a patch file or series is stale.")
@kpatch_command
def export_(ctx: Context, names: tuple[str, ...], check: bool) -> int:
    """Regenerate patch files and series from the worktree commits."""
    from kpatch.commands import export as cmd

    result = cmd.export(ctx.workspace(), ctx.ui, names, check=check)
    if ctx.ui.json_mode:
        ctx.ui.json({"written": result.written, "files": result.files})
    else:
        for change in result.stale:
            ctx.ui.line(f"{change.change.value:>9}  {change.path}")
        ctx.ui.note(f"{len(result.stale)} file(s) {'stale' if check else 'written'}")
    return int(ExitCode.CONFLICT) if check and result.stale else 0


@main.command("status")
@kpatch_command
def status_(ctx: Context) -> int:
    """Show each upstream, its pin and mirror, and the state of every patch."""
    from kpatch.commands import status as cmd

    reports = cmd.status(ctx.workspace(), ctx.ui)
    if ctx.ui.json_mode:
        ctx.ui.json({"upstreams": reports})
    else:
        _print_status(ctx.ui, reports)
    return 0




@main.command("demo")
@click.option("--dir", "folder", type=click.Path(file_okay=False), help="Where to build it (default: a new temp dir).")
@click.option("--json", "json_mode", is_flag=True, help="Print the result as JSON.")
def demo_(folder: str | None, json_mode: bool) -> None:
    """Run apply, status and export --check on example upstreams kpatch builds itself (offline)."""
    import tempfile

    from kpatch.commands import demo as cmd

    ui = UI(json_mode=json_mode)

    def body() -> int:
        where = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="kpatch-demo-"))
        result = cmd.demo(where.resolve(), ui)
        if ui.json_mode:
            ui.json(result)
        else:
            _print_apply(ui, result.applied)
            _print_status(ui, result.status)
            stale = len(result.export_check.stale)
            ui.line(f"export --check: {'byte-identical' if not stale else f'{stale} stale file(s)'}")
            ui.line(f"demo {'passed' if result.ok else 'FAILED'}; everything is in {result.folder}")
        return 0 if result.ok else int(ExitCode.CONFLICT)

    sys.exit(_guarded(ui, body))


def _print_status(ui: UI, reports: Any) -> None:
    from rich.table import Table

    for report in reports:
        behind = "?" if report.behind is None else str(report.behind)
        ui.line(f"[bold]{escape(report.name)}[/]  {escape(report.url)} ({escape(report.branch)})")
        ui.line(f"  base {escape(report.base)} = {report.base_commit or 'unresolved (no mirror yet)'}; "
                f"mirror head {report.mirror_head or '-'}; {behind} commits behind")
        table = Table("#", "patch", "state", "upstream", "PR", "requires", box=None, pad_edge=False)
        for index, patch in enumerate(report.patches, start=1):
            table.add_row(str(index), escape(patch.name), patch.state.value, patch.upstream_status or "-",
                          ", ".join(patch.upstream_prs) or "-", ", ".join(patch.requires) or "-")
        ui.table(table)
        if report.unexported:
            ui.line(f"  {report.unexported} worktree commit(s) not in the patch files: run 'kpatch export'")


def _print_test(ui: UI, result: Any) -> None:
    from rich.table import Table

    table = Table("upstream", "outcome", "passed", "failed", "errors", "skipped", "time", box=None, pad_edge=False)
    for suite in result.suites:
        c = suite.counts
        numbers = [str(n) for n in (c.passed, c.failed, c.errors, c.skipped)] if c else ["-"] * 4
        style = {"passed": "green", "no-device": "yellow"}.get(suite.outcome.value, "red")
        table.add_row(escape(suite.upstream), f"[{style}]{suite.outcome.value}[/]", *numbers, f"{suite.seconds:.1f} s")
    ui.table(table)
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


def _print_rebase(ui: UI, result: Any) -> None:
    from rich.table import Table

    for stack in result.stacks:
        moved = f"{stack.old_base[:12]} -> {stack.new_base[:12]}"
        ui.line(f"[bold]{escape(stack.name)}[/]  {moved}  ({stack.outcome.value})")
        table = Table("patch", "class", "why", box=None, pad_edge=False)
        for patch in stack.patches:
            why = patch.why
            if patch.culprit:
                c = patch.culprit
                why = (f"broken by {c.sha[:12]} \"{c.subject}\" ({c.author}, {c.date}); "
                       f"found in {c.trials} trial applies over {c.commits} commits")
            if patch.hunks:
                why += " [" + ", ".join(p + (f":{line}" if line else "") for p, line in patch.hunks) + "]"
            table.add_row(escape(patch.name), patch.klass.value, escape(why))
        ui.table(table)
    if result.github:
        ui.line(f"note: {escape(result.github)}")
    if result.conflict:
        ui.error(f"patch {result.conflict.name} conflicts: nothing was written to kpatch.toml or patches/")
        ui.err.print("  resolve it in work/.rebase/<name>, 'git add', then 'kpatch rebase --continue' "
                     "(or 'kpatch rebase --abort')")
    elif result.committed:
        ui.line("kpatch.toml and patches/ updated; review with 'git diff'")


def _print_apply(ui: UI, result: Any) -> None:
    for stack in result.stacks:
        head = stack.head[:12] if stack.head else "-"
        ui.line(f"{escape(stack.upstream):<20} {stack.outcome.value:<9} {stack.applied}/{stack.total} patches "
                f"on {stack.base[:12]} -> {head}  {escape(str(stack.worktree))}")
    conflict = result.conflict
    if conflict:
        ui.error(f"{conflict.upstream}: patch {conflict.patch} does not apply in {conflict.worktree}")
        for hunk in conflict.hunks:
            ui.err.print(f"  {escape(hunk.path)}" + (f":{hunk.line}" if hunk.line else ""), markup=True)
        if conflict.blocked:
            ui.err.print(f"  not applied (they require {escape(conflict.upstream)}): {', '.join(conflict.blocked)}")
        ui.err.print("  fix the files, 'git add' them, then 'kpatch apply --continue' (or 'kpatch apply --abort')")
