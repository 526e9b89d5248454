"""kpatch.toml's release lines (`[line."NAME".UPSTREAM]` tables), checked: every error names the file, line and key.

    [line."0.33".vllm]
    branch = "releases/v0.33"
    base = "v0.33.0"
    # patches = "patches/0.33/vllm"   (the default)

A line says, for every upstream of the project, the branch it follows and the base its stack applies onto, and
has its own patch folders. `main` is the line the [[upstream]] tables describe: no line may be called that.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kpatch.config.model import MAIN, NAME_RE, SHA_RE, Line, LineUpstream, Upstream
from kpatch.config.tables import near, overlapping
from kpatch.errors import ConfigError

LINE_KEYS = ("branch", "base", "base-commit", "patches")  # of a [line."NAME".UPSTREAM] table
LINE_REQUIRED = ("branch", "base")


def _key(line: str, upstream: str | None = None, key: str | None = None) -> str:
    """The key as a person writes it: line."0.33".vllm.base (a part that is no bare TOML key quoted and escaped,
    so that a name holding a newline keeps the error on one line)."""
    return ".".join([f"line.{_quoted(line)}", *(part if _BARE.match(part) else _quoted(part)
                                                 for part in (upstream, key) if part)])


_BARE = re.compile(r"[A-Za-z0-9_-]+\Z")


def _quoted(name: str) -> str:
    """`name` as a TOML basic string ("0.33"; a newline as \\n)."""
    return json.dumps(name, ensure_ascii=False)


def _header(lines: list[str], *names: str) -> int | None:
    """The first line of a `[line."0.33".vllm]`-style header naming `names` in order (quoted or bare)."""
    parts = [r"\s*\.\s*(?:\"{0}\"|'{0}'|{0})".format(re.escape(n)) for n in names]
    pattern = re.compile(r"^\s*\[\s*line" + "".join(parts) + r"\s*[\].]")
    return next((i + 1 for i, text in enumerate(lines) if pattern.match(text)), None)


def _where(lines: list[str], line: str, upstream: str | None = None, key: str | None = None) -> int:
    """Where a line's key sits: the key's own line below its table's header, else the nearest header found."""
    start = (_header(lines, line, upstream) if upstream else None) or _header(lines, line) or \
        next((i + 1 for i, t in enumerate(lines) if t.lstrip().startswith("[line")), 1)
    if key is not None:
        keyed = re.compile(r"^\s*(?:\"{0}\"|'{0}'|{0})\s*=".format(re.escape(key)))
        for number in range(start, len(lines) + 1):
            if number > start and lines[number - 1].lstrip().startswith("["):
                break
            if keyed.match(lines[number - 1]):
                return number
    return start


