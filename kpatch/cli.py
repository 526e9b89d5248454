"""The command line: click parsing and printing only. The one place that turns errors into exit codes."""

from __future__ import annotations

import functools
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from kpatch import __version__
from kpatch.errors import STORAGE_ERRNOS, ExitCode, KpatchError, StorageError, UsageError
from kpatch.output.ui import UI, columns, count, keep_log, setup_logging

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class CommonOptions:
    """The options every command takes."""

    config_path: Path | None
    cache_dir: Path | None
    workdir: Path | None
    urls: tuple[str, ...]
    command: str
    reads_only: bool = False  # its log file is written only if it fails


class Context:
    """What every command gets: the UI and, lazily, the workspace built from the shared options."""

    def __init__(self, ui: UI, options: CommonOptions) -> None:
        self.ui = ui
        self.options = options

    def workspace(self) -> Any:
        from kpatch import config
        from kpatch.project.workspace import Workspace

        found = self.options.config_path or config.find_config(Path.cwd())
        stack = config.load(found)
        overrides = config.parse_assignments(self.options.urls, "--url")
        stack = config.with_url_overrides(stack, overrides, os.environ)
        ws = Workspace.create(stack, self.options.cache_dir, self.options.workdir)
        self.ui.log_file = setup_logging(ws.log_dir, self.options.command, deferred=self.options.reads_only)
        return ws


# Commands that only read: a run that succeeds leaves no log file (export --check is one too).
READERS = frozenset({"status", "verify", "doctor", "report"})

# Commands registered by other modules, imported only when one of them runs or all are listed (`--help`).
_ELSEWHERE = {"build-wheels": "kpatch.cli_pair", "verify": "kpatch.cli_pair", "test": "kpatch.cli_pair",
              "nightly": "kpatch.cli_pair", "demo": "kpatch.cli_start", "doctor": "kpatch.cli_start",
              "report": "kpatch.cli_report"}


class KpatchCommand(click.Command):
    """Every command's --help ends with its example (kpatch/output/help.py, read only when help is shown)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.epilog is None:
            from kpatch.output.help import epilog

            self.epilog = epilog(self.name or "")
        super().format_epilog(ctx, formatter)


class KpatchGroup(click.Group):
    """click's group, but its own usage errors also come as the one `error:` line with exit code 2."""

    command_class = KpatchCommand

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _ELSEWHERE:
            importlib.import_module(_ELSEWHERE[cmd_name])
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(all_commands())

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        try:
            code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.UsageError as err:
            hint = f" (see '{_help_command(err.ctx)}')"
            UI(json_mode="--json" in argv).error(err.format_message() + hint, ExitCode.BAD_INPUT)
            sys.exit(int(ExitCode.BAD_INPUT))
        except click.exceptions.ClickException as err:
            UI(json_mode="--json" in argv).error(err.format_message(), err.exit_code)
            sys.exit(err.exit_code)
        except click.exceptions.Abort:
            UI().error("interrupted", ExitCode.INTERRUPTED)
            sys.exit(int(ExitCode.INTERRUPTED))
        sys.exit(code if isinstance(code, int) else 0)


def _help_command(ctx: click.Context | None) -> str:
    """The --help that explains a usage error: the command's own, or kpatch's when no command was recognised."""
    if ctx is None or ctx.parent is None or not ctx.command.name:
        return "kpatch --help"
    return f"kpatch {ctx.command.name} --help"


def output_options(func: F) -> F:
    """--quiet and --verbose, for every command."""
    func = click.option("-v", "--verbose", is_flag=True,
                        help="Also show the log's debug lines (git commands, docker steps) on stderr.")(func)
    return click.option("-q", "--quiet", is_flag=True, help="Only results and errors: no notes, no progress.")(func)


def kpatch_command(func: F) -> F:
    """Shared options (config, cache, workdir, URL overrides, --json) and the error boundary."""

    @click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
                  help="kpatch.toml (default: the nearest one, here or above).")
    @click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), envvar="KPATCH_CACHE_DIR",
                  help="Mirrors and logs (default: $XDG_CACHE_HOME/kpatch).")
    @click.option("--workdir", type=click.Path(file_okay=False, path_type=Path),
                  help="Worktrees (default: the last apply's, else ./work next to kpatch.toml).")
    @click.option("--url", "urls", multiple=True, metavar="NAME=URL", help="Fetch upstream NAME from URL instead.")
    @click.option("--json", "json_mode", is_flag=True, help="Print the result as JSON.")
    @output_options
    @functools.wraps(func)
    def wrapper(config_path: Path | None, cache_dir: Path | None, workdir: Path | None, urls: tuple[str, ...],
                json_mode: bool, quiet: bool, verbose: bool, **kwargs: Any) -> None:
        ui = UI(json_mode=json_mode, quiet=quiet, verbose=verbose)
        command = func.__name__.rstrip("_").replace("_", "-")
        options = CommonOptions(config_path=config_path, cache_dir=cache_dir, workdir=workdir, urls=urls,
                                command=command, reads_only=command in READERS or bool(kwargs.get("check")))
        sys.exit(guarded(ui, lambda: func(Context(ui, options), **kwargs)))

    return wrapper  # type: ignore[return-value]


