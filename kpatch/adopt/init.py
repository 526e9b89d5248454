"""`kpatch init`: a new project in a folder: kpatch.toml (commented), an empty series per upstream, .gitignore
entries, and with `--ci` the nightly workflow; every base resolved through the upstream's mirror first."""

from __future__ import annotations

import contextlib
import graphlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from kpatch import __version__
from kpatch.config import CONFIG_NAME, CONFIG_VERSION, MAIN, NAME_RE, SHA_RE, Stack, Upstream, load
from kpatch.errors import UpstreamError, UsageError
from kpatch.files import GITIGNORE, read_input, write_atomic
from kpatch.gitx import Mirror
from kpatch.gitx.repo import UPSTREAM_REFS
from kpatch.gitx.urls import url_problem, url_variable
from kpatch.output.redact import redact_url
from kpatch.output.ui import UI
from kpatch.project.places import default_cache_dir, make_cache_dir
from kpatch.project.workspace import Workspace
from kpatch.stack import SERIES

SERIES_HEADER = "# applied in this order\n"  # what `kpatch import` and `export` keep at the top of the series
IGNORED = ("/work/", "/.kpatch-cache/", "/dist/", "/reports/")  # worktrees, the nightly's cache, wheels, reports
WORKFLOWS = ("nightly.yml", "nightly-line.yml")  # the scheduled nightly, and the one line's chain it calls per line
WORKFLOW_DIR = Path(".github") / "workflows"
_DEFAULT_BRANCHES = ("main", "master")
_SCP_LIKE = re.compile(r"^[^/]+:")  # host:path, git's short form of an ssh URL
# The workflow kpatch's own repository runs installs kpatch from its checkout; a project's installs the release.
_SELF_NOTE = ("# The source of truth is ci/{name}; GitHub runs workflows only from .github/workflows/, so\n"
              "# .github/workflows/{name} is a byte-for-byte copy that ci/lint-workflows checks. "
              "See ci/README.md.\n")
_SELF_INSTALL = ("          python -m pip install --quiet --require-hashes --no-deps -r ci/nightly-requirements.txt\n"
                 "          python -m pip install --quiet --no-deps --no-build-isolation .\n")


@dataclass(frozen=True)
class UpstreamSpec:
    """One `--upstream NAME=URL@BASE` (and its `--branch NAME=BRANCH`, if given)."""

    name: str
    url: str
    base: str
    branch: str | None = None


@dataclass(frozen=True)
class Pinned:
    """An upstream as init recorded it: the branch it follows and the base, resolved."""

    name: str = field(metadata={"json": "upstream"})
    url: str
    branch: str
    base: str  # a tag or a full SHA, as written to kpatch.toml
    base_commit: str  # the SHA it resolves to


@dataclass(frozen=True)
class InitResult:
    root: Path
    upstreams: tuple[Pinned, ...]
    written: tuple[Path, ...]  # new files
    extended: tuple[Path, ...]  # existing files lines were added to (.gitignore)


def parse_upstream(value: str) -> UpstreamSpec:
    """`NAME=URL@BASE`; the last `@` ends the URL (an ssh URL such as git@host:org/repo has one of its own)."""
    name, sep, rest = value.partition("=")
    url, at, base = rest.rpartition("@")
    if not sep or not at or not name or not url or not base or ":" in base:
        raise UsageError(f"--upstream takes NAME=URL@BASE (BASE: a tag or commit), got {value!r}")
    if not NAME_RE.match(name):
        raise UsageError(f"--upstream {value!r}: bad name {name!r} (lower-case letters, digits, '.', '_', '-')")
    url = fetchable(url, f"--upstream {name}")
    if carries_credentials(url):
        raise UsageError(f"--upstream {name}: {redact_url(url)} carries credentials, and kpatch.toml is committed "
                         f"and pushed: give the URL without them, and them to git's credential helper (or the "
                         f"whole URL to later commands as {url_variable(name)}) (nothing was written)")
    return UpstreamSpec(name=name, url=url, base=base)


