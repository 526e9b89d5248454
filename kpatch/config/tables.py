"""The optional tables of kpatch.toml ([upstream.build], [upstream.test], [github], [set], [verify]), checked,
and where a key sits (every error names its line)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from kpatch.config.model import (
    DEFAULT_BUILD_TIMEOUT,
    DEFAULT_TEST_TIMEOUT,
    DEVICE_KINDS,
    Build,
    CudaOnly,
    Propose,
    Release,
    TestSuite,
)
from kpatch.errors import ConfigError
from kpatch.forge.github.names import Repository, parse_repository


def nearest(word: str, known: tuple[str, ...] | frozenset[str] | set[str]) -> str | None:
    """The word of `known` a misspelt key or command most likely meant (`branc`: `branch`), if any is close."""
    # imported where used: only for a 'did you mean' or a torch pin: every command loads config
    import difflib

    close = difflib.get_close_matches(word, sorted(known), n=1, cutoff=0.6)
    return close[0] if close else None


def near(word: str, known: tuple[str, ...] | frozenset[str] | set[str]) -> str:
    """` (did you mean 'branch'?)` for a misspelt key among `known`, else nothing."""
    close = nearest(word, known)
    return f" (did you mean {close!r}?)" if close else ""

# The keys each table takes (kpatch/config/schema.py describes each one; the JSON Schema is made from these).
BUILD_KEYS = ("command", "env", "pin-files", "timeout")
TEST_KEYS = ("command", "junit", "paths", "requires", "devices", "env", "timeout")
GITHUB_KEYS = ("repository",)
PROPOSE_KEYS = ("repository", "fork")
SET_KEYS = ("torch",)
VERIFY_KEYS = ("cuda-only", "baseline")
CUDA_ONLY_KEYS = ("op", "module", "why")
DASHBOARD_KEYS = ("history", "issue")
NIGHTLY_KEYS = ("max-steps", "budget", "runners")
RELEASE_KEYS = ("url", "keep", "torch-index", "nightly", "to", "pages-remote", "pages-branch")
DEFAULT_KEEP = 7  # [release] keep: the sets the nightly channel's index lists
DEFAULT_MAX_STEPS = 8  # [nightly] max-steps: bisection steps when the heads are red


def build_table(path: Path, lines: list[str], start: int, end: int, table: dict[str, Any]) -> Build | None:
    build = table.get("build")
    if build is None:
        return None
    line = next((n for n in range(start, min(end, len(lines) + 1)) if "build" in lines[n - 1]), start)
    where = f"{path}:{line}"
    if not isinstance(build, dict):
        raise ConfigError(f"{where}: 'build' must be a table")
    for key in build:
        if key not in BUILD_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} in [upstream.build]{near(key, BUILD_KEYS)}")
    if not isinstance(build.get("command"), str) or not build["command"].strip():
        raise ConfigError(f"{where}: [upstream.build] needs a non-empty 'command'")
    env = build.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise ConfigError(f"{where}: [upstream.build] 'env' must be a table of strings")
    pins = build.get("pin-files", [])
    if not isinstance(pins, list) or not all(isinstance(p, str) for p in pins):
        raise ConfigError(f"{where}: [upstream.build] 'pin-files' must be a list of paths")
    timeout = build.get("timeout", DEFAULT_BUILD_TIMEOUT)
    if not _seconds(timeout):
        raise ConfigError(f"{path}:{key_line(lines, line, end, 'timeout')}: [upstream.build] 'timeout' must be a "
                          "positive number of seconds")
    return Build(command=build["command"], env=tuple(sorted(env.items())), pin_files=tuple(pins),
                 timeout=float(timeout))


def _seconds(value: Any) -> bool:
    """A timeout as kpatch.toml may give it: a positive, finite number (a boolean is no number here)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 < value < math.inf


def table_span(lines: list[str], header: str) -> tuple[int, int]:
    """The line of a table's `[header]` (1 when absent) and the line of the next table's header (or past the end)."""
    start = next((i + 1 for i, line in enumerate(lines) if line.strip().replace(" ", "").startswith(header)), 1)
    end = next((i + 1 for i in range(start, len(lines)) if lines[i].lstrip().startswith("[")), len(lines) + 1)
    return start, end


