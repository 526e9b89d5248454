"""The command line: the click group of the commands in kpatch/commands/ (each imported when it runs), the one
error boundary that turns errors into exit codes, and --version."""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from kpatch import __version__
from kpatch.errors import STORAGE_ERRNOS, ExitCode, KpatchError, StorageError
from kpatch.output.runlog import keep_log
from kpatch.output.ui import UI

# Every command, by name: its module in kpatch/commands/, imported only when it runs or all are listed (`--help`).
COMMANDS = {"apply": "apply", "rebase": "rebase", "export": "export", "status": "status",
            "build-wheels": "build_wheels", "verify": "verify", "test": "test", "nightly": "nightly",
            "demo": "demo", "doctor": "doctor", "init": "init", "import": "import_",
            "report": "report", "propose": "propose", "release": "release", "diff": "diff",
            "backport": "backport"}


class KpatchGroup(click.Group):
    """click's group with the commands of kpatch/commands/, loaded lazily; the one error boundary (`guarded`),
    and its own usage errors also come as the one `error:` line with exit code 2."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module = importlib.import_module(f"kpatch.commands.{COMMANDS[cmd_name]}")
            self.add_command(module.command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        """click's, and `kpatch --help | head -1` ends as a closed pipe does (click's own answer is exit 1)."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except BrokenPipeError:
            _closed_pipe()

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                             list[str]]:
        """click's, and a misspelt command gets the nearest one (`kpatch stauts`: did you mean 'status'?)."""
        name = click.utils.make_str(args[0]) if args else ""
        if args and not name.startswith("-") and self.get_command(ctx, name) is None:
            # imported where used: only on the path that needs it (an error, a crash, --version)
            from kpatch.config.tables import nearest

            close = nearest(name, frozenset(COMMANDS))
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {close!r}?")
        return super().resolve_command(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:  # noqa: ARG002  # click.Group's signature
        return sorted(COMMANDS)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command inside the boundary; its errors are reported through the UI it made (--json too)."""
        from kpatch.commands._common import UI_KEY

        return guarded(lambda: ctx.meta.get(UI_KEY) or UI(), lambda: super(KpatchGroup, self).invoke(ctx))

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None,
             standalone_mode: bool = True,  # noqa: ARG002  # click's signature; kpatch runs it non-standalone below
             **extra: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        try:
            sys.exit(self._run(argv, prog_name, complete_var, **extra))
        except BrokenPipeError:  # telling a usage error to a reader that went away
            _closed_pipe()

    def _run(self, argv: list[str], prog_name: str | None, complete_var: str | None, **extra: Any) -> int:
        try:
            code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.UsageError as err:
            hint = f" (see '{_help_command(err.ctx)}')"
            _usage_ui(err.ctx, argv).error(err.format_message() + hint, ExitCode.BAD_INPUT)
            return int(ExitCode.BAD_INPUT)
        except click.exceptions.ClickException as err:
            _usage_ui(None, argv).error(err.format_message(), err.exit_code)
            return err.exit_code
        except click.exceptions.Abort:
            UI().error("interrupted", ExitCode.INTERRUPTED)
            return int(ExitCode.INTERRUPTED)
        return code if isinstance(code, int) else 0


def _usage_ui(ctx: click.Context | None, argv: list[str]) -> UI:
    """The UI for an error click found before the command ran: JSON if --json was given, naming the command."""
    name = ctx.command.name if ctx is not None and ctx.parent is not None and ctx.command.name else None
    name = name or next((arg for arg in argv if arg in COMMANDS), "kpatch")
    return UI(json_mode="--json" in argv, command=name)


def _help_command(ctx: click.Context | None) -> str:
    """The --help that explains a usage error: the command's own, or kpatch's when no command was recognised."""
    if ctx is None or ctx.parent is None or not ctx.command.name:
        return "kpatch --help"
    return f"kpatch {ctx.command.name} --help"


def guarded(where: UI | Callable[[], UI], body: Callable[[], int | None]) -> int:
    """Run a command: kpatch's errors become their exit codes, Ctrl-C 130, anything else a crash log and 70; a
    reader that went away (`| head -1`, while the command ran or while its error was told) ends it quietly.
    `where`: the UI that reports them, or how to find it (the command makes its own once its options are read)."""
    try:
        return _guarded(where, body)
    except BrokenPipeError:
        _closed_pipe()


def _guarded(where: UI | Callable[[], UI], body: Callable[[], int | None]) -> int:
    from kpatch.procs import register_secrets

    def ui() -> UI:
        return where if isinstance(where, UI) else where()

    register_secrets(os.environ)  # a secret-named variable's value never shows in output, logs or reports
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        code = int(body() or ExitCode.OK)
        if code:
            _keep_log(ui())
        return code
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise  # usage errors: the group's main reports them
    except KpatchError as err:
        return _failed(ui(), err)
    except KeyboardInterrupt:
        _keep_log(ui())
        ui().error("interrupted", ExitCode.INTERRUPTED)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        raise  # the reader went away: no crash (guarded ends it quietly)
    except OSError as err:
        if err.errno not in STORAGE_ERRNOS:
            return _crash(ui())
        name = err.filename or "a file"
        return _failed(ui(), StorageError(f"cannot write {name}: {err.strerror or os.strerror(err.errno or 0)}"))
    except Exception:  # noqa: BLE001  # the crash boundary: any bug ends as one line and a kept log
        return _crash(ui())
    finally:
        signal.signal(signal.SIGTERM, previous)


def _failed(ui: UI, err: KpatchError) -> int:
    """kpatch's own error: the `error:` line (its envelope under --json), the lines after it, where the log is."""
    _keep_log(ui)
    ui.error(str(err), err.exit_code)
    tail = str(err).split("\n", 1)[1:] if "\n" in str(err) else []
    if tail:
        ui.detail(tail[0])
    if ui.log_file:
        ui.detail(f"log: {ui.log_file}")
    return int(err.exit_code)


def _keep_log(ui: UI) -> None:
    """A command that failed keeps its log, a reader's too (written now from memory)."""
    if ui.log_file:
        ui.log_file = keep_log()


def _closed_pipe() -> NoReturn:
    """The reader of stdout or stderr went away (`kpatch status | head -1`): end quietly, as git and coreutils do
    (the shell reports 141 for them too). The command stopped where an interrupt would have; what it had written
    stays. Nothing more is written: the streams point at /dev/null, so Python's own flush at exit finds no pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(devnull, stream.fileno())
    sys.exit(int(ExitCode.CLOSED_PIPE))


def _terminate(_signum: int, _frame: object) -> None:
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

