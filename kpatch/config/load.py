"""Reading kpatch.toml: found from the working folder, validated at load, upstreams in dependency order."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from kpatch.config.model import CONFIG_NAME, CONFIG_VERSION, NAME_RE, SHA_RE, Line, Stack, Upstream
from kpatch.config.tables import (
    baseline,
    build_table,
    cuda_only,
    dashboard_table,
    github_table,
    key_line,
    near,
    nightly_table,
    overlapping,
    propose_table,
    release_table,
    set_torch,
    test_table,
)
from kpatch.errors import ConfigError, UsageError
from kpatch.files import KPATCH_TOML, read_input
from kpatch.gitx.urls import url_problem

_HEADER = re.compile(r"^\s*\[\[\s*upstream\s*\]\]\s*(?:#.*)?$")
TOP_KEYS = ("version", "upstream", "line", "github", "set", "verify", "dashboard", "nightly",
            "release")  # the keys of the file itself
UPSTREAM_KEYS = ("name", "url", "branch", "base", "base-commit", "patches", "requires", "test-selection", "build",
                 "test", "propose")
REQUIRED = ("name", "url", "branch", "base", "patches")  # of an [[upstream]]


def find_config(start: Path) -> Path:
    """The nearest kpatch.toml at or above `start`."""
    for folder in (start, *start.parents):
        candidate = folder / CONFIG_NAME
        if os.path.lexists(candidate):  # a FIFO or device there is named by `load`, not passed over
            return candidate
    raise ConfigError(f"no {CONFIG_NAME} in {start} or any folder above it: run kpatch in a project, give "
                      "--config FILE, make one here with 'kpatch init', or see one with 'kpatch demo --keep'")


def load(path: Path) -> Stack:
    """Read and validate a stack file; every error names the file and line."""
    try:
        raw = read_input(path, KPATCH_TOML, ConfigError)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 (byte 0x{raw[err.start]:02x} at column {column}); "
                          "TOML files are UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: {err}") from None
    lines = text.splitlines()
    headers = [i + 1 for i, line in enumerate(lines) if _HEADER.match(line)]
    for key in data:
        if key not in TOP_KEYS:
            raise ConfigError(f"{path}:{key_line(lines, 1, len(lines), key)}: unknown key {key!r}{near(key, TOP_KEYS)}")
    if data.get("version") != CONFIG_VERSION:
        raise ConfigError(f"{path}:{key_line(lines, 1, len(lines), 'version')}: version must be {CONFIG_VERSION}")
    tables = data.get("upstream")
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"{path}: no [[upstream]] tables")
    upstreams = []
    for index, table in enumerate(tables):
        start = headers[index] if index < len(headers) else 1
        end = headers[index + 1] if index + 1 < len(headers) else len(lines) + 1
        upstreams.append(_upstream(path, lines, start, end, table))
    names = [u.name for u in upstreams]
    for upstream in upstreams:
        if names.count(upstream.name) > 1:
            raise ConfigError(f"{path}:{upstream.line}: upstream {upstream.name!r} is defined twice")
        for dep in upstream.requires:
            if dep not in names:
                line = key_line(lines, upstream.line, len(lines) + 1, "requires")
                raise ConfigError(f"{path}:{line}: upstream {upstream.name!r} requires unknown upstream {dep!r}")
    folders: dict[Path, str] = {}
    for upstream in upstreams:  # two stacks in one folder would share a series file
        meets = overlapping(upstream.patches, folders)
        if meets is not None:
            raise ConfigError(f"{path}:{key_line(lines, upstream.line, len(lines) + 1, 'patches')}: upstream "
                              f"{upstream.name}: 'patches' {upstream.patches} {meets}: each upstream keeps its own "
                              "stack, apart")
        folders[upstream.patches] = f"upstream {upstream.name}'s patches"
    lines_declared = _lines(path, lines, data.get("line"), upstreams)
    history, dashboard_issue = dashboard_table(path, lines, data.get("dashboard"))
    max_steps, budget, runners = nightly_table(path, lines, data.get("nightly"))
    return Stack(root=path.parent.resolve(), path=path, upstreams=_ordered(path, upstreams),
                 github=github_table(path, lines, data.get("github")), torch=set_torch(path, lines, data.get("set")),
                 cuda_only=cuda_only(path, lines, data.get("verify")),
                 baseline=baseline(path, lines, data.get("verify")),
                 history=history, dashboard_issue=dashboard_issue, max_steps=max_steps, budget=budget,
                 runners=runners, release=release_table(path, lines, data.get("release")), lines=lines_declared)


def _lines(path: Path, lines: list[str], table: Any, upstreams: list[Upstream]) -> tuple[Line, ...]:
    """The release lines ([line."NAME".UPSTREAM]); a project without lines never reads their module."""
    if table is None:
        return ()
    from kpatch.config.lines import line_tables

    return line_tables(path, lines, table, upstreams)


def _upstream(path: Path, lines: list[str], start: int, end: int, table: Any) -> Upstream:
    where = f"{path}:{start}"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [[upstream]] must be a table")
    for key in table:
        if key not in UPSTREAM_KEYS:
            raise ConfigError(f"{path}:{key_line(lines, start, end, key)}: unknown key {key!r} in [[upstream]]"
                              f"{near(key, UPSTREAM_KEYS)}")
    for key in REQUIRED:
        if key not in table:
            raise ConfigError(f"{where}: [[upstream]] is missing {key!r}")
        if not isinstance(table[key], str) or not table[key].strip():
            raise ConfigError(f"{path}:{key_line(lines, start, end, key)}: {key!r} must be a non-empty string")
    name = table["name"]
    if not NAME_RE.match(name):
        raise ConfigError(f"{path}:{key_line(lines, start, end, 'name')}: bad upstream name {name!r}")
    requires = table.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise ConfigError(f"{path}:{key_line(lines, start, end, 'requires')}: 'requires' must be a list of names")
    base_commit = table.get("base-commit")
    if base_commit is not None and (not isinstance(base_commit, str) or not SHA_RE.match(base_commit)):
        raise ConfigError(f"{path}:{key_line(lines, start, end, 'base-commit')}: 'base-commit' must be a 40-hex SHA")
    problem = url_problem(table["url"])
    if problem:
        raise ConfigError(f"{path}:{key_line(lines, start, end, 'url')}: upstream {name}: {problem}")
    patches = (path.parent / table["patches"]).resolve()
    if not patches.is_relative_to(path.parent.resolve()):
        raise ConfigError(f"{path}:{key_line(lines, start, end, 'patches')}: 'patches' must stay inside {path.parent}")
    test = test_table(path, lines, start, end, table)
    selection = table.get("test-selection", False)
    if not isinstance(selection, bool):
        raise ConfigError(f"{path}:{key_line(lines, start, end, 'test-selection')}: 'test-selection' must be true or "
                          "false")
    if selection and (test is None or "KPATCH_TESTS" not in test.command):
        what = "has no [upstream.test]" if test is None else "its test command does not read $KPATCH_TESTS"
        raise ConfigError(f"{path}:{key_line(lines, start, end, 'test-selection')}: upstream {name}: test-selection "
                          f"needs a test command that takes its test files from $KPATCH_TESTS (e.g. pytest "
                          f"${{KPATCH_TESTS:-tests}}), and {what}")
    return Upstream(
        name=name, url=table["url"], branch=table["branch"], base=table["base"], base_commit=base_commit,
        patches=patches, requires=tuple(requires), line=start, build=build_table(path, lines, start, end, table),
        test=test, propose=propose_table(path, lines, start, end, table), test_selection=selection,
    )


def _ordered(path: Path, upstreams: list[Upstream]) -> tuple[Upstream, ...]:
    """Topological order by `requires`; ties keep file order. A cycle is reported with its members."""
    done: list[Upstream] = []
    pending = list(upstreams)
    while pending:
        ready = [u for u in pending if all(dep in {d.name for d in done} for dep in u.requires)]
        if not ready:
            cycle = _cycle(pending)
            raise ConfigError(f"{path}:{cycle[0].line}: cycle in 'requires': {' -> '.join(u.name for u in cycle)}")
        done.append(ready[0])
        pending.remove(ready[0])
    return tuple(done)


def _cycle(pending: list[Upstream]) -> list[Upstream]:
    """One real cycle among upstreams none of which can go first, as a path back to its start (`a -> a` for an
    upstream that requires itself): follow each one's first requirement that is still pending until one repeats."""
    by_name = {u.name: u for u in pending}
    walk = [pending[0]]
    while True:
        nxt = by_name[next(dep for dep in walk[-1].requires if dep in by_name)]
        if nxt in walk:
            return [*walk[walk.index(nxt):], nxt]
        walk.append(nxt)


def with_url_overrides(stack: Stack, overrides: Mapping[str, str], environ: Mapping[str, str]) -> Stack:
    """Point upstreams at other URLs: `--url NAME=URL` first, then env KPATCH_URL_<NAME>."""
    for name in overrides:
        stack.get(name)  # unknown names are a usage error
    upstreams = []
    for upstream in stack.upstreams:
        url = overrides.get(upstream.name) or environ.get(upstream.env_var)
        source = "--url" if upstream.name in overrides else upstream.env_var
        if url:
            problem = url_problem(url)
            if problem:
                raise UsageError(f"{source} {upstream.name}: {problem}")
        upstreams.append(replace(upstream, url=url, url_overridden=True, url_from=source, configured_url=upstream.url)
                         if url else upstream)
    return replace(stack, upstreams=tuple(upstreams))


def parse_assignments(values: tuple[str, ...], option: str) -> dict[str, str]:
    """`NAME=VALUE` pairs from a repeatable option."""
    result: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise UsageError(f"{option} takes NAME=VALUE, got {value!r}")
        result[name] = rest
    return result

