"""kpatch.toml -> frozen dataclasses: the upstreams, validated at load, in dependency order."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kpatch.errors import ConfigError, UsageError
from kpatch.github.names import Repository, parse_repository
from kpatch.gitx.mirror import url_problem, url_variable
from kpatch.redact import redact_url

CONFIG_NAME = "kpatch.toml"
CONFIG_VERSION = 1
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_HEADER = re.compile(r"^\s*\[\[\s*upstream\s*\]\]\s*(?:#.*)?$")
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_UPSTREAM_KEYS = {"name", "url", "branch", "base", "base-commit", "patches", "requires", "build", "test"}
_BUILD_KEYS = {"command", "env", "pin-files"}
_TEST_KEYS = {"command", "junit", "paths", "requires", "devices", "env", "timeout"}
DEVICE_KINDS = ("xpu",)  # what a test suite can say it needs ([upstream.test] devices)
DEFAULT_TEST_TIMEOUT = 1800.0


@dataclass(frozen=True, kw_only=True)
class Build:
    """How the upstream's wheel is built inside the build container ([upstream.build])."""

    command: str  # run in the source copy; the wheel must land in $KPATCH_OUT
    env: tuple[tuple[str, str], ...] = ()
    pin_files: tuple[str, ...] = ()  # requirement files whose pins on required upstreams' wheels are rewritten


@dataclass(frozen=True, kw_only=True)
class TestSuite:
    """How the upstream's tests run in the build image against the locked pair ([upstream.test])."""

    command: str  # run in a copy of `paths` of the patched tree; must write JUnit XML to `junit`
    junit: str = "junit.xml"  # relative to the test folder; $KPATCH_JUNIT holds its absolute path
    paths: tuple[str, ...] = ("tests",)  # never the package source: it would shadow the installed wheel
    requires: tuple[str, ...] = ()  # pip arguments installed with the locked wheels: "pytest==9.0.3", "-r FILE"
    devices: tuple[str, ...] = ()  # device kinds the suite cannot run without ("xpu")
    env: tuple[tuple[str, str], ...] = ()
    timeout: float = DEFAULT_TEST_TIMEOUT  # seconds for one run of the suite
    line: int = 0  # line of the [upstream.test] header in kpatch.toml


_REQUIRED = ("name", "url", "branch", "base", "patches")


@dataclass(frozen=True, kw_only=True)
class Upstream:
    """One upstream repository and the patch stack kept for it."""

    name: str
    url: str
    branch: str
    base: str  # a full commit SHA or a tag
    base_commit: str | None  # the SHA a tag base was recorded to resolve to
    patches: Path  # absolute folder holding `series` and the patch files
    requires: tuple[str, ...]
    line: int  # line of its [[upstream]] header in kpatch.toml
    build: Build | None = None
    url_overridden: bool = False
    test: TestSuite | None = None

    @property
    def base_is_sha(self) -> bool:
        return SHA_RE.match(self.base) is not None

    @property
    def display_url(self) -> str:
        """The URL as kpatch shows and writes it: without credentials."""
        return redact_url(self.url)

    @property
    def env_var(self) -> str:
        return url_variable(self.name)


@dataclass(frozen=True, kw_only=True)
class CudaOnly:
    """A `[verify] cuda-only` entry: an op (fnmatch pattern) or a calling module the XPU path never needs."""

    op: str | None  # "name", "namespace.name", or a pattern such as "cutlass_*"
    module: str | None  # a dotted module; its submodules too
    why: str
    line: int

    def matches(self, namespace: str, op: str, module: str) -> bool:
        if self.module is not None:
            return module == self.module or module.startswith(self.module + ".")
        assert self.op is not None
        return fnmatch.fnmatchcase(op, self.op) or fnmatch.fnmatchcase(f"{namespace}.{op}", self.op)