def line_tables(path: Path, lines: list[str], table: Any, upstreams: list[Upstream]) -> tuple[Line, ...]:
    """The `[line."NAME"]` tables, each naming every upstream of the project; () when there are none."""
    if table is None:
        return ()
    first = next((i + 1 for i, t in enumerate(lines) if re.match(r"^\s*(\[\s*)?line\b", t)), 1)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}:{first}: 'line' must hold tables such as [line.\"0.33\".UPSTREAM] "
                          "(branch, base, patches)")
    names = [u.name for u in upstreams]
    folders: dict[Path, str] = {u.patches: f"upstream {u.name}'s patches (main)" for u in upstreams}
    out: list[Line] = []
    for name, body in table.items():
        where = _where(lines, name)
        if name == MAIN:
            raise ConfigError(f"{path}:{where}: {_key(name)}: 'main' is the line the [[upstream]] tables describe; "
                              "name a release line otherwise (e.g. \"0.33\")")
        if not NAME_RE.match(name):
            raise ConfigError(f"{path}:{where}: {_key(name)}: bad line name {name!r} (lower case letters, digits, "
                              "'.', '_', '-'; first a letter or digit)")
        if not isinstance(body, dict):
            raise ConfigError(f"{path}:{where}: {_key(name)} must be a table of upstreams ([line.\"{name}\".UPSTREAM])")
        for upstream in body:
            if upstream not in names:
                raise ConfigError(f"{path}:{_where(lines, name, upstream)}: {_key(name, upstream)}: unknown upstream "
                                  f"{upstream!r}{near(upstream, tuple(names))} (known: {', '.join(names)})")
        own: list[tuple[str, LineUpstream]] = []
        for upstream in upstreams:
            if upstream.name not in body:
                raise ConfigError(f"{path}:{where}: line {name!r} does not say where upstream {upstream.name!r} "
                                  f"stands: add [line.\"{name}\".{upstream.name}] with branch and base")
            found = _line_upstream(path, lines, name, upstream.name, body[upstream.name])
            meets = overlapping(found.patches, folders)
            if meets is not None:
                raise ConfigError(f"{path}:{_where(lines, name, upstream.name, 'patches')}: "
                                  f"{_key(name, upstream.name, 'patches')}: {found.patches} {meets}: "
                                  "each line keeps its own stacks, apart")
            folders[found.patches] = f"line {name}'s patches of {upstream.name}"
            own.append((upstream.name, found))
        out.append(Line(name=name, upstreams=tuple(own), line=where))
    root = path.parent.resolve()
    for line in out:
        # a line's own folder keeps its lock and recorded resolutions: inside another's stack folder they would be
        # that stack's files (a line named like an upstream, "kernels", beside patches/kernels); resolved as the
        # stacks' folders are, so that a symlinked patches/ is seen through
        own_folder = (root / "patches" / line.name).resolve()
        clash = next((f for f, whose in folders.items() if own_folder.is_relative_to(f)
                      and not whose.startswith(f"line {line.name}'s ")), None)
        if clash is not None:
            # a stack in patches/ itself (or around it) holds every line's folder: no other name frees it
            fix = f"move {folders[clash]} out of patches/" if (root / "patches").resolve().is_relative_to(clash) \
                else "name the line otherwise"
            raise ConfigError(f"{path}:{line.line}: {_key(line.name)}: the line keeps its lock and recorded "
                              f"resolutions in patches/{line.name}/, which "
                              f"{'is' if clash == own_folder else 'lies inside'} {folders[clash]} "
                              f"({clash.relative_to(root).as_posix()}): {fix}")
    return tuple(out)


def _line_upstream(path: Path, lines: list[str], line: str, upstream: str, table: Any) -> LineUpstream:
    where = _where(lines, line, upstream)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}:{where}: {_key(line, upstream)} must be a table (branch, base, patches)")
    for key in table:
        if key not in LINE_KEYS:
            raise ConfigError(f"{path}:{_where(lines, line, upstream, key)}: {_key(line, upstream, key)}: unknown key "
                              f"{key!r}{near(key, LINE_KEYS)} (a line's upstream takes {', '.join(LINE_KEYS)})")
    for key in LINE_REQUIRED:
        if key not in table:
            raise ConfigError(f"{path}:{where}: {_key(line, upstream)} is missing {key!r}")
    for key in (*LINE_REQUIRED, "patches"):
        if key in table and (not isinstance(table[key], str) or not table[key].strip()):
            raise ConfigError(f"{path}:{_where(lines, line, upstream, key)}: {_key(line, upstream, key)} must be a "
                              "non-empty string")
    base_commit = table.get("base-commit")
    if base_commit is not None and (not isinstance(base_commit, str) or not SHA_RE.match(base_commit)):
        raise ConfigError(f"{path}:{_where(lines, line, upstream, 'base-commit')}: "
                          f"{_key(line, upstream, 'base-commit')} must be a 40-hex SHA")
    root = path.parent.resolve()
    patches = (root / table.get("patches", f"patches/{line}/{upstream}")).resolve()
    if not patches.is_relative_to(root) or patches == root:
        raise ConfigError(f"{path}:{_where(lines, line, upstream, 'patches')}: {_key(line, upstream, 'patches')} "
                          f"must stay inside {path.parent}")
    return LineUpstream(branch=table["branch"], base=table["base"], base_commit=base_commit, patches=patches,
                        line=_where(lines, line, upstream))