def github_table(path: Path, lines: list[str], table: Any) -> Repository | None:
    """The optional [github] table: `repository = "owner/name"`, by GitHub's name rules."""
    if table is None:
        return None
    start, end = table_span(lines, "[github]")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}:{key_line(lines, 1, len(lines) + 1, 'github')}: 'github' must be a table")
    for key in table:
        if key not in GITHUB_KEYS:
            raise ConfigError(f"{path}:{key_line(lines, start, end, key)}: unknown key {key!r} in [github]"
                              f"{near(key, GITHUB_KEYS)}")
    value = table.get("repository")
    repository = parse_repository(value) if isinstance(value, str) else None
    if repository is None:
        line = key_line(lines, start, end, "repository")
        raise ConfigError(f"{path}:{line}: [github] 'repository' must be owner/name (GitHub's name rules), "
                          f"not {value!r}")
    return repository


def set_torch(path: Path, lines: list[str], table: Any) -> str | None:
    """[set] torch = "2.14.0": one exact PEP 440 version (a local label such as +xpu allowed)."""
    if table is None:
        return None
    start, end = table_span(lines, "[set]")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}:{start}: 'set' must be a table")
    for key in table:
        if key not in SET_KEYS:
            raise ConfigError(f"{path}:{key_line(lines, start, end, key)}: unknown key {key!r} in [set]"
                              f"{near(key, SET_KEYS)}")
    value = table.get("torch")
    if value is None:
        return None
    line = key_line(lines, start, end, "torch")
    from packaging.version import InvalidVersion, Version  # only a [set] table needs it

    try:
        if isinstance(value, str) and value.strip() == value:
            return str(Version(value))
    except InvalidVersion:
        pass
    raise ConfigError(f"{path}:{line}: [set] torch must be one exact version such as \"2.14.0\" or "
                      f"\"2.14.0+xpu\", got {value!r}")


def propose_table(path: Path, lines: list[str], start: int, end: int, table: dict[str, Any]) -> Propose:
    """[upstream.propose]: `repository = "owner/name"` (the upstream on GitHub), `fork = URL` (where branches go)."""
    found = table.get("propose")
    if found is None:
        return Propose()
    header = re.compile(r"^\s*\[\s*upstream\s*\.\s*propose\s*\]")
    line = next((n for n in range(start, min(end, len(lines) + 1)) if header.match(lines[n - 1])), start)
    if not isinstance(found, dict):
        raise ConfigError(f"{path}:{key_line(lines, start, end, 'propose')}: 'propose' must be a table")
    for key in found:
        if key not in PROPOSE_KEYS:
            raise ConfigError(f"{path}:{key_line(lines, line, end, key)}: [upstream.propose] has unknown key {key!r}"
                              f"{near(key, PROPOSE_KEYS)}")
    repository = None
    if "repository" in found:
        value = found["repository"]
        repository = parse_repository(value) if isinstance(value, str) else None
        if repository is None:
            raise ConfigError(f"{path}:{key_line(lines, line, end, 'repository')}: [upstream.propose] 'repository' "
                              f"must be owner/name (GitHub's name rules), not {value!r}")
    fork = found.get("fork")
    if fork is not None and (not isinstance(fork, str) or not fork.strip() or fork.startswith("-")):
        raise ConfigError(f"{path}:{key_line(lines, line, end, 'fork')}: [upstream.propose] 'fork' must be a URL or "
                          f"path, not {fork!r}")
    return Propose(repository=repository, fork=fork)


