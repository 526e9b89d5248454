"""What every command shares: its options (config, cache, workdir, URL overrides, --json, -q, -v), the Context it
gets, and its click class (the example at the end of --help). Imported by the command modules only."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kpatch.errors import KpatchError, UsageError
from kpatch.files import removals_done
from kpatch.output.runlog import setup_logging
from kpatch.output.ui import UI

if TYPE_CHECKING:
    from kpatch.config import Stack
    from kpatch.project.workspace import Workspace

F = TypeVar("F", bound=Callable[..., Any])
UI_KEY = "kpatch.ui"  # click's meta: the command's UI, for the error boundary in kpatch/cli.py

# Commands that only read: a run that succeeds leaves no log file (export --check is one too).
READERS = frozenset({"status", "verify", "doctor", "report", "diff"})
# Commands that take the project's writer lock: they take --wait[=SECONDS].
WRITERS = frozenset({"apply", "rebase", "export", "import", "propose", "nightly", "build-wheels", "backport"})
# Commands that work on one release line: they take --line NAME (default main, the [[upstream]] tables).
LINE_COMMANDS = frozenset({"apply", "rebase", "export", "status", "build-wheels", "verify", "test", "nightly",
                           "propose", "release", "report"})


@dataclass(frozen=True)
class CommonOptions:
    """The options every command takes."""

    config_path: Path | None
    cache_dir: Path | None
    workdir: Path | None
    urls: tuple[str, ...]
    command: str
    reads_only: bool = False  # its log file is written only if it fails
    wait: float | None = None  # --wait: seconds to wait for the project's writer lock (None: fail at once)
    line: str = "main"  # --line: the release line the command works on


class Context:
    """What every command gets: the UI and, lazily, the workspace built from the shared options."""

    def __init__(self, ui: UI, options: CommonOptions) -> None:
        self.ui = ui
        self.options = options

    def stack(self, line: str | None = None) -> Stack:
        """kpatch.toml's stack as line `line` (default: --line's) sees it, with the URL overrides."""
        # imported where used: the work loads when the command runs, not for its --help
        from kpatch import config

        found = self.options.config_path or config.find_config(Path.cwd())
        stack = config.load(found).on_line(line or self.options.line)
        overrides = config.parse_assignments(self.options.urls, "--url")
        return config.with_url_overrides(stack, overrides, os.environ)

    def workspace(self, line: str | None = None) -> Workspace:
        from kpatch.project.workspace import Workspace

        stack = self.stack(line)
        ws = Workspace.create(stack, self.options.cache_dir, self.options.workdir, wait=self.options.wait,
                              say=self.ui.note)
        start_log(self.ui, ws.log_dir, self.options.command, deferred=self.options.reads_only)
        return ws


def start_log(ui: UI, folder: Path, command: str, *, deferred: bool = False) -> None:
    """The run's log file in `folder` (see setup_logging); a bad $KPATCH_LOG_KEEP is a usage error."""
    try:
        ui.log_file = setup_logging(folder, command, deferred=deferred)
    except ValueError as err:
        raise UsageError(str(err)) from None


class KpatchCommand(click.Command):
    """Every command's --help ends with its example (kpatch/output/help.py, read only when help is shown)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.epilog is None:
            from kpatch.output.help import epilog

            self.epilog = epilog(self.name or "")
        super().format_epilog(ctx, formatter)


def output_options(func: F) -> F:
    """--json, --quiet and --verbose, for every command."""
    func = click.option("-v", "--verbose", is_flag=True,
                        help="Also show the log's debug lines (git commands, docker steps) on stderr.")(func)
    func = click.option("-q", "--quiet", is_flag=True, help="Only results and errors: no notes, no progress.")(func)
    return click.option("--json", "json_mode", is_flag=True, help="Print the result as JSON.")(func)


def make_ui(command: str, json_mode: bool, quiet: bool, verbose: bool) -> UI:
    """The command's UI, also where kpatch/cli.py's error boundary finds it."""
    ui = UI(json_mode=json_mode, quiet=quiet, verbose=verbose, command=command)
    click.get_current_context().meta[UI_KEY] = ui
    return ui


def kpatch_command(name: str, **settings: Any) -> Callable[[Callable[..., int]], click.Command]:
    """The click command `name` with the shared options; its function gets a Context and returns its exit code."""

    def decorate(func: Callable[..., int]) -> click.Command:
        own = func.__dict__.pop("__click_params__", [])  # listed in --help before the shared ones, as always

        @functools.wraps(func)
        def wrapper(config_path: Path | None, cache_dir: Path | None, workdir: Path | None, urls: tuple[str, ...],
                    json_mode: bool, quiet: bool, verbose: bool, **kwargs: Any) -> int:
            ui = make_ui(name, json_mode, quiet, verbose)
            wait = _wait_seconds(kwargs.pop("wait")) if name in WRITERS else None
            line = kwargs.pop("line") if name in LINE_COMMANDS else "main"
            options = CommonOptions(config_path=config_path, cache_dir=cache_dir, workdir=workdir, urls=urls,
                                    command=name, reads_only=name in READERS or bool(kwargs.get("check")), wait=wait,
                                    line=line)
            try:
                return func(Context(ui, options), **kwargs)
            finally:
                removals_done()  # what it left to remove beside its end (a dropped journal) is gone when it returns

        shared = output_options(wrapper)
        if name in WRITERS:
            shared = click.option("--wait", metavar="[SECONDS]", is_flag=False, flag_value="forever", default=None,
                                  help="If another kpatch is writing this project, wait for it (at most SECONDS) "
                                       "instead of failing.")(shared)
        if name in LINE_COMMANDS:
            shared = click.option("--line", metavar="NAME", default="main", show_default=True,
                                  shell_complete=complete_lines,
                                  help="The release line to work on (kpatch.toml's [line.\"NAME\"]; main: the "
                                       "[[upstream]] tables).")(shared)
        shared = click.option("--url", "urls", multiple=True, metavar="NAME=URL", shell_complete=complete_assignment,
                              help="Fetch upstream NAME from URL instead.")(shared)
        shared = click.option("--workdir", type=click.Path(file_okay=False, path_type=Path),
                              help="Worktrees (default: the last apply's, else ./work next to kpatch.toml).")(shared)
        shared = click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
                              envvar="KPATCH_CACHE_DIR",
                              help="Mirrors and logs (default: $XDG_CACHE_HOME/kpatch).")(shared)
        shared = click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
                              help="kpatch.toml (default: the nearest one, here or above).")(shared)
        shared.__click_params__.extend(own)  # type: ignore[attr-defined]
        return click.command(name, cls=KpatchCommand, **settings)(shared)

    return decorate


def _wait_seconds(value: str | None) -> float | None:
    """--wait's value: None (not given), forever (given alone), or its seconds."""
    if value is None:
        return None
    if value == "forever":
        return float("inf")
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise UsageError(f"--wait takes a number of seconds (or nothing: no limit), got {value!r}")
    return seconds


