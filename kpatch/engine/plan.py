"""Check everything before changing anything: series, cross-stack `Requires:`, bases, patch paths, and work
that moving a worktree would lose."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kpatch.config import SHA_RE, Stack, Upstream
from kpatch.config.model import MAIN
from kpatch.errors import ConfigError, SeriesError, UpstreamError, UsageError, WorktreeError
from kpatch.files import PATCH_FILE, read_input
from kpatch.gitx import Mirror, Repository, file_patch_ids, patch_ids_of, read_mails
from kpatch.gitx.mirror import unreadable
from kpatch.gitx.repo import UPSTREAM_HELD
from kpatch.output.ui import UI
from kpatch.project.state import RunState, Settled
from kpatch.project.workspace import Workspace
from kpatch.stack import Patch, PatchRef, Series, load_series

BACKUPS_KEPT = 20


@dataclass(frozen=True)
class Item:
    """One upstream, its stack, and the commit the stack goes onto."""

    upstream: Upstream
    series: Series
    base: str | None  # None when not resolved (no mirror yet and fetching was not allowed)
    mirror: Mirror
    worktree: Path


def load_all_series(stack: Stack) -> dict[str, Series]:
    """Every stack's series, with each `Requires:` checked against the stacks it may name."""
    all_series = {u.name: load_series(u.name, u.patches) for u in stack.upstreams}
    wrong = requires_problem(stack, all_series)
    if wrong is not None:
        patch, ref, why = wrong
        raise SeriesError(f"{patch.path}:{ref.line}: {why}")
    return all_series


def requires_problem(stack: Stack, all_series: Mapping[str, Series]) -> tuple[Patch, PatchRef, str] | None:
    """The first `Requires:` that names no patch the stacks it may name hold: (its patch, the trailer, why)."""
    for upstream in stack.upstreams:
        allowed = stack.closure(upstream.name)
        for patch in all_series[upstream.name].patches:
            for ref in patch.requires:
                if ref.upstream not in all_series:
                    return patch, ref, f"Requires names unknown upstream {ref.upstream!r}"
                if ref.upstream not in allowed:
                    return patch, ref, (f"Requires {ref} but {upstream.name!r} does not require {ref.upstream!r} "
                                        f"in {stack.path.name}")
                target = all_series[ref.upstream]
                if ref.patch not in target.names() and ref.patch not in target.dropped:
                    return patch, ref, f"Requires {ref}, which is not in {ref.upstream}'s series"
    return None


def fetch(ws: Workspace, ui: UI, upstream: Upstream) -> Mirror:
    check_given_url(upstream)
    mirror = ws.mirror(upstream.name)
    # How to work offline, unless the person already gave the URL to use (then they know).
    hint = None if upstream.url_overridden else \
        f"to work offline: --url {upstream.name}=PATH or {upstream.env_var}=PATH"
    with ui.progress(f"fetching {upstream.name} from {upstream.display_url}", 100) as report:
        note = mirror.fetch(upstream.url, report, hint=hint)
    if note:  # the server allows no partial clone: a full fetch instead (once: the mirror is a full one now)
        ui.note(note)
    return mirror


_READABLE: set[str] = set()  # the given URLs this run found readable


def check_given_url(upstream: Upstream) -> None:
    """A URL the person gave (`--url NAME=URL`, KPATCH_URL_<NAME>) must be a git repository kpatch can read, even
    when the mirror has what this command needs: bad input (exit 2), not a URL silently never fetched."""
    if not upstream.url_overridden or upstream.url in _READABLE:
        return
    why = unreadable(upstream.url)
    if why is None:
        _READABLE.add(upstream.url)  # asked once a run (resolve_items, then its fetch)
    else:
        raise UsageError(f"upstream {upstream.name}: {upstream.url_from or '--url'} {upstream.name}="
                         f"{upstream.display_url} is no git repository kpatch can fetch from: {why}")