@dataclass(frozen=True, kw_only=True)
class Stack:
    """The whole stack file: upstreams in dependency order (each after everything it requires)."""

    root: Path
    path: Path
    upstreams: tuple[Upstream, ...]
    github: Repository | None = None  # [github] repository: where kpatch nightly opens its PR and issue
    torch: str | None = None  # [set] torch: the torch every upstream builds against (pins rewritten to it)
    cuda_only: tuple[CudaOnly, ...] = ()  # [verify] cuda-only

    def get(self, name: str) -> Upstream:
        for upstream in self.upstreams:
            if upstream.name == name:
                return upstream
        known = ", ".join(u.name for u in self.upstreams)
        raise UsageError(f"unknown upstream {name!r} (known: {known})")

    def closure(self, name: str) -> set[str]:
        """Names of every upstream `name` requires, directly or not."""
        seen: set[str] = set()
        todo = list(self.get(name).requires)
        while todo:
            dep = todo.pop()
            if dep not in seen:
                seen.add(dep)
                todo.extend(self.get(dep).requires)
        return seen

    def dependents(self, name: str) -> set[str]:
        """Names of every upstream that requires `name`, directly or not."""
        return {u.name for u in self.upstreams if name in self.closure(u.name)}


def find_config(start: Path) -> Path:
    """The nearest kpatch.toml at or above `start`."""
    for folder in (start, *start.parents):
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
    raise ConfigError(f"no {CONFIG_NAME} in {start} or any folder above it: run kpatch in a project, give "
                      "--config FILE, or see one with 'kpatch demo --keep'")


