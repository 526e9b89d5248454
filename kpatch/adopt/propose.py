"""`kpatch propose`: send patches of the stacks upstream as GitHub pull requests, the required upstream's first.

For each upstream, the named patches (and, across upstreams, the patches their `Requires:` name that have no
Upstream-PR yet) make ONE group: a branch of exactly those patches, `git am`'d onto the upstream's base in a scratch
worktree of its mirror, pushed with --force-with-lease to the person's fork (never to the upstream's URL), and ONE
pull request on the upstream, found again by its head branch on the next run (edited, never opened twice). The
patch files then get `Upstream-PR: owner/repo#N` and `Upstream-Status: submitted`, written as one journaled step.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kpatch.adopt.pull_text import pr_text
from kpatch.config import Upstream
from kpatch.engine.plan import fetch, load_all_series
from kpatch.errors import GitError, PatchConflict, SeriesError, StorageError, UpstreamError, UsageError, WorktreeError
from kpatch.forge.github.names import OWNER_PATTERN, parse_repository
from kpatch.output.redact import redact_url
from kpatch.output.ui import UI, count
from kpatch.project import journal
from kpatch.project.workspace import Workspace
from kpatch.stack import Patch, Series
from kpatch.stack.mbox import parse_patch_text

_GITHUB_PATH = re.compile(r"^(?:https?://[^/]+/|ssh://[^/]+/|[^/:@]+@[^/:]+:)(?P<owner>[^/]+)/(?P<name>[^/]+?)"
                          r"(?:\.git)?/?$")
SCOPES = ("a classic token needs the 'public_repo' scope ('repo' for a private upstream); a fine-grained one "
          "'Pull requests: write' on the upstream and 'Contents: write' on the fork")


@dataclass(frozen=True)
class Proposal:
    """One group: its branch on the fork and its pull request on the upstream (what was done, or would be)."""

    name: str = field(metadata={"json": "upstream"})
    repository: str  # owner/name: where the pull request is
    patches: tuple[str, ...]  # the patch files, in series order
    fork: str  # the fork's URL, without credentials
    branch: str  # the head branch on the fork
    head: str  # owner:branch, as the pull request names it
    base: str  # the upstream branch the pull request targets
    commit: str  # the branch's tip: the patches on the upstream's base
    push: str  # "pushed", "up to date", "would push"
    action: str  # "open", "update" (the pull request): what was done, or would be
    pull: str | None  # owner/repo#N (None: not opened yet, a dry run)
    url: str | None
    needs: tuple[str, ...]  # the pull requests this one depends on (owner/repo#N, or the group proposed first)
    title: str
    body: str
    message: str  # the forge's one line


@dataclass(frozen=True)
class ProposeResult:
    proposals: tuple[Proposal, ...]
    dry_run: bool
    written: tuple[Path, ...]  # patch files that got the Upstream-PR and Upstream-Status trailers


@dataclass
class _Group:
    upstream: Upstream
    series: Series
    patches: list[Patch]
    needs: dict[str, str] = field(default_factory=dict)  # a required patch (upstream/file) -> its PR, or ""


# --- what is proposed ---------------------------------------------------------------------------------------------


def find_patch(all_series: Mapping[str, Series], name: str) -> tuple[str, Patch]:
    """NAME is `UPSTREAM/FILE.patch` (as a Requires: trailer names it) or a FILE.patch only one stack holds."""
    upstream, slash, file = name.rpartition("/")
    if slash:
        series = all_series.get(upstream)
        if series is None:
            raise UsageError(f"{name}: unknown upstream {upstream!r} (known: {', '.join(all_series)})")
        found = next((p for p in series.patches if p.name == file), None)
        if found is None:
            raise UsageError(f"{name}: no patch {file!r} in {upstream}'s series")
        return upstream, found
    hits = [(u, p) for u, s in all_series.items() for p in s.patches if p.name == name]
    if not hits:
        raise UsageError(f"{name}: no such patch in any series (name it UPSTREAM/FILE.patch)")
    if len(hits) > 1:
        raise UsageError(f"{name}: in more than one series ({', '.join(u for u, _ in hits)}): name it "
                         "UPSTREAM/FILE.patch")
    return hits[0]


def groups(ws: Workspace, names: Sequence[str], *, no_deps: bool) -> list[_Group]:
    """The groups, required upstreams first: the named patches, and what their Requires: need without a PR."""
    all_series = load_all_series(ws.stack)
    chosen: dict[str, set[str]] = {}
    named = [find_patch(all_series, name) for name in names]
    for upstream, patch in named:
        chosen.setdefault(upstream, set()).add(patch.name)
    todo = list(named)
    seen: set[str] = set()
    needs: dict[str, dict[str, str]] = {}
    while todo:
        upstream, patch = todo.pop(0)
        if f"{upstream}/{patch.name}" in seen:
            continue
        seen.add(f"{upstream}/{patch.name}")
        chosen.setdefault(upstream, set()).add(patch.name)
        for ref in patch.requires:
            target = all_series[ref.upstream]
            if ref.patch in target.dropped:
                continue  # upstream has it already
            required = next(p for p in target.patches if p.name == ref.patch)
            if required.prs and required.name not in chosen.get(ref.upstream, set()):
                needs.setdefault(upstream, {})[str(ref)] = required.prs[0]
                continue
            if no_deps and required.name not in chosen.get(ref.upstream, set()):
                raise UsageError(f"{upstream}/{patch.name} requires {ref}, which has no Upstream-PR: propose it first "
                                 "(run without --no-deps to do both)")
            needs.setdefault(upstream, {})[str(ref)] = ""
            todo.append((ref.upstream, required))
    out = []
    for known in ws.stack.upstreams:  # dependency order: what an upstream requires comes first
        if known.name in chosen:
            series = all_series[known.name]
            patches = [p for p in series.patches if p.name in chosen[known.name]]
            out.append(_Group(known, series, patches, needs.get(known.name, {})))
    return out


# --- where it goes ------------------------------------------------------------------------------------------------


def repository_of(upstream: Upstream) -> str:
    """The upstream's `owner/name` on GitHub: [upstream.propose] repository, else from its URL."""
    if upstream.propose.repository is not None:
        return str(upstream.propose.repository)
    match = _GITHUB_PATH.match(upstream.url)
    found = parse_repository(f"{match['owner']}/{match['name']}") if match else None
    if found is None:
        raise UsageError(f"upstream {upstream.name}: its URL {upstream.display_url} names no GitHub repository: set "
                         "[upstream.propose] repository = \"OWNER/NAME\" in kpatch.toml")
    return str(found)