def resolve_items(ws: Workspace, ui: UI, onto: Mapping[str, str], *, fetch_missing: bool,
                  run: RunState | None = None) -> list[Item]:
    """Resolve every upstream's target commit, fetching only what the mirror lacks (or any branch `--onto`)."""
    series = load_all_series(ws.stack)
    for name in onto:
        ws.stack.get(name)
    items = []
    for upstream in ws.stack.upstreams:
        check_given_url(upstream)
        mirror = ws.mirror(upstream.name)
        ref = onto.get(upstream.name, upstream.base)
        base = mirror.resolve(ref) if mirror.exists else None
        moving = upstream.name in onto and not SHA_RE.match(ref)
        if fetch_missing and (base is None or moving):
            fetch(ws, ui, upstream)
            base = mirror.resolve(ref)
            if base is None and upstream.name not in onto and ws.stack.line != MAIN:
                raise missing_line_base(ws.stack, upstream, mirror)
            if base is None:
                raise UpstreamError(f"upstream {upstream.name}: {ref!r} is not a commit, tag or branch of "
                                    f"{upstream.display_url}")
        if base is not None and upstream.name not in onto:
            check_base(ws.stack, upstream, base, run.settled.get(upstream.name) if run else None, ui)
        items.append(Item(upstream=upstream, series=series[upstream.name], base=base, mirror=mirror,
                          worktree=ws.worktree(upstream.name)))
    return items


def missing_line_base(stack: Stack, upstream: Upstream, mirror: Mirror) -> ConfigError:
    """A release line's base its upstream's mirror does not have (a snapshot that stops before the tag): which base,
    and where to get it, in one line (exit 2: kpatch.toml names it)."""
    newest = mirror.run(["for-each-ref", "--sort=-creatordate", "--count=1", "--format=%(refname:short)",
                         "refs/tags/"], check=False).text.strip() if mirror.exists else ""
    there = f"{upstream.display_url} (newest tag there: {newest})" if newest else upstream.display_url
    if upstream.url_overridden and upstream.configured_url:
        get = (f"get a clone of {upstream.configured_url} that has it (git fetch --tags) and pass --url "
               f"{upstream.name}=PATH")
    else:
        get = (f"fetch a copy that has it (a clone with its tags, or the release's source tagged {upstream.base}) "
               f"and pass --url {upstream.name}=PATH, or set the line's base to a commit {upstream.name} has")
    return ConfigError(f"{stack.path}:{upstream.line}: line {stack.line}: upstream {upstream.name}'s base "
                       f"{upstream.base!r} is not in {there}: {get}")


def check_symlinks(item: Item) -> None:
    """Refuse a stack that would write through a symlink of the base tree or one an earlier patch adds."""
    assert item.base is not None
    paths = [p for patch in item.series.patches for p in patch.paths]
    links = item.mirror.symlinks(item.base, paths)
    for patch in item.series.patches:
        for path in patch.paths:
            parents = ["/".join(path.split("/")[:i]) for i in range(1, path.count("/") + 1)]
            hit = next((p for p in parents if p in links), None)
            if hit:
                raise SeriesError(f"{patch.path}: patch writes {path!r} through the symlink {hit!r}")
        links |= set(patch.new_symlinks)


def unexported(tree: Repository, series: Series, settled: Settled | None, base: str | None) -> list[str]:
    """Commits in `tree` that no patch file, upstream or branch (a person's, in refs/heads) holds: what moving it
    would lose.

    Nothing when HEAD is what kpatch last left or exported there. Each is described as 'sha subject'.
    """
    head = tree.head()
    if settled is not None and head == settled.head:
        return []
    since = settled.head if settled is not None and tree.has_commit(settled.head) else base
    args = ["rev-list", "--reverse", head, "--not", "--branches", *UPSTREAM_HELD] + ([since] if since else [])
    candidates = tree.out(args).split()
    if not candidates:
        return []
    paths = [p.path for p in series.patches]
    by_id: dict[str, list[Path]] = {}
    for path, pid in zip(paths, file_patch_ids(tree, paths, verbatim=True) if paths else [], strict=True):
        if pid is not None:
            by_id.setdefault(pid, []).append(path)
    ids = patch_ids_of(tree, candidates, verbatim=True)
    lost = {sha: "" for sha in candidates if ids.get(sha) not in by_id}
    lost |= _reworded(tree, {sha: by_id[ids[sha]] for sha in candidates if sha not in lost})
    return [f"{sha[:12]} {tree.out(['log', '-1', '--format=%s', sha])}{lost[sha]}" for sha in candidates if sha in lost]