def test_table(path: Path, lines: list[str], start: int, end: int, table: dict[str, Any]) -> TestSuite | None:
    suite = table.get("test")
    if suite is None:
        return None
    header = re.compile(r"^\s*\[\s*upstream\s*\.\s*test\s*\]")
    line = next((n for n in range(start, min(end, len(lines) + 1)) if header.match(lines[n - 1])), start)
    if not isinstance(suite, dict):
        raise ConfigError(f"{path}:{key_line(lines, start, end, 'test')}: 'test' must be a table")

    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{key_line(lines, line, end, key)}: [upstream.test] {message}")

    for key in suite:
        if key not in TEST_KEYS:
            raise fail(key, f"has unknown key {key!r}{near(key, TEST_KEYS)}")
    if not isinstance(suite.get("command"), str) or not suite["command"].strip():
        raise fail("command", "needs a non-empty 'command'")
    junit = suite.get("junit", "junit.xml")
    if not isinstance(junit, str) or not relative(junit):
        raise fail("junit", "'junit' must be a relative path inside the test folder")
    lists: dict[str, tuple[str, ...]] = {}
    for key, default in (("paths", ["tests"]), ("requires", []), ("devices", [])):
        value = suite.get(key, default)
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise fail(key, f"'{key}' must be a list of non-empty strings")
        lists[key] = tuple(value)
    if not lists["paths"] or not all(relative(p) for p in lists["paths"]):
        raise fail("paths", "'paths' must list relative paths inside the upstream's tree")
    for device in lists["devices"]:
        if device not in DEVICE_KINDS:
            raise fail("devices", f"unknown device kind {device!r} (known: {', '.join(DEVICE_KINDS)})")
    env = suite.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise fail("env", "'env' must be a table of strings")
    timeout = suite.get("timeout", DEFAULT_TEST_TIMEOUT)
    if not _seconds(timeout):
        raise fail("timeout", "'timeout' must be a positive number of seconds")
    return TestSuite(command=suite["command"], junit=junit, paths=lists["paths"], requires=lists["requires"],
                     devices=lists["devices"], env=tuple(sorted(env.items())), timeout=float(timeout), line=line)


DEFAULT_BASELINE = "verify-baseline.toml"


def cuda_only(path: Path, lines: list[str], verify: Any) -> tuple[CudaOnly, ...]:
    """`[verify] cuda-only = [{ op = "...", why = "..." } | { module = "...", why = "..." }]`, checked."""
    if verify is None:
        return ()
    start = next((i + 1 for i, line in enumerate(lines) if line.strip().replace(" ", "") == "[verify]"), 1)
    if not isinstance(verify, dict):
        raise ConfigError(f"{path}:{key_line(lines, 1, len(lines) + 1, 'verify')}: 'verify' must be a table")
    for key in verify:
        if key not in VERIFY_KEYS:
            raise ConfigError(f"{path}:{key_line(lines, start, len(lines) + 1, key)}: unknown key {key!r} in [verify]"
                              f"{near(key, VERIFY_KEYS)}")
    entries = verify.get("cuda-only", [])
    where = f"{path}:{key_line(lines, start, len(lines) + 1, 'cuda-only')}"
    if not isinstance(entries, list):
        raise ConfigError(f"{where}: 'cuda-only' must be a list of {{ op = \"...\", why = \"...\" }} tables")
    out: list[CudaOnly] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: every 'cuda-only' entry must be a {{ op = \"...\", why = \"...\" }} table")
        named = entry.get("op", entry.get("module"))
        line = value_line(lines, start, named) if isinstance(named, str) else start
        for key in entry:
            if key not in CUDA_ONLY_KEYS:
                raise ConfigError(f"{path}:{line}: unknown key {key!r} in a 'cuda-only' entry"
                                  f"{near(key, CUDA_ONLY_KEYS)}")
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


def baseline(path: Path, lines: list[str], verify: Any) -> str:
    """`[verify] baseline = "file.toml"`: where `kpatch verify --update-baseline` records accepted findings
    (relative to kpatch.toml, inside its folder); verify-baseline.toml when not set."""
    value = verify.get("baseline", DEFAULT_BASELINE) if isinstance(verify, dict) else DEFAULT_BASELINE
    if not isinstance(value, str) or not value.endswith(".toml") or not relative(value):
        start = next((i + 1 for i, line in enumerate(lines) if line.strip().replace(" ", "") == "[verify]"), 1)
        raise ConfigError(f"{path}:{key_line(lines, start, len(lines) + 1, 'baseline')}: 'baseline' must be a "
                          "relative path to a .toml file inside the project folder")
    return value


def dashboard_table(path: Path, lines: list[str], table: Any) -> tuple[Path | None, bool]:
    """`[dashboard] history = "path"` (the carry history file, relative to kpatch.toml or absolute, inside the
    project: kpatch appends to it; None: the nightly's report folder) and `issue = true` (the nightly keeps a
    carry dashboard issue)."""
    if table is None:
        return None, False
    start = next((i + 1 for i, line in enumerate(lines) if line.strip().replace(" ", "") == "[dashboard]"), 1)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}:{key_line(lines, 1, len(lines) + 1, 'dashboard')}: 'dashboard' must be a table")
    for key in table:
        if key not in DASHBOARD_KEYS:
            raise ConfigError(f"{path}:{key_line(lines, start, len(lines) + 1, key)}: unknown key {key!r} in "
                              f"[dashboard]{near(key, DASHBOARD_KEYS)}")
    issue = table.get("issue", False)
    if not isinstance(issue, bool):
        raise ConfigError(f"{path}:{key_line(lines, start, len(lines) + 1, 'issue')}: 'issue' must be true or false")
    value = table.get("history")
    if value is None:
        return None, issue
    if not isinstance(value, str) or not value.strip() or value.endswith("/"):
        raise ConfigError(f"{path}:{key_line(lines, start, len(lines) + 1, 'history')}: 'history' must be the path "
                          "of a file (relative to kpatch.toml, or absolute)")
    where, project = (path.parent / value).resolve(), path.parent.resolve()
    if not where.is_relative_to(project) or where == project:
        raise ConfigError(f"{path}:{key_line(lines, start, len(lines) + 1, 'history')}: 'history' {value!r} leads "
                          f"outside the project ({where}): kpatch appends to it, so it must be a file inside "
                          f"{project} (give another one for one run with --history)")
    return where, issue


