"""The `Requires:` an imported stack should carry: a patch whose Python calls an op that a patch of a stack it
requires registers (the op contract reads both sides: the kernels' C++ registrations, the app's `torch.ops`
calls) should name that patch. Printed by `kpatch import`; written with `--requires-auto`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kpatch.config import Upstream
from kpatch.gitx import Repository
from kpatch.gitx.am import AM_OPTIONS
from kpatch.project.workspace import Workspace
from kpatch.stack import load_series
from kpatch.stack.writer import Rendered

log = logging.getLogger("kpatch")


@dataclass(frozen=True)
class Suggestion:
    """A `Requires:` a patch should carry: it calls an op a patch of a stack it requires registers."""

    patch: str  # file name in the imported stack
    requires: str  # "kernels/0001-....patch", as the trailer spells it
    op: str  # "namespace.op"


def suggest(ws: Workspace, upstream: Upstream, tree: Repository, rendered: Rendered) -> tuple[Suggestion, ...]:
    """For each patch of `rendered` (made from `tree`), the Requires: it lacks, from the op contract."""
    from kpatch.verify.contract import pycalls

    registered: dict[tuple[str, str], str] = {}  # (namespace, op) -> "stack/patch" that first registers it
    for name in sorted(ws.stack.closure(upstream.name)):
        for key, first in registering_patches(ws, ws.stack.get(name)).items():
            registered.setdefault(key, f"{name}/{first}")
    if not registered:
        return ()
    sites, _ = pycalls.call_sites(tree.path, frozenset(ns for ns, _ in registered))
    by_commit = {commit: path.name for path, commit in rendered.commits.items()}
    has = {p.name: {str(ref) for ref in p.requires} for p in rendered.patches}
    found: dict[tuple[str, str], Suggestion] = {}
    for site in sites:
        wanted = registered.get((site.namespace, site.op))
        patch = by_commit.get(_blame(tree, site.file, site.line)) if wanted is not None else None
        if wanted is None or patch is None or wanted in has.get(patch, set()):
            continue
        found.setdefault((patch, wanted), Suggestion(patch=patch, requires=wanted, op=f"{site.namespace}.{site.op}"))
    return tuple(found.values())


def registering_patches(ws: Workspace, upstream: Upstream) -> dict[tuple[str, str], str]:
    """{(namespace, op): the patch of `upstream`'s stack that registers it for XPU (or defines it)}: its stack
    applied onto its base in a scratch worktree, the kernels side read after each patch."""
    from kpatch.verify.contract import read_kernels, serves_xpu

    series = load_series(upstream.name, upstream.patches)
    mirror = ws.mirror(upstream.name)
    base = mirror.resolve(upstream.base) if series.patches and mirror.exists else None
    if base is None:
        return {}
    path = ws.workdir / ".import" / f"{upstream.name}.ops"
    mirror.add_worktree(path, base)
    found: dict[tuple[str, str], str] = {}
    try:
        tree = Repository(path)

        def present() -> set[tuple[str, str]]:
            side = read_kernels(path)
            return set(side.defined) | {key for key in side.keys if serves_xpu(side, *key)}

        before = present()
        for patch in series.patches:
            if tree.run(["am", *AM_OPTIONS, "--", str(patch.path)], check=False).status != 0:
                log.info("suggest: %s does not apply onto %s; later patches not read", patch.name, base[:12])
                break
            now = present()
            for key in sorted(now - before):
                found.setdefault(key, patch.name)
            before = now
    finally:
        mirror.remove_worktree(path)
    return found


def _blame(tree: Repository, file: str, line: int) -> str:
    """The commit that last changed `file`:`line` at HEAD."""
    text = tree.out(["blame", "--porcelain", "-L", f"{line},{line}", "HEAD", "--", file])
    return text.split(" ", 1)[0]


def add_trailers(tree: Repository, base: str, wanted: Mapping[str, Sequence[str]]) -> None:
    """Give the commits of base..HEAD named in `wanted` these `Requires:` trailers (git interpret-trailers), the
    rest unchanged: each commit made again with its tree, author and date, HEAD moved to the last."""
    parent = base
    for commit in tree.commits(base):
        message = tree.run(["log", "-1", "--format=%B", "--end-of-options", commit]).stdout
        refs = wanted.get(commit, ())
        if refs:
            args = [arg for ref in refs for arg in ("--trailer", f"Requires: {ref}")]
            message = tree.run(["interpret-trailers", *args], stdin=message).stdout
        who = tree.out(["log", "-1", "--format=%an%x00%ae%x00%ad", "--date=raw", "--end-of-options", commit])
        name, email, date = who.split("\0")
        env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
        parent = tree.out(["commit-tree", f"{commit}^{{tree}}", "-p", parent, "-F", "-"], stdin=message, env=env)
    tree.reset_hard(parent)