_CREDENTIALS = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<userinfo>[^/?#]*)@")


def carries_credentials(url: str) -> bool:
    """Whether `url` holds a secret in its userinfo: a password anywhere, or any user name in an http(s) URL (a token
    often goes there); `ssh://git@host/...`'s user name is not one."""
    match = _CREDENTIALS.match(url)
    if match is None:
        return False
    return ":" in match.group("userinfo") or match.group("scheme").lower() in ("http", "https")


def fetchable(url: str, option: str) -> str:
    """`url` checked as apply checks upstream URLs; a local path made absolute (git fetches from the mirror's
    folder, and kpatch.toml may be read from anywhere) and required to exist."""
    problem = url_problem(url)
    if problem:
        raise UsageError(f"{option}: {problem}")
    if "://" in url or _SCP_LIKE.match(url):
        return url
    path = Path(url).expanduser().resolve()
    if not path.is_dir():
        raise UsageError(f"{option}: no folder {path}")
    return str(path)


@dataclass(frozen=True)
class LineSpec:
    """`--line LINE:NAME=BRANCH@BASE`: where upstream NAME stands on release line LINE."""

    line: str
    upstream: str
    branch: str
    base: str


def parse_line(value: str) -> LineSpec:
    """`0.33:vllm=releases/v0.33@v0.33.0`, checked (a release line's name, not main)."""
    line, colon, rest = value.partition(":")
    name, equals, where = rest.partition("=")
    branch, at, base = where.rpartition("@")
    if not (colon and equals and at and line and name and branch and base):
        raise UsageError(f"--line takes LINE:NAME=BRANCH@BASE (0.33:vllm=releases/v0.33@v0.33.0), got {value!r}")
    if line == MAIN or not NAME_RE.match(line):
        raise UsageError(f"--line {value}: {line!r} is no release line's name (lower case letters, digits, '.', "
                         "'_', '-'; main is the --upstream pins)")
    return LineSpec(line=line, upstream=name, branch=branch, base=base)


def check_lines(lines: Sequence[LineSpec], names: Sequence[str]) -> dict[str, list[LineSpec]]:
    """The --line options by line, each naming every --upstream once."""
    by_line: dict[str, list[LineSpec]] = {}
    for spec in lines:
        if spec.upstream not in names:
            raise UsageError(f"--line {spec.line}:{spec.upstream}: no --upstream named {spec.upstream!r}")
        if any(s.upstream == spec.upstream for s in by_line.get(spec.line, [])):
            raise UsageError(f"--line {spec.line}:{spec.upstream} is given twice")
        by_line.setdefault(spec.line, []).append(spec)
    for line, specs in by_line.items():
        missing = [n for n in names if n not in {s.upstream for s in specs}]
        if missing:
            raise UsageError(f"--line {line}: says nothing of upstream {missing[0]!r}: a line places every upstream "
                             f"(add --line {line}:{missing[0]}=BRANCH@BASE)")
    return by_line


def parse_requires(values: Sequence[str], names: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """`NAME:OTHER` pairs: NAME's stack goes onto OTHER's (both given with --upstream); no cycle."""
    found: dict[str, list[str]] = {name: [] for name in names}
    for value in values:
        name, sep, other = value.partition(":")
        if not sep or not name or not other:
            raise UsageError(f"--requires takes NAME:OTHER, got {value!r}")
        for each in (name, other):
            if each not in found:
                raise UsageError(f"--requires {value}: no --upstream named {each!r}")
        if other not in found[name]:
            found[name].append(other)
    try:
        tuple(graphlib.TopologicalSorter(found).static_order())
    except graphlib.CycleError as err:
        raise UsageError(f"--requires: cycle {' -> '.join(err.args[1])}") from None
    return {name: tuple(others) for name, others in found.items()}


def init(root: Path, specs: Sequence[UpstreamSpec], requires: Mapping[str, tuple[str, ...]], ui: UI, *,
         ci: bool, cache_dir: Path | None, lines: Sequence[LineSpec] = ()) -> InitResult:
    """Write a new project into `root`; nothing is written when a file it would write exists or a base is not
    found."""
    if not specs:
        raise UsageError("kpatch init needs at least one --upstream NAME=URL@BASE")
    names = [s.name for s in specs]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice:
        raise UsageError(f"--upstream {twice} is given twice")
    by_line = check_lines(lines, names)
    root = root.resolve()
    stacks = [root / "patches" / s.name / SERIES for s in specs] + \
        [root / "patches" / line / s.upstream / SERIES for line, found in by_line.items() for s in found]
    files = [root / CONFIG_NAME, *stacks] + ([root / WORKFLOW_DIR / name for name in WORKFLOWS] if ci else [])
    there = next((f for f in files if f.exists() or f.is_symlink()), None)
    if there is not None:
        raise UsageError(f"{there} exists: kpatch init writes only new files (nothing was written)")
    gitignore = root / ".gitignore"
    _refuse_outside(root, [*files, gitignore])
    ws = Workspace(stack=_stack(root, specs), cache_dir=_cache(cache_dir), workdir=root / "work", say=ui.note)
    pinned = tuple(_pin(ws, ui, spec) for spec in specs)
    texts = {root / CONFIG_NAME: render_config(pinned, requires, by_line).encode()}
    texts |= {path: SERIES_HEADER.encode() for path in stacks}
    if ci:
        texts |= {root / WORKFLOW_DIR / name: workflow(name).encode() for name in WORKFLOWS}
    old = read_input(gitignore, GITIGNORE, UsageError).decode("utf-8", "replace") if gitignore.is_file() else None
    ignored = [*IGNORED, *(f"/{kind}-{line}/" for line in by_line for kind in ("work", "dist", "reports"))]
    extra = [line for line in ignored if old is None or line not in old.splitlines()]
    written: list[Path] = []
    made = _missing_folders(root, texts)
    try:
        for path, data in texts.items():
            write_atomic(path, data)
            written.append(path)
        if extra:
            lead = "" if not old else "\n" if old.endswith("\n") else "\n\n"
            block = f"{lead}# kpatch: worktrees, the nightly's cache, wheels and reports\n" + "".join(
                f"{line}\n" for line in extra)
            write_atomic(gitignore, ((old or "") + block).encode())
    except BaseException:
        for path in written:  # all or nothing: the files this run made go again, and the folders it made
            path.unlink(missing_ok=True)
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    load(root / CONFIG_NAME)  # what was written reads back (a bug otherwise)
    new = [*written, *([gitignore] if extra and old is None else [])]
    return InitResult(root=root, upstreams=pinned, written=tuple(new),
                      extended=(gitignore,) if extra and old is not None else ())


def _refuse_outside(root: Path, paths: Sequence[Path]) -> None:
    """Every file init would write (or extend) stays inside `root` and is written as a file: no folder on its way
    is a link out of the project, and none of them is a link or a folder. Checked before anything is written."""
    for path in paths:
        for folder in reversed(path.relative_to(root).parents[:-1]):  # patches, patches/kernels...
            here = root / folder
            if here.is_symlink() and not Path(os.path.realpath(here)).is_relative_to(root):
                raise UsageError(f"{here} is a link out of the project (to {os.path.realpath(here)}): kpatch init "
                                 "writes only inside it (nothing was written)")
            if here.exists() and not here.is_dir():
                raise UsageError(f"{here} is not a folder: kpatch init would write {path} (nothing was written)")
        if path.is_symlink():
            raise UsageError(f"{path} is a link (to {path.readlink()}): kpatch init writes no file through a "
                             "link (nothing was written)")
        if path.exists() and not path.is_file():
            raise UsageError(f"{path} is not a file: kpatch init would write it (nothing was written)")


def _missing_folders(root: Path, texts: Mapping[Path, bytes]) -> list[Path]:
    """The folders writing `texts` makes (the deepest first): what a failed init removes again."""
    missing = {root / folder for path in texts for folder in path.relative_to(root).parents[:-1]
               if not (root / folder).exists()}
    return sorted(missing, key=lambda p: len(p.parts), reverse=True)


def _cache(cache_dir: Path | None) -> Path:
    """The cache folder, made now: one that cannot be made is refused before anything is written."""
    path = (cache_dir or default_cache_dir()).resolve()
    make_cache_dir(path)
    return path


def _stack(root: Path, specs: Sequence[UpstreamSpec]) -> Stack:
    """The project as it will read (bases not yet resolved): what the workspace's mirrors are named from."""
    ups = tuple(Upstream(name=s.name, url=s.url, branch=s.branch or "", base=s.base, base_commit=None,
                         patches=root / "patches" / s.name, requires=(), line=0) for s in specs)
    return Stack(root=root, path=root / CONFIG_NAME, upstreams=ups)


def _pin(ws: Workspace, ui: UI, spec: UpstreamSpec) -> Pinned:
    """Fetch the upstream into the mirror of its URL (always: the base is what the URL names now), then resolve
    the branch and base."""
    mirror = ws.mirror(spec.name)
    with ui.progress(f"fetching {spec.name} from {redact_url(spec.url)}", 100) as report:
        # init has no --url: a local clone's path goes in --upstream (no hint when that is what was given)
        remote = "://" in spec.url or _SCP_LIKE.match(spec.url) is not None
        hint = f"to work offline: --upstream {spec.name}=PATH@{spec.base} of a local clone" if remote else None
        note = mirror.fetch(spec.url, report, hint=hint)
    if note:
        ui.note(note)
    found = mirror.resolve(spec.base)
    if found is None:
        raise UpstreamError(f"upstream {spec.name}: {spec.base!r} is not a commit, tag or branch of "
                            f"{redact_url(spec.url)} (nothing was written)")
    branch = spec.branch or _default_branch(mirror, spec)
    if mirror.resolve(f"{UPSTREAM_REFS}{branch}") is None:
        raise UpstreamError(f"upstream {spec.name}: no branch {branch!r} at {redact_url(spec.url)}")
    tag = mirror.resolve(f"refs/tags/{spec.base}") if not SHA_RE.match(spec.base) else None
    # A tag is kept with the commit it names (apply refuses a tag that moved); anything else that moves (a branch,
    # main~3, a short SHA) is pinned as its full SHA.
    return Pinned(name=spec.name, url=spec.url, branch=branch, base=spec.base if tag == found else found,
                  base_commit=found)


def _branches(mirror: Mirror) -> list[str]:
    return [ref.removeprefix(UPSTREAM_REFS) for ref, _ in mirror.refs(UPSTREAM_REFS)]


def _default_branch(mirror: Mirror, spec: UpstreamSpec) -> str:
    branches = _branches(mirror)
    for name in _DEFAULT_BRANCHES:
        if name in branches:
            return name
    if len(branches) == 1:
        return branches[0]
    listed = ", ".join(sorted(branches)[:8]) or "none"
    raise UsageError(f"upstream {spec.name}: which branch does it follow? give --branch {spec.name}=BRANCH "
                     f"(branches: {listed})")


def render_config(pinned: Sequence[Pinned], requires: Mapping[str, tuple[str, ...]],
                  lines: Mapping[str, Sequence[LineSpec]] | None = None) -> str:
    """kpatch.toml for these upstreams (and release lines), each key explained in a comment."""
    # imported where used: tomlkit (~20 ms) only when a kpatch.toml is written
    import tomlkit

    doc = tomlkit.document()
    doc.add(tomlkit.comment("kpatch stack file: the upstreams kept as patch stacks, in any order ('requires' decides"))
    doc.add(tomlkit.comment("the order they are applied in). Written by 'kpatch init'; edit it freely."))
    doc.add("version", CONFIG_VERSION)
    tables = tomlkit.aot()
    for pin in pinned:
        table = tomlkit.table()
        table.add("name", pin.name)
        table.add("url", pin.url)
        table.add("branch", _noted(pin.branch, "the branch 'kpatch rebase' and the nightly follow"))
        if pin.base == pin.base_commit:
            table.add("base", _noted(pin.base, "the commit the stack applies onto"))
        else:
            table.add("base", _noted(pin.base, "the tag the stack applies onto"))
            table.add("base-commit", _noted(pin.base_commit, "what the tag named at init: apply refuses a moved tag"))
        table.add("patches", _noted(f"patches/{pin.name}", "its series file and patch files"))
        table.add("requires", _noted(list(requires.get(pin.name, ())), "upstreams whose stacks go first"))
        table.add(tomlkit.comment("[upstream.build] command = \"...\": how 'kpatch build-wheels' builds its wheel"))
        tables.append(table)
    doc.add("upstream", tables)
    if lines:
        every = tomlkit.table(is_super_table=True)
        for line, specs in lines.items():
            one = tomlkit.table(is_super_table=True)
            for spec in specs:
                table = tomlkit.table()
                table.add("branch", _noted(spec.branch, f"the branch 'kpatch rebase --line {line}' follows"))
                table.add("base", _noted(spec.base, f"what line {line}'s stack applies onto (a tag or a commit)"))
                table.add("patches", _noted(f"patches/{line}/{spec.upstream}", "the line's own stack"))
                one.add(spec.upstream, table)
            every.add(line, one)
        doc.add(tomlkit.nl())
        doc.add(tomlkit.comment("Release lines beside main: each places every upstream; commands take --line NAME."))
        doc.add("line", every)
    return tomlkit.dumps(doc)


def _noted(value: object, note: str) -> object:
    import tomlkit

    item = tomlkit.item(value)
    item.comment(note)
    return item


def workflow(name: str = "nightly.yml") -> str:
    """A nightly workflow for a project (`name`: one of WORKFLOWS): kpatch's own (ci/<name>, shipped as package
    data), installing the kpatch release this is instead of kpatch from a checkout."""
    text = resources.files("kpatch.adopt").joinpath(f"data/{name}").read_text(encoding="utf-8")
    own = _SELF_NOTE.format(name=name)
    if _SELF_INSTALL not in text or own not in text:
        raise AssertionError(f"kpatch/adopt/data/{name}: its install step or note changed; update adopt/init.py")
    note = (f"# Written by 'kpatch init --ci' (kpatch {__version__}): kpatch's own nightly, installing that release.\n"
            "# Its jobs and the token they need (KPATCH_NIGHTLY_TOKEN, environment 'nightly'): "
            "kpatch's ci/README.md.\n")
    return text.replace(own, note).replace(
        _SELF_INSTALL, f"          python -m pip install --quiet 'kpatch=={__version__}'\n")