def nightly_table(path: Path, lines: list[str], table: Any) -> tuple[int, float | None, int]:
    """`[nightly] max-steps = N` (steps the search for the last green commits may take, default 8), `budget = S`
    (seconds of wall clock for that search; none when not set) and `runners = N` (commits it tries at once per
    round, on local worker processes; default 1: a bisection)."""
    if table is None:
        return DEFAULT_MAX_STEPS, None, 1
    start = next((i + 1 for i, line in enumerate(lines) if line.strip().replace(" ", "") == "[nightly]"), 1)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}:{key_line(lines, 1, len(lines) + 1, 'nightly')}: 'nightly' must be a table")
    for key in table:
        if key not in NIGHTLY_KEYS:
            raise ConfigError(f"{path}:{key_line(lines, start, len(lines) + 1, key)}: unknown key {key!r} in "
                              f"[nightly]{near(key, NIGHTLY_KEYS)}")
    steps = table.get("max-steps", DEFAULT_MAX_STEPS)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise ConfigError(f"{path}:{key_line(lines, start, len(lines) + 1, 'max-steps')}: 'max-steps' must be a "
                          "whole number, 0 or more")
    budget = table.get("budget")
    if budget is not None and (not isinstance(budget, (int, float)) or isinstance(budget, bool) or budget <= 0):
        raise ConfigError(f"{path}:{key_line(lines, start, len(lines) + 1, 'budget')}: 'budget' must be a number of "
                          "seconds above 0")
    runners = table.get("runners", 1)
    if not isinstance(runners, int) or isinstance(runners, bool) or runners < 1:
        raise ConfigError(f"{path}:{key_line(lines, start, len(lines) + 1, 'runners')}: 'runners' must be a whole "
                          "number, 1 or more")
    return steps, None if budget is None else float(budget), runners