def fork_of(upstream: Upstream, repository: str, owner: str | None) -> tuple[str, str]:
    """(the fork's URL, its owner): [upstream.propose] fork, else the upstream's URL with --fork's owner. Never the
    upstream itself."""
    url = upstream.propose.fork
    if url is None:
        match = _GITHUB_PATH.match(upstream.url)
        if owner is None or match is None:
            raise UsageError(f"upstream {upstream.name}: no fork to push to: give --fork OWNER, or set "
                             "[upstream.propose] fork = URL in kpatch.toml")
        url = upstream.url[:match.start("owner")] + owner + upstream.url[match.end("owner"):]
    elif owner is None:
        match = _GITHUB_PATH.match(url)
        if match is None:
            raise UsageError(f"upstream {upstream.name}: the fork {redact_url(url)} names no owner: give --fork OWNER")
        owner = match["owner"]
    if not re.fullmatch(OWNER_PATTERN, owner):  # checked before anything is pushed: GitHub would refuse it after
        raise UsageError(f"upstream {upstream.name}: --fork {owner!r} is not a GitHub owner (1-39 letters, digits, "
                         "'-' or '_')")
    if owner.lower() == repository.split("/")[0].lower() or _same_place(url, upstream.url):
        raise UsageError(f"upstream {upstream.name}: the fork {redact_url(url)} is the upstream itself: kpatch "
                         "pushes only to a fork (give --fork OWNER with your own account)")
    return url, owner


def _same_place(one: str, other: str) -> bool:
    def norm(url: str) -> str:
        url = redact_url(url).rstrip("/").removesuffix(".git").removeprefix("file://")
        return os.path.realpath(url) if url.startswith("/") else url.lower()

    return norm(one) == norm(other)


def branch_name(group: _Group, line: str = "main") -> str:
    """The head branch on the fork: main's `kpatch/<upstream>/<patch>`; a release line's carries the line
    (`kpatch/<line>/<upstream>/<patch>`), so its pull request never takes over main's of the same patch file."""
    where = "" if line == "main" else f"{line}/"
    return f"kpatch/{where}{group.upstream.name}/{group.patches[0].path.stem}"