def _project_stack(ctx: click.Context) -> Any:
    """The kpatch.toml shell completion reads (--config if already typed, else the nearest one), or None."""
    from kpatch import config

    try:
        given = ctx.params.get("config_path")
        return config.load(Path(given) if given else config.find_config(Path.cwd()))
    except (KpatchError, OSError):
        return None  # completion never fails: it offers nothing


def complete_upstreams(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion: the upstream names of kpatch.toml (`kpatch export k<TAB>`, `test --upstream`)."""
    stack = _project_stack(ctx)
    return [u.name for u in stack.upstreams if u.name.startswith(incomplete)] if stack else []


def complete_lines(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion: the lines of kpatch.toml (main and every [line."NAME"])."""
    stack = _project_stack(ctx)
    return [name for name in stack.line_names if name.startswith(incomplete)] if stack else []


def complete_assignment(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of NAME=VALUE options (`--onto`, `--url`): `NAME=` for each upstream."""
    if "=" in incomplete:
        return []
    return [f"{name}=" for name in complete_upstreams(ctx, param, incomplete)]


def complete_patches(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion: UPSTREAM/FILE.patch for every patch of every stack (`kpatch propose`)."""
    from kpatch.stack.series import load_series

    stack = _project_stack(ctx)
    found: list[str] = []
    for upstream in stack.upstreams if stack else ():
        try:
            series = load_series(upstream.name, upstream.patches)
        except (KpatchError, OSError):
            continue
        found += [f"{upstream.name}/{patch.name}" for patch in series.patches]
    return [name for name in found if name.startswith(incomplete)]


BACKENDS = ("auto", "docker", "local")
BACKEND_HELP = ("auto: the Docker engine if one answers, else this host (said as a note); docker: the engine (local, "
                "or DOCKER_HOST); local: this host, in venvs of kpatch's own.")


def chosen_backend(ui: UI, backend: str, image: str | None, base_image: str | None) -> str:
    """--backend as given, or for `auto` (every command's default, the demo's too) the Docker engine when one
    answers, else this host; --image or a --base-image given on the command line ask for the engine. Says which."""
    if backend != "auto":
        return backend
    source = click.get_current_context().get_parameter_source("base_image")
    if image or (base_image and source is not click.core.ParameterSource.ENVIRONMENT):
        ui.note("backend: docker (--image or --base-image names an image of the Docker engine)")
        return "docker"
    from kpatch.container.docker import probe_engine

    engine = probe_engine()
    if engine.problem is None:
        ui.note(f"backend: docker (the Docker engine at {engine.where} answers, version {engine.version})")
        return "docker"
    ui.note(f"backend: local, on this host ({engine.problem.splitlines()[0]}; --backend docker insists on one)")
    return "local"


def checked_base_image(backend: str, image: str | None, base_image: str | None) -> str | None:
    """--base-image, checked against --image and --backend; $KPATCH_BASE_IMAGE gives way to either of them."""
    source = click.get_current_context().get_parameter_source("base_image")
    if source is click.core.ParameterSource.ENVIRONMENT and (image or backend == "local"):
        return None
    if (image and base_image) or (backend == "local" and (image or base_image)):
        raise UsageError("--image and --base-image go alone, and only with --backend docker")
    return base_image


def assignments(values: tuple[str, ...], option: str) -> dict[str, str]:
    """NAME=VALUE options (--onto) as a mapping; a usage error names the bad one."""
    from kpatch.config import parse_assignments

    return parse_assignments(values, option)
