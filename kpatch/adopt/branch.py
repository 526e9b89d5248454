"""`kpatch import NAME --from URL_OR_PATH@BRANCH`: a fork branch's commits since the base become NAME's stack, and
the step every import ends with (the stack writer's files, written in one journaled step)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kpatch.adopt.suggest import Suggestion, add_trailers, suggest
from kpatch.config import Upstream
from kpatch.engine.plan import check_base, fetch, load_all_series, requires_problem
from kpatch.errors import PatchConflict, UpstreamError, UsageError, WorktreeError
from kpatch.gitx import Mirror, Repository, commit_patch_ids
from kpatch.gitx.mirror import fetch_failure
from kpatch.gitx.repo import UPSTREAM_REFS
from kpatch.output.redact import redact_url
from kpatch.output.ui import UI, count
from kpatch.project import journal
from kpatch.project.workspace import Workspace
from kpatch.stack import SERIES, Series
from kpatch.stack.writer import as_am_reads, render

MAX_COMMITS = 1000


@dataclass(frozen=True)
class Skipped:
    """A commit of the fork that is not in the stack, and why."""

    commit: str
    subject: str
    why: str  # "empty" or "upstream"
    upstream_commit: str | None = None  # the upstream commit with the same patch-id


@dataclass(frozen=True)
class Reworded:
    """A commit (or a --series file) whose subject `git am` reads otherwise: written as git am reads it, so that
    the patch file gives back the commit it was made from."""

    commit: str  # the fork's commit ("" for a file of --series)
    file: str  # the --series file ("" for --from)
    subject: str  # as it was
    now: str  # as it is written: every run of spaces one space, as git am reads it


@dataclass(frozen=True)
class ImportResult:
    name: str = field(metadata={"json": "upstream"})
    base: str
    files: tuple[Path, ...]  # the patch files written, in series order
    skipped: tuple[Skipped, ...] = ()
    suggestions: tuple[Suggestion, ...] = ()
    base_pinned: bool = False  # kpatch.toml's base was set to `base` (--base named another commit)
    reworded: tuple[Reworded, ...] = ()


def parse_source(value: str, name: str) -> tuple[str, str]:
    """`URL_OR_PATH@BRANCH` -> (URL or absolute path, branch); the URL checked as upstream URLs are (a refusal
    names the upstream `name` the fork is imported for)."""
    url, at, branch = value.rpartition("@")
    if not at or not url or not branch or ":" in branch:
        raise UsageError(f"--from takes URL_OR_PATH@BRANCH, got {value!r}")
    from kpatch.adopt.init import fetchable  # imported where used, as the rest of init is not

    return fetchable(url, f"--from (upstream {name})"), branch


def import_branch(ws: Workspace, ui: UI, name: str, url: str, branch: str, *, base_ref: str | None,
                  include_upstream: bool = False, max_commits: int = MAX_COMMITS,
                  requires_auto: bool = False) -> ImportResult:
    """The commits of `branch` at `url` since the base, as NAME's stack (nothing written on any refusal)."""
    _load_ahead()
    with ws.writer("import", ui):
        upstream, series = empty_stack(ws, name)
        where = resolve_base(ws, ui, upstream, base_ref)
        mirror, base = where.mirror, where.commit
        ref = _ref(name)
        try:
            tip = _fetch_branch(mirror, name, url, branch, ref)
            listed = _checked_range(mirror, base, tip, f"{redact_url(url)}@{branch}", max_commits)
            commits = [c.sha for c in listed]
            skipped = _empty(mirror, base, listed)
            if not include_upstream:
                skipped += _upstream(mirror, upstream, base, tip, commits, {s.commit for s in skipped})
            gone = {s.commit for s in skipped}
            kept = [c for c in commits if c not in gone]
            if gone or upstream.requires:  # the picks, and the op contract's reading, need the files: a worktree
                with scratch(ws, mirror, name, base if gone else tip) as tree:
                    if gone:
                        _pick(tree, kept)
                    reworded, made = _reword(tree, base, tree.head(), kept)
                    if reworded:
                        tree.reset_hard(made)
                    files, suggestions = write_stack(ws, upstream, series, tree, where, requires_auto=requires_auto)
            else:  # the fetched commits are the stack: written from the mirror, with no worktree
                reworded, made = _reword(mirror, base, tip, kept, listed)
                files, suggestions = write_stack(ws, upstream, series, mirror, where, requires_auto=requires_auto,
                                                 tip=made)
        finally:
            mirror.run(["update-ref", "-d", ref], check=False)
    order = {c: i for i, c in enumerate(commits)}
    skipped.sort(key=lambda s: order[s.commit])
    return ImportResult(name=name, base=base, files=files, skipped=tuple(skipped), suggestions=suggestions,
                        base_pinned=where.moved, reworded=tuple(reworded))