# --- the run ---------------------------------------------------------------------------------------------------------


def propose(ws: Workspace, ui: UI, names: Sequence[str], *, fork_owner: str | None, draft: bool, dry_run: bool,
            no_deps: bool, environ: Mapping[str, str]) -> ProposeResult:
    """Build, push and propose each group (see the module docstring); `dry_run` pushes, opens and writes nothing."""
    if not names:
        raise UsageError("name at least one patch: kpatch propose UPSTREAM/FILE.patch")
    with ws.writer("propose", ui):
        ws.refuse_pending_journal()
        planned = groups(ws, names, no_deps=no_deps)
        where: dict[str, tuple[str, str, str]] = {}
        for group in planned:
            repository = repository_of(group.upstream)
            where[group.upstream.name] = (repository, *fork_of(group.upstream, repository, fork_owner))
        done: list[tuple[_Group, Proposal]] = []
        opened: dict[str, str] = {}  # upstream/file -> the PR this run opened (or found) for it
        try:
            for group in planned:
                repository, fork, owner = where[group.upstream.name]
                needs = {ref: pr or opened.get(ref) or f"{where[ref.split('/')[0]][0]}#? (the pull request kpatch "
                         "proposes for it first)" for ref, pr in group.needs.items()}
                proposal = _propose_one(ws, ui, group, repository, fork, owner, needs, draft=draft, dry_run=dry_run,
                                        environ=environ)
                done.append((group, proposal))
                for patch in group.patches:
                    if proposal.pull:
                        opened[f"{group.upstream.name}/{patch.name}"] = proposal.pull
        finally:
            written = () if dry_run else _write_trailers(ws, [(g, p) for g, p in done if p.pull])
    return ProposeResult(proposals=tuple(p for _, p in done), dry_run=dry_run, written=written)


def _propose_one(ws: Workspace, ui: UI, group: _Group, repository: str, fork: str, owner: str,
                 needs: Mapping[str, str], *, draft: bool, dry_run: bool, environ: Mapping[str, str]) -> Proposal:
    # imported where used: the forge and the push load when a group is proposed, not with the module
    from kpatch.forge import hosts
    from kpatch.forge.model import Action, Outcome
    from kpatch.gitx.branch import push_lease, remote_branch

    upstream = group.upstream
    mirror = ws.mirror(upstream.name)
    commit = _build(ws, ui, group)
    branch = branch_name(group, ws.stack.line)
    head = f"{owner}:{branch}"
    title, body = pr_text(ws, group.upstream, group.patches, needs, head)
    env = hosts.push_env(fork, environ, dry_run=dry_run)
    shown = redact_url(fork)
    try:
        remote = remote_branch(mirror.path, fork, branch, env)
    except (GitError, StorageError) as err:
        why = (err.stderr if isinstance(err, GitError) and err.stderr else str(err)).strip().splitlines()
        if not dry_run:
            raise UpstreamError(f"cannot read the fork {shown} of {upstream.name}: {why[-1] if why else '?'} "
                                f"(does it exist? {SCOPES})") from None
        # a dry run sends no token: a fork only the token may read stays unread (and nothing is pushed)
        ui.note(f"{upstream.name}: the fork {shown} was not read (a dry run sends no token): "
                f"{why[-1] if why else '?'}")
        remote = None
    if remote == commit:
        push = "up to date"
    elif dry_run:
        push = "would push"
    else:
        failed = push_lease(mirror.path, commit, fork, branch, remote, env)
        if failed is not None:
            raise UpstreamError(f"cannot push {branch} to the fork {shown}: {failed}")
        push = "pushed"
    ui.note(f"{upstream.name}: {branch} {push} ({count(len(group.patches), 'patch', 'patches')}) to {shown}")
    with hosts.on_repository(repository, environ, dry_run=dry_run) as gh:
        result = gh.propose_pull(owner, branch, upstream.branch, title, body, draft=draft)
    if result.action is Action.NOTHING and result.ref is not None:
        raise UpstreamError(f"{repository}#{result.ref.number} from {head} is closed: kpatch neither reopens it nor "
                            "opens another (reopen it on GitHub, or name the patches on a new branch)")
    if result.outcome is Outcome.DENIED:
        raise UpstreamError(f"GitHub refused the pull request on {repository} ({result.message}): {SCOPES}")
    if not result.ok:
        raise UpstreamError(f"pull request on {repository} for {head}: {result.message}")
    pull = f"{repository}#{result.ref.number}" if result.ref else None
    return Proposal(name=upstream.name, repository=repository, patches=tuple(p.name for p in group.patches),
                    fork=shown, branch=branch, head=head, base=upstream.branch, commit=commit, push=push,
                    action=result.action.value, pull=pull, url=result.ref.url if result.ref else None,
                    needs=tuple(needs.values()), title=title, body=body, message=result.message)


