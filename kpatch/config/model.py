"""What kpatch.toml says, as frozen dataclasses: the upstreams in dependency order and the optional tables."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, replace
from pathlib import Path

from kpatch.errors import UsageError
from kpatch.forge.github.names import Repository
from kpatch.gitx.urls import url_variable
from kpatch.output.redact import redact_url

CONFIG_NAME = "kpatch.toml"
CONFIG_VERSION = 1
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
DEVICE_KINDS = ("xpu",)  # what a test suite can say it needs ([upstream.test] devices)
DEFAULT_TEST_TIMEOUT = 1800.0
PYTORCH_XPU_INDEX = "https://download.pytorch.org/whl/xpu"  # where an XPU torch comes from, by default
DEFAULT_BUILD_TIMEOUT = 14400.0  # 4 h: a cold vLLM XPU build on a small runner takes 1-2 h; a hang is stopped
MAIN = "main"  # the line the [[upstream]] tables describe: the one every project has


@dataclass(frozen=True, kw_only=True)
class Build:
    """How the upstream's wheel is built inside the build container ([upstream.build])."""

    command: str  # run in the source copy; the wheel must land in $KPATCH_OUT
    env: tuple[tuple[str, str], ...] = ()
    pin_files: tuple[str, ...] = ()  # requirement files whose pins on required upstreams' wheels are rewritten
    timeout: float = DEFAULT_BUILD_TIMEOUT  # seconds for one wheel's build


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


@dataclass(frozen=True, kw_only=True)
class Propose:
    """Where `kpatch propose` sends the upstream's patches ([upstream.propose]); each key optional."""

    repository: Repository | None = None  # the upstream on GitHub; default: from `url` (github.com/OWNER/NAME)
    fork: str | None = None  # the fork's URL the branches are pushed to; default: `url` with --fork's owner


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
    url_from: str | None = None  # where an overriding URL came from: "--url" or the KPATCH_URL_<NAME> variable
    configured_url: str | None = None  # kpatch.toml's url when --url or KPATCH_URL_<NAME> points elsewhere
    test: TestSuite | None = None
    propose: Propose = Propose()
    test_selection: bool = False  # a scrolling step runs first the tests the upstream diff touches ($KPATCH_TESTS)

    @property
    def base_is_sha(self) -> bool:
        return SHA_RE.match(self.base) is not None

    @property
    def mirror_url(self) -> str:
        """The URL the upstream's mirror in the cache is keyed by: kpatch.toml's, not an override's (a copy to
        fetch from offline is the same upstream, and its worktrees stay the mirror's)."""
        return self.configured_url or self.url

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
class Release:
    """Where `kpatch release --to DIR` publishes and what its channels keep ([release])."""

    url: str | None = None  # DIR as users reach it; None: DIR's file:// URL
    keep: int = 7  # the sets the nightly channel's index lists
    torch_index: str | None = None  # where the set's torch is; None: the PyTorch XPU index
    nightly: bool = False  # a green night publishes its set on the nightly channel of `to`
    to: str | None = None  # where the nightly publishes: a folder (relative to kpatch.toml) or "github"
    pages_remote: str | None = None  # --to github: where the index's branch is pushed; None: the GitHub repository
    pages_branch: str = "gh-pages"  # --to github: the branch that holds the index (GitHub Pages serves it)


@dataclass(frozen=True, kw_only=True)
class LineUpstream:
    """Where one upstream stands on a release line (`[line."NAME".UPSTREAM]`): its branch, base and stack."""

    branch: str
    base: str  # a full commit SHA or a tag
    base_commit: str | None
    patches: Path  # absolute; default <root>/patches/<line>/<upstream>
    line: int  # line of its table in kpatch.toml


@dataclass(frozen=True, kw_only=True)
class Line:
    """A release line ([line."NAME"]): per upstream, the branch and base it follows and its own patch folder."""

    name: str
    upstreams: tuple[tuple[str, LineUpstream], ...]  # every upstream of the project, by name
    line: int  # line of its first table in kpatch.toml

    def get(self, name: str) -> LineUpstream:
        return dict(self.upstreams)[name]


@dataclass(frozen=True, kw_only=True)
class Stack:
    """The whole stack file: upstreams in dependency order (each after everything it requires)."""

    root: Path
    path: Path
    upstreams: tuple[Upstream, ...]
    github: Repository | None = None  # [github] repository: where kpatch nightly opens its PR and issue
    torch: str | None = None  # [set] torch: the torch every upstream builds against (pins rewritten to it)
    cuda_only: tuple[CudaOnly, ...] = ()  # [verify] cuda-only
    baseline: str = "verify-baseline.toml"  # [verify] baseline: accepted contract findings, relative to root
    history: Path | None = None  # [dashboard] history: main's carry history; None (a line always): the report folder
    dashboard_issue: bool = False  # [dashboard] issue: the nightly keeps a "carry dashboard" issue on GitHub
    max_steps: int = 8  # [nightly] max-steps: bisection steps of the search for the last green upstream commits
    budget: float | None = None  # [nightly] budget: seconds of wall clock for that search; None: no budget
    runners: int = 1  # [nightly] runners: commits that search tries at once per round (local workers); 1: bisection
    release: Release = Release()  # [release]
    lines: tuple[Line, ...] = ()  # the release lines kpatch.toml declares ([line."NAME"]); main is not one of them
    line: str = MAIN  # the line this stack is: its upstreams' branches, bases and patch folders are that line's

    @property
    def line_names(self) -> tuple[str, ...]:
        """Every line of the project: main first, then the declared ones in file order."""
        return (MAIN, *(line.name for line in self.lines))

    @property
    def resolutions(self) -> Path:
        """The recorded conflict resolutions of this line (patches/.rerere; a line's: patches/<line>/.rerere)."""
        return self.root / "patches" / ".rerere" if self.line == MAIN else self.root / "patches" / self.line / ".rerere"

    def on_line(self, name: str) -> Stack:
        """This project's stack as line `name` sees it (main: the [[upstream]] tables as they are)."""
        if name == self.line:
            return self
        if name == MAIN:
            raise UsageError("a line's stack does not know main's: load kpatch.toml again")
        found = next((line for line in self.lines if line.name == name), None)
        if found is None:
            known = ", ".join(self.line_names)
            raise UsageError(f"unknown line {name!r} (kpatch.toml declares: {known}); add [line.\"{name}\"] tables "
                             "or run 'kpatch init --line'")
        upstreams = []
        for upstream in self.upstreams:
            own = found.get(upstream.name)
            upstreams.append(replace(upstream, branch=own.branch, base=own.base, base_commit=own.base_commit,
                                     patches=own.patches, line=own.line))
        # [dashboard] history names main's: a line appending there would mix its nights into main's dashboard
        return replace(self, upstreams=tuple(upstreams), line=name, history=None)

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