def continue_import(ws: Workspace, ui: UI) -> bool:
    """Finish an import a kill interrupted: True when its files are written now; False when it had not started
    writing (nothing changed: run the import again)."""
    with ws.writer("import --continue", ui):
        if ws.pending_journal() != "import":
            raise WorktreeError("nothing to continue: no interrupted import")
        clear_leftovers(ws)
        return journal.resume(ws.journal_dir)


def abort_import(ws: Workspace, ui: UI) -> None:
    """Put every file an interrupted import touched back as it was."""
    with ws.writer("import --abort", ui):
        if ws.pending_journal() != "import":
            raise WorktreeError("nothing to abort: no interrupted import")
        clear_leftovers(ws)
        aside = journal.back(ws.journal_dir)
        if aside is not None:
            ui.warn(f"the journal could not be read: set aside as {aside}; patches/ is as the interrupted import "
                    "left it (check it with 'git status')")


# --- shared by both imports ------------------------------------------------------------------------------------


def _ref(name: str) -> str:
    return f"refs/kpatch/import/{name}"


def clear_leftovers(ws: Workspace) -> None:
    """Remove the scratch worktrees and fetched-branch refs a killed import left."""
    for upstream in ws.stack.upstreams:
        mirror = ws.mirror(upstream.name)
        if not mirror.exists:
            continue
        for path in (ws.workdir / ".import" / upstream.name, ws.workdir / ".import" / f"{upstream.name}.ops"):
            if path.exists() or mirror.owns(path):
                mirror.remove_worktree(path)
        if mirror.resolve(_ref(upstream.name)) is not None:
            mirror.run(["update-ref", "-d", _ref(upstream.name)])


def empty_stack(ws: Workspace, name: str) -> tuple[Upstream, Series]:
    upstream = ws.stack.get(name)
    ws.refuse_if_busy()
    clear_leftovers(ws)
    series = load_all_series(ws.stack)[name]
    if series.patches:
        raise UsageError(f"{upstream.patches / SERIES} already lists {count(len(series.patches), 'patch', 'patches')}:"
                         " kpatch import fills an empty stack (nothing was written)")
    return upstream, series


@dataclass(frozen=True)
class Base:
    """Where the imported stack goes: the upstream's mirror and the base commit; `moved` when `--base` named
    another commit than kpatch.toml's base (the import then pins kpatch.toml to it, in the same step)."""

    mirror: Mirror
    commit: str
    moved: bool


def resolve_base(ws: Workspace, ui: UI, upstream: Upstream, base_ref: str | None) -> Base:
    """The upstream's mirror (fetched when it lacks the base) and the base commit: `--base`, else kpatch.toml's."""
    mirror = ws.mirror(upstream.name)
    ref = base_ref or upstream.base
    base = mirror.resolve(ref) if mirror.exists else None
    if base is None or not mirror.refs(UPSTREAM_REFS):
        fetch(ws, ui, upstream)
        base = mirror.resolve(ref)
    if base is None:
        raise UpstreamError(f"upstream {upstream.name}: {ref!r} is not a commit, tag or branch of "
                            f"{upstream.display_url}")
    if base_ref is None:
        check_base(ws.stack, upstream, base, None, ui)
        return Base(mirror=mirror, commit=base, moved=False)
    return Base(mirror=mirror, commit=base, moved=mirror.resolve(upstream.base) != base)


@contextmanager
def scratch(ws: Workspace, mirror: Mirror, name: str, commit: str,
            paths: Sequence[str] | None = None) -> Iterator[Repository]:
    """A worktree of the mirror at `commit` (with `paths`: only those files on disk, a sparse checkout), removed
    afterwards whatever happens."""
    path = ws.workdir / ".import" / name
    if paths is None:
        mirror.add_worktree(path, commit)
    else:
        mirror.add_scratch(path, commit, paths)
    try:
        yield Repository(path)
    finally:
        mirror.remove_worktree(path)


def write_stack(ws: Workspace, upstream: Upstream, series: Series, tree: Repository, where: Base, *,
                requires_auto: bool, tip: str | None = None) -> tuple[tuple[Path, ...], tuple[Suggestion, ...]]:
    """base..tip (default: HEAD, a worktree's) of `tree` as the stack's patch files and series (as export writes
    them), and kpatch.toml's base when it moved, in one journaled step. Suggestions need a worktree at HEAD."""
    base = where.commit
    head = tip or tree.head()
    if head == base:
        raise UsageError(f"no commits to import for {upstream.name}: the stack would be empty (nothing was written)")
    staged = journal.Stager(ws.journal_dir, "import")  # the patch files staged (and fsynced) as they are read
    try:
        return _write_stack(ws, upstream, series, tree, where, head, staged, requires_auto=requires_auto)
    finally:
        staged.abandon()