def _reworded(tree: Repository, held: Mapping[str, list[Path]]) -> dict[str, str]:
    """{commit: why} for the commits whose diff a patch file holds but not their words: an amended message or
    author (`git commit --amend`) is the person's work as much as a changed diff is."""
    # imported where used: only for a reworded patch: every writing command imports plan
    from kpatch.stack.writer import changed_words

    if not held:
        return {}
    files = sorted({path for paths in held.values() for path in paths})
    readings = dict(zip(files, read_mails(tree, [read_input(path, PATCH_FILE, SeriesError)
                                                                  for path in files]), strict=True))
    facts = tree.commit_facts(list(held))
    out: dict[str, str] = {}
    for sha, paths in held.items():
        changes = [changed_words(readings[path], facts[sha]) for path in paths]
        if None not in changes:
            out[sha] = f" (its {changes[0]} is not the one in {paths[0].name})"
    return out


def refuse_unexported(_ws: Workspace, items: list[Item], run: RunState, *, discard: bool, doing: str) -> None:
    """Stop before `doing` moves a worktree that holds commits not exported to patches/ (unless --discard)."""
    for item in items:
        path = item.worktree
        if not path.exists() or discard:
            continue
        lost = unexported(Repository(path), item.series, run.settled.get(item.upstream.name), item.base)
        if lost:
            more = f" and {len(lost) - 1} more" if len(lost) > 1 else ""
            raise WorktreeError(f"worktree {path} has commits not in patches/ ({lost[0]}{more}): run 'kpatch export "
                                f"{item.upstream.name}' to keep them, or '{doing} --discard' to drop them (a backup "
                                "ref is kept either way)")


def backup(tree: Repository, name: str, stamp: str) -> str | None:
    """Keep the worktree's HEAD reachable under refs/kpatch/backup/<name>/ before kpatch moves it.

    Only a HEAD that no upstream branch or tag, no branch of a person, and no earlier backup, holds needs it (one
    `git rev-list` tells); the newest BACKUPS_KEPT per upstream stay.
    """
    head = tree.head()
    prefix = f"refs/kpatch/backup/{name}/"
    if not tree.out(["rev-list", "-1", head, "--not", "--branches", *UPSTREAM_HELD, f"--glob={prefix}*"]):
        return None
    kept = tree.refs(prefix)
    ref = prefix + stamp
    tree.update_ref(ref, head)
    for old, _ in kept[: max(0, len(kept) + 1 - BACKUPS_KEPT)]:
        tree.run(["update-ref", "-d", old])
    return ref


def check_base(stack: Stack, upstream: Upstream, base: str, settled: Settled | None, ui: UI) -> None:
    """What the pinned base resolved to: refused (or warned about) when it is not the recorded base-commit, warned
    about when a tag now names another commit than at the last apply."""
    _check_recorded(stack, upstream, base, ui)
    _check_tag(upstream, base, settled, ui)


def _check_recorded(stack: Stack, upstream: Upstream, base: str, ui: UI) -> None:
    if upstream.base_commit is None or upstream.base_commit == base:
        return
    message = (f"upstream {upstream.name}: {upstream.base} resolves to {base[:12]}, "
               f"not the recorded base-commit {upstream.base_commit[:12]}")
    if upstream.url_overridden:
        ui.warn(f"{message} (URL overridden to {upstream.display_url}; using {base[:12]})")
        return
    raise ConfigError(f"{stack.path}:{upstream.line}: {message} (did the tag move?)")


def _check_tag(upstream: Upstream, base: str, settled: Settled | None, ui: UI) -> None:
    """Warn when a tag base now names another commit than it did at the last apply (a force-pushed tag)."""
    if upstream.base_is_sha or settled is None or settled.tag != upstream.base or settled.tag_commit in (None, base):
        return
    assert settled.tag_commit is not None
    ui.warn(f"upstream {upstream.name}: tag {upstream.base} now resolves to {base[:12]}, not {settled.tag_commit[:12]}"
            " as at the last apply (was it force-pushed?); pin base-commit in kpatch.toml to catch this as an error")