def guarded(ui: UI, body: Callable[[], int | None]) -> int:
    """Run a command: kpatch's errors become their exit codes, Ctrl-C 130, anything else a crash log and 70."""
    from kpatch.procs import register_secrets

    register_secrets(os.environ)  # a secret-named variable's value never shows in output, logs or reports
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        code = int(body() or ExitCode.OK)
        if code:
            _keep_log(ui)
        return code
    except KpatchError as err:
        _keep_log(ui)
        ui.error(str(err), err.exit_code)
        tail = str(err).split("\n", 1)[1:] if "\n" in str(err) else []
        if tail:
            ui.detail(tail[0])
        if ui.log_file:
            ui.detail(f"log: {ui.log_file}")
        return int(err.exit_code)
    except KeyboardInterrupt:
        _keep_log(ui)
        ui.error("interrupted", ExitCode.INTERRUPTED)
        return int(ExitCode.INTERRUPTED)
    except OSError as err:
        _keep_log(ui)
        if err.errno not in STORAGE_ERRNOS:
            return _crash(ui)
        where = err.filename or "a file"
        failure = StorageError(f"cannot write {where}: {err.strerror or os.strerror(err.errno or 0)}")
        ui.error(str(failure), failure.exit_code)
        return int(failure.exit_code)
    except Exception:  # a bug: keep the evidence
        return _crash(ui)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _keep_log(ui: UI) -> None:
    """A command that failed keeps its log, a reader's too (written now from memory)."""
    if ui.log_file:
        ui.log_file = keep_log()


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _crash(ui: UI) -> int:
    """Write the traceback to a new crash log (never through a planted symlink) and say where it is."""
    import platform
    import tempfile
    import traceback

    _keep_log(ui)
    text = (f"{version_line()}, Python {platform.python_version()}, {platform.platform()}\n"
            f"argv: {sys.argv}\n\n{traceback.format_exc()}")
    folder = ui.log_file.parent if ui.log_file else Path(tempfile.gettempdir())
    try:
        fd, name = tempfile.mkstemp(prefix="kpatch-crash-", suffix=".log", dir=folder)  # O_EXCL, O_NOFOLLOW
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        where = f"details in {name}"
    except OSError:
        where = "no crash log could be written"
    ui.error(f"kpatch crashed (a bug); {where}", ExitCode.INTERNAL)
    return int(ExitCode.INTERNAL)


@click.group(cls=KpatchGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="\b\nNew here? The whole pipeline on example upstreams, then what this machine lacks:\n"
                    "  $ kpatch demo\n  $ kpatch doctor\n"
                    "Shell completion (bash; zsh_source and fish_source too):\n"
                    "  $ eval \"$(_KPATCH_COMPLETE=bash_source kpatch)\"")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=lambda ctx, _, value:
              _print_version(ctx, value), help="Show the version (and the commit, in a git checkout) and exit.")
def main() -> None:
    """Keep fixes as ordered patch stacks on their upstreams, kernels first."""


def version_line() -> str:
    """`kpatch 0.1.0`, and the commit when kpatch runs from a git checkout (read from .git, no git process)."""
    from kpatch.gitx.checkout import source_commit

    commit = source_commit()
    return f"kpatch {__version__}" + (f" (commit {commit[:12]})" if commit else "")


def _print_version(ctx: click.Context, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_line())
        ctx.exit()


def _assignments(values: tuple[str, ...], option: str) -> dict[str, str]:
    from kpatch.config import parse_assignments

    return parse_assignments(values, option)