def _write_stack(ws: Workspace, upstream: Upstream, series: Series, tree: Repository, where: Base, head: str,
                 staged: journal.Stager, *, requires_auto: bool) -> tuple[tuple[Path, ...], tuple[Suggestion, ...]]:
    base = where.commit
    rendered = render(tree, base, series, series.dropped, tip=head, stage=staged.put)
    suggestions = suggest(ws, upstream, tree, rendered) if upstream.requires else ()
    if requires_auto and suggestions:
        made_from = {path.name: commit for path, commit in rendered.commits.items()}
        wanted: dict[str, list[str]] = {}
        for suggestion in suggestions:
            wanted.setdefault(made_from[suggestion.patch], []).append(suggestion.requires)
        add_trailers(tree, base, wanted)
        rendered = render(tree, base, series, series.dropped)
    after = load_all_series(ws.stack)
    after[upstream.name] = rendered.as_series(series, series.dropped)
    wrong = requires_problem(ws.stack, after)
    if wrong is not None:
        patch, ref, why = wrong
        first = after.get(ref.upstream)
        hint = f" (import {ref.upstream} first)" if first is not None and not first.patches else ""
        raise WorktreeError(f"{patch.path.name} (line {ref.line}): {why}{hint}; nothing was written")
    ws.check_writable(ws.kpatch_dir, upstream.patches, *([ws.stack.path] if where.moved else []))
    writes = {**rendered.files, upstream.patches / SERIES: rendered.series}
    if where.moved:
        from kpatch.config.edit import with_new_bases  # only here: the base moved

        writes[ws.stack.path] = with_new_bases(ws.stack.path, {upstream.name: base})
    journal.write(ws.journal_dir, "import", writes, [], staged)
    journal.close(ws.journal_dir)
    return tuple(rendered.files), suggestions


# --- the fork branch --------------------------------------------------------------------------------------------


def _load_ahead() -> None:
    """Import, in a thread of its own, what reading the patches will need (the email parser with the modules it
    loads when it first runs, the thread pool): this thread mostly waits for git until then."""
    import threading

    def load() -> None:
        import concurrent.futures  # noqa: F401  # loaded, nothing more
        from email.parser import HeaderParser

        HeaderParser().parsestr("Subject: x\n\n")

    threading.Thread(target=load, name="kpatch-load").start()  # not a daemon: never cut off mid-import at exit


def _fetch_branch(mirror: Mirror, name: str, url: str, branch: str, ref: str) -> str:
    """Fetch the fork's branch into the upstream's mirror under `ref` (no tags: the fork's would count as the
    upstream's); its commit."""
    proc = mirror.run(["fetch", "--no-tags", "--no-write-fetch-head", "--", url, f"+refs/heads/{branch}:{ref}"],
                      check=False, user_config=True)
    tip = mirror.resolve(ref) if proc.status == 0 else None
    if tip is None:
        why = fetch_failure(proc.stderr)
        raise UpstreamError(f"{name}: cannot fetch branch {branch!r} from {redact_url(url)}: {why}")
    return tip


@dataclass(frozen=True)
class _Commit:
    """One commit of the fork's range, as one `git log` lists it (what the checks, the empty commits and the
    rewording read)."""

    sha: str
    parents: tuple[str, ...]
    tree: str
    subject: str  # %s, as `Repository.out` decodes it
    fields: tuple[str, ...]  # what `_reword` reads: tree, author (name, email, date), committer (same), message


# One commit per entry, NUL-terminated fields; --date=raw: the dates as git writes them into a commit.
_LISTING = ("--format=%H%x00%P%x00%T%x00%an%x00%ae%x00%ad%x00%cn%x00%ce%x00%cd%x00%s%x00%B%x00", "--date=raw")
_FIELDS = 11


def _listing(tree: Repository, base: str, tip: str) -> list[_Commit]:
    """base..tip, oldest first, from one `git log`."""
    raw = tree.run(["log", "--reverse", *_LISTING, "--end-of-options", f"{base}..{tip}"]).stdout.split(b"\0")
    found = []
    for at in range(0, len(raw) - _FIELDS + 1, _FIELDS):
        sha, parents, treeish, *who, subject, message = raw[at:at + _FIELDS]
        text = [part.decode("utf-8", "surrogateescape") for part in (treeish, *who, message)]
        found.append(_Commit(sha=sha.lstrip(b"\n").decode(), parents=tuple(parents.decode().split()),
                             tree=treeish.decode(), subject=subject.decode("utf-8", "replace"), fields=tuple(text)))
    return found