def release_table(path: Path, lines: list[str], table: Any) -> Release:
    """`[release] url = "https://..."` (where `kpatch release --to DIR` publishes DIR: the index's and the locks'
    URLs), `keep = N` (the sets the nightly channel lists, default 7), `torch-index = URL` (where the set's torch
    is, default the PyTorch XPU index), `to = DIR|"github"` (where `kpatch release` publishes when no `--to` is
    given, and where a green night publishes its set with `nightly = true`) and, for github, `pages-remote` and
    `pages-branch` (where the index's branch is pushed)."""
    if table is None:
        return Release()
    start, end = table_span(lines, "[release]")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}:{key_line(lines, 1, len(lines) + 1, 'release')}: 'release' must be a table")
    for key in table:
        if key not in RELEASE_KEYS:
            raise ConfigError(f"{path}:{key_line(lines, start, end, key)}: unknown key {key!r} in [release]")
    keep = table.get("keep", DEFAULT_KEEP)
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
        raise ConfigError(f"{path}:{key_line(lines, start, end, 'keep')}: [release] 'keep' must be a whole number, "
                          "1 or more")
    urls = {}
    for key in ("url", "torch-index"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not re.match(r"^(https?|file)://\S+$", value)):
            raise ConfigError(f"{path}:{key_line(lines, start, end, key)}: [release] {key!r} must be an http(s):// "
                              f"or file:// URL, not {value!r}")
        urls[key] = value
    nightly = table.get("nightly", False)
    if not isinstance(nightly, bool):
        raise ConfigError(f"{path}:{key_line(lines, start, end, 'nightly')}: [release] 'nightly' must be true or "
                          "false")
    texts: dict[str, str | None] = {}
    for key in ("to", "pages-remote", "pages-branch"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip() or "\n" in value):
            raise ConfigError(f"{path}:{key_line(lines, start, end, key)}: [release] {key!r} must be a one-line "
                              f"string, not {value!r}")
        texts[key] = value
    to = texts["to"]
    if to is not None and ("://" in to or (to.lower() == "github" and to != "github")):
        raise ConfigError(f"{path}:{key_line(lines, start, end, 'to')}: [release] 'to' must be a folder (relative to "
                          f"kpatch.toml) or \"github\", not {to!r}")
    if nightly and texts["to"] is None:
        raise ConfigError(f"{path}:{key_line(lines, start, end, 'nightly')}: [release] nightly = true needs "
                          "'to': the folder the nightly channel is published in, or \"github\"")
    branch = texts["pages-branch"] or "gh-pages"
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$", branch) or ".." in branch:
        raise ConfigError(f"{path}:{key_line(lines, start, end, 'pages-branch')}: [release] 'pages-branch' "
                          f"{branch!r} is no branch name")
    return Release(url=urls["url"], keep=keep, torch_index=urls["torch-index"], nightly=nightly, to=texts["to"],
                   pages_remote=texts["pages-remote"], pages_branch=branch)


def relative(value: str) -> bool:
    """A path that stays inside the folder it is relative to."""
    parts = Path(value).parts
    return bool(parts) and not Path(value).is_absolute() and ".." not in parts


def overlapping(folder: Path, folders: dict[Path, str]) -> str | None:
    """How the stack folder `folder` meets one of `folders` (each with whose it is), if it does: "is already X",
    "lies inside F, X" or "holds F, X". Two stacks' files never share a folder, nor one inside the other."""
    clash = next((f for f in folders if f == folder or folder.is_relative_to(f) or f.is_relative_to(folder)), None)
    if clash is None:
        return None
    if clash == folder:
        return f"is already {folders[clash]}"
    return f"{'lies inside' if folder.is_relative_to(clash) else 'holds'} {clash.as_posix()}, {folders[clash]}"


def key_line(lines: list[str], start: int, end: int, key: str) -> int:
    """Line number of `key = ...` between two lines, or `start` when not found."""
    pattern = re.compile(rf'^\s*"?{re.escape(key)}"?\s*=')
    for number in range(start, min(end, len(lines) + 1)):
        if pattern.match(lines[number - 1]):
            return number
    return start


def value_line(lines: list[str], start: int, value: str) -> int:
    """The first line at or after `start` holding the TOML string `value`, or `start`."""
    quoted = (f'"{value}"', f"'{value}'")
    return next((n for n in range(start, len(lines) + 1) if any(q in lines[n - 1] for q in quoted)), start)

