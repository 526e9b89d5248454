"""Check everything before changing anything: series, cross-stack `Requires:`, bases, patch paths."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kpatch import git
from kpatch.config import SHA_RE, Stack, Upstream
from kpatch.errors import ConfigError, SeriesError, UpstreamError
from kpatch.series import Series, load_series
from kpatch.ui import UI
from kpatch.workspace import Workspace


@dataclass(frozen=True)
class Item:
    """One upstream, its stack, and the commit the stack goes onto."""

    upstream: Upstream
    series: Series
    base: str | None  # None when not resolved (no mirror yet and fetching was not allowed)
    mirror: Path
    worktree: Path


def load_all_series(stack: Stack) -> dict[str, Series]:
    """Every stack's series, with each `Requires:` checked against the stacks it may name."""
    all_series = {u.name: load_series(u.name, u.patches) for u in stack.upstreams}
    for upstream in stack.upstreams:
        allowed = stack.closure(upstream.name)
        for patch in all_series[upstream.name].patches:
            for ref in patch.requires:
                where = f"{patch.path}:{ref.line}"
                if ref.upstream not in all_series:
                    raise SeriesError(f"{where}: Requires names unknown upstream {ref.upstream!r}")
                if ref.upstream not in allowed:
                    raise SeriesError(f"{where}: Requires {ref} but {upstream.name!r} does not require "
                                      f"{ref.upstream!r} in {stack.path.name}")
                target = all_series[ref.upstream]
                if ref.patch not in target.names() and ref.patch not in target.dropped:
                    raise SeriesError(f"{where}: Requires {ref}, which is not in {ref.upstream}'s series")
    return all_series


def resolve_items(ws: Workspace, ui: UI, onto: Mapping[str, str], *, fetch: bool) -> list[Item]:
    """Resolve every upstream's target commit, fetching only what the mirror lacks (or any branch `--onto`)."""
    series = load_all_series(ws.stack)
    for name in onto:
        ws.stack.get(name)
    items = []
    for upstream in ws.stack.upstreams:
        mirror = ws.mirror(upstream.name)
        ref = onto.get(upstream.name, upstream.base)
        base = git.resolve(mirror, ref) if (mirror / "HEAD").exists() else None
        moving = upstream.name in onto and not SHA_RE.match(ref)
        if fetch and (base is None or moving):
            with ui.progress(f"fetching {upstream.name} from {upstream.url}", 100) as report:
                git.fetch_mirror(mirror, upstream.url, upstream.name, report)
            base = git.resolve(mirror, ref)
            if base is None:
                raise UpstreamError(
                    f"upstream {upstream.name}: {ref!r} is not a commit, tag or branch of {upstream.url}")
        if base is not None and upstream.name not in onto:
            _check_recorded(ws.stack, upstream, base, ui)
        items.append(Item(upstream=upstream, series=series[upstream.name], base=base, mirror=mirror,
                          worktree=ws.worktree(upstream.name)))
    return items


def check_symlinks(item: Item) -> None:
    """Refuse a stack that would write through a symlink of the base tree or one an earlier patch adds."""
    assert item.base is not None
    paths = [p for patch in item.series.patches for p in patch.paths]
    links = git.symlinks_in_tree(item.mirror, item.base, paths)
    for patch in item.series.patches:
        for path in patch.paths:
            parents = ["/".join(path.split("/")[:i]) for i in range(1, path.count("/") + 1)]
            hit = next((p for p in parents if p in links), None)
            if hit:
                raise SeriesError(f"{patch.path}: patch writes {path!r} through the symlink {hit!r}")
        links |= set(patch.new_symlinks)


def _check_recorded(stack: Stack, upstream: Upstream, base: str, ui: UI) -> None:
    if upstream.base_commit is None or upstream.base_commit == base:
        return
    message = (f"upstream {upstream.name}: {upstream.base} resolves to {base[:12]}, "
               f"not the recorded base-commit {upstream.base_commit[:12]}")
    if upstream.url_overridden:
        ui.warn(f"{message} (URL overridden to {upstream.url}; using {base[:12]})")
        return
    raise ConfigError(f"{stack.path}:{upstream.line}: {message} (did the tag move?)")