def load(path: Path) -> Stack:
    """Read and validate a stack file; every error names the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: {err}") from None
    lines = text.splitlines()
    headers = [i + 1 for i, line in enumerate(lines) if _HEADER.match(line)]
    for key in data:
        if key not in ("version", "upstream", "github", "set", "verify"):
            raise ConfigError(f"{path}:{_key_line(lines, 1, len(lines), key)}: unknown key {key!r}")
    if data.get("version") != CONFIG_VERSION:
        raise ConfigError(f"{path}:{_key_line(lines, 1, len(lines), 'version')}: version must be {CONFIG_VERSION}")
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
                line = _key_line(lines, upstream.line, len(lines) + 1, "requires")
                raise ConfigError(f"{path}:{line}: upstream {upstream.name!r} requires unknown upstream {dep!r}")
    return Stack(root=path.parent.resolve(), path=path, upstreams=_ordered(path, upstreams),
                 github=_github(path, lines, data.get("github")), torch=_set_torch(path, lines, data.get("set")),
                 cuda_only=_cuda_only(path, lines, data.get("verify")))


def _cuda_only(path: Path, lines: list[str], verify: Any) -> tuple[CudaOnly, ...]:
    """`[verify] cuda-only = [{ op = "...", why = "..." } | { module = "...", why = "..." }]`, checked."""
    if verify is None:
        return ()
    start = next((i + 1 for i, line in enumerate(lines) if line.strip().replace(" ", "") == "[verify]"), 1)
    if not isinstance(verify, dict):
        raise ConfigError(f"{path}:{_key_line(lines, 1, len(lines) + 1, 'verify')}: 'verify' must be a table")
    for key in verify:
        if key != "cuda-only":
            raise ConfigError(f"{path}:{_key_line(lines, start, len(lines) + 1, key)}: unknown key {key!r} in [verify]")
    entries = verify.get("cuda-only", [])
    where = f"{path}:{_key_line(lines, start, len(lines) + 1, 'cuda-only')}"
    if not isinstance(entries, list):
        raise ConfigError(f"{where}: 'cuda-only' must be a list of {{ op = \"...\", why = \"...\" }} tables")
    out: list[CudaOnly] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: every 'cuda-only' entry must be a {{ op = \"...\", why = \"...\" }} table")
        named = entry.get("op", entry.get("module"))
        line = _value_line(lines, start, named) if isinstance(named, str) else start
        for key in entry:
            if key not in ("op", "module", "why"):
                raise ConfigError(f"{path}:{line}: unknown key {key!r} in a 'cuda-only' entry")
        if ("op" in entry) == ("module" in entry):
            raise ConfigError(f"{path}:{line}: a 'cuda-only' entry names exactly one of 'op' or 'module'")
        for key in ("op", "module", "why"):
            if key in entry and (not isinstance(entry[key], str) or not entry[key].strip()):
                raise ConfigError(f"{path}:{line}: 'cuda-only' {key!r} must be a non-empty string")
        if "why" not in entry:
            raise ConfigError(f"{path}:{line}: 'cuda-only' entry {named!r} needs a 'why'")
        item = CudaOnly(op=entry.get("op"), module=entry.get("module"), why=entry["why"], line=line)
        if any((o.op, o.module) == (item.op, item.module) for o in out):
            raise ConfigError(f"{path}:{line}: 'cuda-only' lists {named!r} twice")
        out.append(item)
    return tuple(out)


def _value_line(lines: list[str], start: int, value: str) -> int:
    """The first line at or after `start` holding the TOML string `value`, or `start`."""
    quoted = (f'"{value}"', f"'{value}'")
    return next((n for n in range(start, len(lines) + 1) if any(q in lines[n - 1] for q in quoted)), start)


def with_url_overrides(stack: Stack, overrides: Mapping[str, str], environ: Mapping[str, str]) -> Stack:
    """Point upstreams at other URLs: `--url NAME=URL` first, then env KPATCH_URL_<NAME>."""
    for name in overrides:
        stack.get(name)  # unknown names are a usage error
    upstreams = []
    for upstream in stack.upstreams:
        url = overrides.get(upstream.name) or environ.get(upstream.env_var)
        if url:
            problem = url_problem(url)
            if problem:
                source = "--url" if upstream.name in overrides else upstream.env_var
                raise UsageError(f"{source} {upstream.name}: {problem}")
        upstreams.append(replace(upstream, url=url, url_overridden=True) if url else upstream)
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


def _upstream(path: Path, lines: list[str], start: int, end: int, table: Any) -> Upstream:
    where = f"{path}:{start}"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [[upstream]] must be a table")
    for key in table:
        if key not in _UPSTREAM_KEYS:
            raise ConfigError(f"{path}:{_key_line(lines, start, end, key)}: unknown key {key!r} in [[upstream]]")
    for key in _REQUIRED:
        if key not in table:
            raise ConfigError(f"{where}: [[upstream]] is missing {key!r}")
        if not isinstance(table[key], str) or not table[key].strip():
            raise ConfigError(f"{path}:{_key_line(lines, start, end, key)}: {key!r} must be a non-empty string")
    name = table["name"]
    if not NAME_RE.match(name):
        raise ConfigError(f"{path}:{_key_line(lines, start, end, 'name')}: bad upstream name {name!r}")
    requires = table.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise ConfigError(f"{path}:{_key_line(lines, start, end, 'requires')}: 'requires' must be a list of names")
    base_commit = table.get("base-commit")
    if base_commit is not None and (not isinstance(base_commit, str) or not SHA_RE.match(base_commit)):
        raise ConfigError(f"{path}:{_key_line(lines, start, end, 'base-commit')}: 'base-commit' must be a 40-hex SHA")
    problem = url_problem(table["url"])
    if problem:
        raise ConfigError(f"{path}:{_key_line(lines, start, end, 'url')}: {problem}")
    patches = (path.parent / table["patches"]).resolve()
    if not patches.is_relative_to(path.parent.resolve()):
        raise ConfigError(f"{path}:{_key_line(lines, start, end, 'patches')}: 'patches' must stay inside {path.parent}")
    return Upstream(
        name=name, url=table["url"], branch=table["branch"], base=table["base"], base_commit=base_commit,
        patches=patches, requires=tuple(requires), line=start, build=_build(path, lines, start, end, table),
        test=_test(path, lines, start, end, table),
    )


def _build(path: Path, lines: list[str], start: int, end: int, table: dict[str, Any]) -> Build | None:
    build = table.get("build")
    if build is None:
        return None
    line = next((n for n in range(start, min(end, len(lines) + 1)) if "build" in lines[n - 1]), start)
    where = f"{path}:{line}"
    if not isinstance(build, dict):
        raise ConfigError(f"{where}: 'build' must be a table")
    for key in build:
        if key not in _BUILD_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} in [upstream.build]")
    if not isinstance(build.get("command"), str) or not build["command"].strip():
        raise ConfigError(f"{where}: [upstream.build] needs a non-empty 'command'")
    env = build.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise ConfigError(f"{where}: [upstream.build] 'env' must be a table of strings")
    pins = build.get("pin-files", [])
    if not isinstance(pins, list) or not all(isinstance(p, str) for p in pins):
        raise ConfigError(f"{where}: [upstream.build] 'pin-files' must be a list of paths")
    return Build(command=build["command"], env=tuple(sorted(env.items())), pin_files=tuple(pins))


def _github(path: Path, lines: list[str], table: Any) -> Repository | None:
    """The optional [github] table: `repository = "owner/name"`, by GitHub's name rules."""
    if table is None:
        return None
    start = next((i + 1 for i, line in enumerate(lines) if line.strip().replace(" ", "") == "[github]"), 1)
    end = next((i + 1 for i in range(start, len(lines)) if lines[i].lstrip().startswith("[")), len(lines) + 1)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}:{_key_line(lines, 1, len(lines) + 1, 'github')}: 'github' must be a table")
    for key in table:
        if key != "repository":
            raise ConfigError(f"{path}:{_key_line(lines, start, end, key)}: unknown key {key!r} in [github]")
    value = table.get("repository")
    repository = parse_repository(value) if isinstance(value, str) else None
    if repository is None:
        line = _key_line(lines, start, end, "repository")
        raise ConfigError(f"{path}:{line}: [github] 'repository' must be owner/name (GitHub's name rules), "
                          f"not {value!r}")
    return repository