@main.command("apply")
@click.option("--onto", multiple=True, metavar="NAME=REF", help="Apply NAME's stack onto REF instead of its base.")
@click.option("--continue", "continue_", is_flag=True, help="Go on after resolving a conflict (git add first).")
@click.option("--abort", is_flag=True, help="Put every worktree back as it was before the stopped apply.")
@click.option("--discard", is_flag=True, help="Move worktrees even if they hold commits not exported to patches/.")
@kpatch_command
def apply_(ctx: Context, onto: tuple[str, ...], continue_: bool, abort: bool, discard: bool) -> int:
    """Apply every stack onto its upstream, in dependency order."""
    from kpatch.commands import apply as cmd
    from kpatch.printers import print_apply

    if continue_ and abort or (continue_ or abort) and (onto or discard):
        raise UsageError("--continue and --abort go alone")
    onto_refs = _assignments(onto, "--onto")
    ws = ctx.workspace()
    if abort:
        restored = cmd.abort_apply(ws, ctx.ui)
        if ctx.ui.json_mode:
            ctx.ui.json({"restored": restored})
        return 0
    result = cmd.continue_apply(ws, ctx.ui) if continue_ else cmd.apply(ws, ctx.ui, onto_refs, discard=discard)
    if ctx.ui.json_mode:
        ctx.ui.json(result)
    else:
        print_apply(ctx.ui, result)
    return int(ExitCode.CONFLICT) if result.conflict else 0


@main.command("rebase")
@click.option("--onto", multiple=True, metavar="NAME=REF", help="Rebase NAME onto REF (default: its branch head).")
@click.option("--force", is_flag=True, help="Allow a new base that is not a descendant of the pinned one.")
@click.option("--continue", "continue_", is_flag=True, help="Go on after resolving a conflict (git add first).")
@click.option("--abort", is_flag=True, help="Drop the rebase; kpatch.toml and patches/ stay as they were.")
@click.option("--discard", is_flag=True, help="Move worktrees even if they hold commits not exported to patches/.")
@kpatch_command
def rebase_(ctx: Context, onto: tuple[str, ...], force: bool, continue_: bool, abort: bool, discard: bool) -> int:
    """Move every stack onto its upstream's new head, as one transaction: all stacks or none."""
    from kpatch.commands import rebase as cmd
    from kpatch.printers import print_rebase

    if continue_ and abort or (continue_ or abort) and (onto or force or discard):
        raise UsageError("--continue and --abort go alone")
    onto_refs = _assignments(onto, "--onto")
    ws = ctx.workspace()
    if abort:
        names = cmd.abort_rebase(ws, ctx.ui)
        if ctx.ui.json_mode:
            ctx.ui.json({"aborted": names})
        return 0
    if continue_:
        result = cmd.continue_rebase(ws, ctx.ui)
    else:
        result = cmd.rebase(ws, ctx.ui, onto_refs, force=force, discard=discard)
    if ctx.ui.json_mode:
        ctx.ui.json(result)
    else:
        print_rebase(ctx.ui, result, ws.scratch_dir, ws.stack.root)
    return int(ExitCode.CONFLICT) if result.conflict else 0


@main.command("export")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when a patch file or series is stale.")
@click.option("--continue", "continue_", is_flag=True, help="Finish an export that was interrupted.")
@click.option("--abort", is_flag=True, help="Undo an export that was interrupted: every file as it was.")
@kpatch_command
def export_(ctx: Context, names: tuple[str, ...], check: bool, continue_: bool, abort: bool) -> int:
    """Regenerate patch files and series from the worktree commits."""
    from kpatch.commands import export as cmd

    if sum((check, continue_, abort)) > 1 or (continue_ or abort) and names:
        raise UsageError("--check, --continue and --abort go alone")
    ws = ctx.workspace()
    if abort:
        cmd.abort_export(ws, ctx.ui)
        ctx.ui.note("export aborted: patches/ as it was")
        return 0
    result = cmd.continue_export(ws, ctx.ui) if continue_ else cmd.export(ws, ctx.ui, names, check=check)
    if ctx.ui.json_mode:
        ctx.ui.json({"written": result.written and bool(result.stale), "files": result.files})  # a file changed
    else:
        for line in columns([[change.change.value, str(change.path)] for change in result.stale]):
            ctx.ui.plain(line)
        ctx.ui.note(f"{count(len(result.stale), 'file')} {'stale' if check else 'written'}")
    return int(ExitCode.CONFLICT) if check and result.stale else 0


@main.command("status")
@kpatch_command
def status_(ctx: Context) -> int:
    """Show each upstream, its pin and mirror, and the state of every patch."""
    from kpatch.commands import status as cmd
    from kpatch.printers import print_status

    result = cmd.status(ctx.workspace(), ctx.ui)
    if ctx.ui.json_mode:
        ctx.ui.json(result)
    else:
        print_status(ctx.ui, result)
    return 0


def all_commands() -> dict[str, click.Command]:
    """Every command by name, those registered elsewhere included."""
    for module in sorted(set(_ELSEWHERE.values())):
        importlib.import_module(module)
    return dict(main.commands)