def _build(ws: Workspace, ui: UI, group: _Group) -> str:
    """The group's patches `git am`'d onto the upstream's base in a scratch worktree: the tip commit."""
    from kpatch.gitx import Am, Repository  # gitx's face loads the am engine on first use: only here, not at import

    upstream = group.upstream
    mirror = ws.mirror(upstream.name)
    base = mirror.resolve(upstream.base) if mirror.exists else None
    if base is None:
        fetch(ws, ui, upstream)
        base = mirror.resolve(upstream.base)
    if base is None:
        raise UpstreamError(f"upstream {upstream.name}: base {upstream.base!r} is not in {upstream.display_url}")
    path = ws.workdir / ".propose" / upstream.name
    if path.exists() or mirror.owns(path):
        mirror.remove_worktree(path)
    paths = sorted({name for patch in group.patches for name in patch.paths})
    mirror.add_scratch(path, base, paths)
    try:
        tree = Repository(path)
        run = Am(tree).start([p.path for p in group.patches], lambda _done: None)
        if run.stopped:
            stuck = group.patches[len(run.methods)]
            before = ", ".join(p.name for p in group.patches[:len(run.methods)]) or "nothing"
            raise PatchConflict(f"{upstream.name}/{stuck.name} does not apply on the base {base[:12]} with only "
                                f"{before} before it: name the patches it needs too (nothing was pushed)")
        return tree.head()
    finally:
        mirror.remove_worktree(path)


def _write_trailers(ws: Workspace, done: list[tuple[_Group, Proposal]]) -> tuple[Path, ...]:
    """Upstream-PR and Upstream-Status: submitted in each proposed patch file, as one journaled step."""
    from kpatch.gitx.branch import with_trailers

    writes: dict[Path, bytes] = {}
    for group, proposal in done:
        assert proposal.pull is not None
        for patch in group.patches:
            old = patch.path.read_bytes()
            new = with_trailers(ws.mirror(group.upstream.name).path, old,
                                [("Upstream-PR", proposal.pull), ("Upstream-Status", "submitted")])
            try:
                read = parse_patch_text(new.decode("utf-8"), patch.path)
            except (SeriesError, UnicodeDecodeError) as err:
                raise WorktreeError(f"{patch.path}: the trailers would not read back ({err}); nothing was written") \
                    from None
            if proposal.pull not in read.prs or read.status is None or read.status.value != "submitted":
                raise WorktreeError(f"{patch.path}: git interpret-trailers did not add the trailers kpatch reads; "
                                    "nothing was written")
            if new != old:
                writes[patch.path] = new
    if not writes:
        return ()
    ws.check_writable(ws.kpatch_dir, *{p.parent for p in writes})
    journal.write(ws.journal_dir, "propose", writes, [])
    journal.close(ws.journal_dir)
    return tuple(sorted(writes))


def continue_propose(ws: Workspace, ui: UI) -> bool:
    """Finish the trailer write a kill interrupted: True when written now; False when it had not started."""
    with ws.writer("propose --continue", ui):
        if ws.pending_journal() != "propose":
            raise WorktreeError("nothing to continue: no interrupted propose")
        return journal.resume(ws.journal_dir)


def abort_propose(ws: Workspace, ui: UI) -> None:
    """Put every patch file an interrupted propose touched back as it was (the pull requests stay open)."""
    with ws.writer("propose --abort", ui):
        if ws.pending_journal() != "propose":
            raise WorktreeError("nothing to abort: no interrupted propose")
        aside = journal.back(ws.journal_dir)
        if aside is not None:
            ui.warn(f"the journal could not be read: set aside as {aside}; patches/ is as the interrupted propose "
                    "left it (check it with 'git status')")