def _set_torch(path: Path, lines: list[str], table: Any) -> str | None:
    """[set] torch = "2.14.0": one exact PEP 440 version (a local label such as +xpu allowed)."""
    if table is None:
        return None
    start = next((i + 1 for i, line in enumerate(lines) if line.strip().replace(" ", "").startswith("[set]")), 1)
    end = next((i + 1 for i in range(start, len(lines)) if lines[i].lstrip().startswith("[")), len(lines) + 1)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}:{start}: 'set' must be a table")
    for key in table:
        if key != "torch":
            raise ConfigError(f"{path}:{_key_line(lines, start, end, key)}: unknown key {key!r} in [set]")
    value = table.get("torch")
    if value is None:
        return None
    line = _key_line(lines, start, end, "torch")
    from packaging.version import InvalidVersion, Version  # only a [set] table needs it

    try:
        if isinstance(value, str) and value.strip() == value:
            return str(Version(value))
    except InvalidVersion:
        pass
    raise ConfigError(f"{path}:{line}: [set] torch must be one exact version such as \"2.14.0\" or "
                      f"\"2.14.0+xpu\", got {value!r}")


def _test(path: Path, lines: list[str], start: int, end: int, table: dict[str, Any]) -> TestSuite | None:
    suite = table.get("test")
    if suite is None:
        return None
    header = re.compile(r"^\s*\[\s*upstream\s*\.\s*test\s*\]")
    line = next((n for n in range(start, min(end, len(lines) + 1)) if header.match(lines[n - 1])), start)
    if not isinstance(suite, dict):
        raise ConfigError(f"{path}:{_key_line(lines, start, end, 'test')}: 'test' must be a table")

    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{_key_line(lines, line, end, key)}: [upstream.test] {message}")

    for key in suite:
        if key not in _TEST_KEYS:
            raise fail(key, f"has unknown key {key!r}")
    if not isinstance(suite.get("command"), str) or not suite["command"].strip():
        raise fail("command", "needs a non-empty 'command'")
    junit = suite.get("junit", "junit.xml")
    if not isinstance(junit, str) or not _relative(junit):
        raise fail("junit", "'junit' must be a relative path inside the test folder")
    lists: dict[str, tuple[str, ...]] = {}
    for key, default in (("paths", ["tests"]), ("requires", []), ("devices", [])):
        value = suite.get(key, default)
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise fail(key, f"'{key}' must be a list of non-empty strings")
        lists[key] = tuple(value)
    if not lists["paths"] or not all(_relative(p) for p in lists["paths"]):
        raise fail("paths", "'paths' must list relative paths inside the upstream's tree")
    for device in lists["devices"]:
        if device not in DEVICE_KINDS:
            raise fail("devices", f"unknown device kind {device!r} (known: {', '.join(DEVICE_KINDS)})")
    env = suite.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise fail("env", "'env' must be a table of strings")
    timeout = suite.get("timeout", DEFAULT_TEST_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise fail("timeout", "'timeout' must be a positive number of seconds")
    return TestSuite(command=suite["command"], junit=junit, paths=lists["paths"], requires=lists["requires"],
                     devices=lists["devices"], env=tuple(sorted(env.items())), timeout=float(timeout), line=line)


def _relative(value: str) -> bool:
    """A path that stays inside the folder it is relative to."""
    parts = Path(value).parts
    return bool(parts) and not Path(value).is_absolute() and ".." not in parts


def _ordered(path: Path, upstreams: list[Upstream]) -> tuple[Upstream, ...]:
    """Topological order by `requires`; ties keep file order. A cycle is reported with its members."""
    done: list[Upstream] = []
    pending = list(upstreams)
    while pending:
        ready = [u for u in pending if all(dep in {d.name for d in done} for dep in u.requires)]
        if not ready:
            cycle = " -> ".join(u.name for u in pending)
            raise ConfigError(f"{path}:{pending[0].line}: cycle in 'requires' among: {cycle}")
        done.append(ready[0])
        pending.remove(ready[0])
    return tuple(done)


def _key_line(lines: list[str], start: int, end: int, key: str) -> int:
    """Line number of `key = ...` between two lines, or `start` when not found."""
    pattern = re.compile(rf'^\s*"?{re.escape(key)}"?\s*=')
    for number in range(start, min(end, len(lines) + 1)):
        if pattern.match(lines[number - 1]):
            return number
    return start


def with_new_bases(path: Path, bases: Mapping[str, str]) -> bytes:
    """kpatch.toml's text with `base` of the named upstreams set to full SHAs (and `base-commit` dropped).

    Edited with tomlkit, so comments, key order, quoting and layout stay as the person wrote them.
    """
    import tomlkit

    text = path.read_bytes().decode("utf-8")  # not read_text: its newline translation would drop CRs
    document = tomlkit.parse(text)
    untouched = tomlkit.dumps(document)
    for table in document.get("upstream", []):
        name = table.get("name")
        if name in bases:
            table["base"] = bases[name]
            if "base-commit" in table:
                del table["base-commit"]
    edited = tomlkit.dumps(document)
    kept = _keep_lines(text, untouched, edited)
    return (kept if tomllib.loads(kept) == tomllib.loads(edited) else edited).encode("utf-8")


def _keep_lines(text: str, untouched: str, edited: str) -> str:
    """The lines tomlkit changed for the edit, applied to the person's text: a line tomlkit only renders its own
    way (`[[ upstream ]]` as `[[upstream]]`) stays as written."""
    import difflib

    original, before, after = (t.splitlines(keepends=True) for t in (text, untouched, edited))
    if len(original) != len(before):
        return edited
    lines: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        lines += original[i1:i2] if tag == "equal" else after[j1:j2]
    return "".join(lines)