def _checked_range(mirror: Mirror, base: str, tip: str, where: str, max_commits: int) -> list[_Commit]:
    """The fork's commits since the base, oldest first: refused when the branch does not descend from the base,
    holds more than `max_commits` or holds a merge."""
    if not mirror.is_ancestor(base, tip):
        raise UsageError(f"{where} does not descend from the base {base[:12]}: give the commit it forked from "
                         "with --base (nothing was written)")
    listed = _listing(mirror, base, tip)
    if len(listed) > max_commits:
        raise UsageError(f"{where} has {len(listed)} commits since the base {base[:12]}, more than --max-commits "
                         f"{max_commits} (nothing was written)")
    merges = [c.sha for c in listed if len(c.parents) > 1]
    if merges:
        raise UsageError(f"{where}: commit {merges[0][:12]} \"{mirror.commit_info(merges[0]).subject}\" is a merge;"
                         " a patch stack is a straight line of commits: rebase the branch first (nothing was written)")
    return listed


def _empty(mirror: Mirror, base: str, listed: list[_Commit]) -> list[Skipped]:
    """The commits that change nothing (the same tree as their parent)."""
    if not listed:
        return []
    # --verify: without it, git 2.39's rev-parse prints "--end-of-options" itself before the tree, and the first
    # commit (compared with that) was never found empty.
    before = mirror.out(["rev-parse", "--verify", "--end-of-options", f"{base}^{{tree}}"])
    found = []
    for commit in listed:
        if commit.tree == before:
            found.append(Skipped(commit=commit.sha, subject=commit.subject, why="empty"))
        before = commit.tree
    return found


def _upstream(mirror: Mirror, upstream: Upstream, base: str, tip: str, commits: list[str],
              skip: set[str]) -> list[Skipped]:
    """The commits whose patch-id equals a commit's on the upstream branch after the base (as the rebase finds
    merged patches): already upstream."""
    head = mirror.resolve(f"{UPSTREAM_REFS}{upstream.branch}")
    if head is None or head == base:  # nothing upstream after the base
        return []
    paths = sorted(set(mirror.out(["log", "--no-renames", "--format=", "--name-only", "--end-of-options",
                                   f"{base}..{tip}"]).splitlines()) - {""})
    theirs = {pid: commit for commit, pid in commit_patch_ids(mirror, base, head, paths).items()}
    if not theirs:  # no upstream commit touches the fork's files: none of its commits can be there
        return []
    subjects: dict[str, str] = {}
    ours = commit_patch_ids(mirror, base, tip, paths, subjects=subjects)
    return [Skipped(commit=c, subject=subjects.get(c, ""), why="upstream", upstream_commit=theirs[ours[c]])
            for c in commits if c not in skip and ours.get(c) in theirs]


def _reword(tree: Repository, base: str, tip: str, originals: list[str],
            listed: list[_Commit] | None = None) -> tuple[list[Reworded], str]:
    """Give each commit of base..tip (made from `originals`, in order) whose one-line subject git am reads with its
    spaces collapsed that subject, and the commits after it their new parents (trees, authors, committers and dates
    kept): the stack's files then give back the commits. Real histories have them ("Fix  the cache"). Returns them
    and the commit the stack ends at now (`tip` when none was reworded). `listed`: base..tip listed already."""
    from kpatch.gitx.commits import Ident, NewCommit, chain  # the commits of a reworded stack

    reworded: list[Reworded] = []
    parent = base
    made: list[NewCommit] = []  # the commits from the first one reworded on, each on the one before
    for index, listing in enumerate(listed if listed is not None else _listing(tree, base, tip)):
        commit = listing.sha
        treeish, name, email, date, cname, cemail, cdate, message = listing.fields
        read = as_am_reads(message)
        if read is not None:
            reworded.append(Reworded(commit=originals[index], file="", subject=message.partition("\n")[0],
                                     now=read.partition("\n")[0]))
            message = read
        elif not reworded:  # the commits before the first one reworded stay as they are
            parent = commit
            continue
        made.append(NewCommit(tree=treeish, author=Ident(name, email, date), committer=Ident(cname, cemail, cdate),
                              message=message.encode("utf-8", "surrogateescape")))
    return (reworded, chain(tree, parent, made)) if reworded else ([], tip)


def _pick(tree: Repository, kept: list[str]) -> None:
    """Put the kept commits onto the base in order: the skipped ones left out."""
    from kpatch.gitx import picks

    if not kept:
        return
    done = picks.pick(tree, kept, lambda _done: None)
    if done is None or done.stopped:
        at = kept[len(done.picked)] if done is not None else kept[0]
        raise PatchConflict(f"commit {at[:12]} \"{tree.commit_info(at).subject}\" does not apply onto the base "
                            "without the commits left out (already upstream or empty): import with "
                            "--include-upstream, or with --base at a later upstream commit (nothing was written)")
