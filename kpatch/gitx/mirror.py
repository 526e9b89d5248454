"""Bare mirrors of the upstreams: which URLs may be fetched, the fetch itself, and the worktrees made from them."""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from subprocess import Popen

from kpatch import killseam
from kpatch.errors import GitError, StorageError, UpstreamError
from kpatch.gitx.checkout import initializing, names_worktree
from kpatch.gitx.localobjects import link_fetched
from kpatch.gitx.repo import UPSTREAM_REFS, Repository
from kpatch.gitx.runner import popen, run
from kpatch.gitx.storage import storage_problem
from kpatch.gitx.urls import is_url, stored_url, url_problem
from kpatch.output.redact import redact_text, redact_url

log = logging.getLogger("kpatch.git")

FETCH_TRIES = 3
_RECEIVING = re.compile(r"Receiving objects:\s+(\d+)%")
_BARE = re.compile(r"^\s*bare\s*=", re.MULTILINE | re.IGNORECASE)
KEY_CONFIG = "kpatch.url"  # the normalised URL a mirror is the mirror of (what its folder name is keyed by)
_LAYOUT = "kpatch.upstreamrefs"  # set once the mirror fetches into UPSTREAM_REFS (older mirrors used refs/heads)
REMOTE = "upstream"  # the mirror's one remote: its fetch refspec, and a blobless mirror's promisor remote
BLOB_FILTER = "blob:none"
_NO_FILTER = "filtering not recognized by server"  # git's warning when the server does not allow --filter
# What a server advertises, as GIT_TRACE_PACKET shows it: protocol v2's `fetch=<features>` line, or v0's
# capabilities after the first ref.
_ADVERTISED = re.compile(r"packet:\s+ls-remote< (?:fetch=|[0-9a-f]{40} [^\\]*\\0)(.*)$")
_PREIMAGE = re.compile(r"^index ([0-9a-f]{40})\.\.", re.MULTILINE)  # a full-index patch's preimage blob
_FETCHED: dict[Path, str] = {}  # mirror -> the URL this run fetched it from (userinfo kept), for blobs fetched later


def retry_delay() -> float:
    """Seconds before the second fetch try (twice that before the third): KPATCH_FETCH_RETRY_DELAY, else 1."""
    try:
        return max(0.0, float(os.environ.get("KPATCH_FETCH_RETRY_DELAY", "1")))
    except ValueError:
        return 1.0


def blobless_wanted() -> bool:
    """Whether a new mirror is a blobless partial clone (KPATCH_BLOBLESS=1; off by default: docs/mirrors.md)."""
    return os.environ.get("KPATCH_BLOBLESS", "0").strip().lower() in {"1", "true", "yes", "on"}


class Mirror(Repository):
    """The bare mirror of one upstream in the cache: every branch (under UPSTREAM_REFS) and tag, fetched
    incrementally. Its refs/heads is the people's: every worktree shares the mirror's refs, and no fetch touches it."""

    def __init__(self, path: Path, name: str, *, url: str | None = None,
                 guard: Callable[[], AbstractContextManager[object]] | None = None) -> None:
        super().__init__(path)
        self.name = name
        self.url = url  # the normalised URL it is the mirror of (recorded in its config as KEY_CONFIG), if known
        self._guard = guard or nullcontext  # held while the mirror itself is written (a fetch): the cache's lock

    @property
    def partial(self) -> bool:
        """True for a blobless mirror: git fetches a blob it lacks from the promisor remote when it needs one."""
        return self.exists and self.run(["config", "--bool", "--get", f"remote.{REMOTE}.promisor"],
                                        check=False).text.strip() == "true"

    @property
    def exists(self) -> bool:
        """A whole mirror: everything `git init --bare` makes (one a kill interrupted lacks part of it)."""
        if not ((self.path / "HEAD").is_file() and (self.path / "objects").is_dir() and (self.path / "refs").is_dir()):
            return False
        configs = (self.path / "config", self.path / "config.worktree")  # core.bare may move to the second
        return any(_BARE.search(c.read_text(errors="replace")) for c in configs if c.is_file())

    def _create(self) -> None:
        """Make the bare repository in a folder of its own, then rename it into place: a kill leaves no mirror or
        a whole one. A half-made one (an older kpatch's, killed in `git init`) and leftovers go first."""
        parent = self.path.parent
        parent.mkdir(parents=True, exist_ok=True)
        for left in [*parent.glob(f"{self.path.name}.new-*"), *([self.path] if self.path.exists() else [])]:
            log.warning("removing %s: a mirror a killed kpatch left half-made", left)
            shutil.rmtree(left)
        fresh = parent / f"{self.path.name}.new-{os.getpid()}"
        run(["init", "--quiet", "--bare", "--", str(fresh)])
        # The layout `_migrate_layout` gives an older mirror, written with the config git init wrote (constants: no
        # quoting needed), so that a new mirror needs no migration and no process for it.
        with (fresh / "config").open("a", encoding="utf-8") as config:
            config.write(f'[remote "{REMOTE}"]\n\tfetch = +refs/heads/*:{UPSTREAM_REFS}*\n'
                         f"[kpatch]\n\tupstreamrefs = {UPSTREAM_REFS}\n")
        if self.url is not None:
            run(["config", "--file", str(fresh / "config"), KEY_CONFIG, self.url])
        killseam.reached("mirror:init")
        fresh.rename(self.path)

    def fetch(self, url: str, on_progress: Callable[[int], None] = lambda _percent: None, *,
              sleep: Callable[[float], None] = time.sleep, hint: str | None = None) -> str | None:
        """Fetch every branch and tag of `url` (tried FETCH_TRIES times, unless git's answer cannot change on a
        retry: no repository there, not found, authentication refused); `on_progress` gets percent received.
        `hint`: what a failure's message ends with (how to work offline, in the caller's options), else nothing.

        A new mirror fetched from a URL (not a local path) is a blobless partial clone (commits and trees only;
        blobs come when they are needed) when blobless_wanted() and the server allows filters; from a server that
        does not, it is a full one. Returns a note for a person when that fallback happened, else None. An existing
        mirror keeps what it is (full or blobless): a blobless one fetches its blobs from the URL fetched last.
        """
        problem = url_problem(url)
        if problem:
            raise UpstreamError(f"upstream {self.name}: {problem}")
        with self._guard():
            return self._fetch(url, on_progress, sleep, hint)

    def _fetch(self, url: str, on_progress: Callable[[int], None], sleep: Callable[[float], None],
               hint: str | None) -> str | None:
        created = not self.exists
        if created:
            self._create()
        _FETCHED[self.path] = url
        if created and url.startswith("/"):  # a path on this disk: its objects linked, the fetch finds them here
            link_fetched(url, self.path)
        # A path on this disk (the way to work offline) is fetched whole: nothing to save, and its blobs are there.
        new = blobless_wanted() and is_url(url) and not self.refs("refs/")
        refused = new and not self._allows_filter(url)
        new = new and not refused
        blobless = new or (not created and self.partial)  # a mirror made just now is a full one until fetched
        last = ""
        for attempt in range(1, FETCH_TRIES + 1):
            status, stderr = self._fetch_once(url, on_progress, blobless=blobless)
            if status == 0:
                note = self._settle_filter(url, stderr) if new else self._no_filter(url) if refused else None
                if not created:  # a new mirror has the layout already
                    self._migrate_layout()
                on_progress(100)
                # Changed-path Bloom filters let path-limited walks (already-merged detection) skip most commits.
                self.run(["commit-graph", "write", "--reachable", "--changed-paths", "--split"])
                return note
            problem = storage_problem(["fetch"], stderr, self.path)
            if problem:  # a full or read-only cache: trying again cannot help, and it is not the upstream's fault
                raise StorageError(problem)
            last = redact_text(fetch_failure(stderr))
            tail = f" ({hint})" if hint else ""
            if permanent(stderr):  # the same answer on every try: said at once
                raise UpstreamError(f"upstream {self.name}: cannot fetch {redact_url(url)}: {last}{tail}")
            log.warning("fetch %s from %s failed (try %d/%d): %s", self.name, redact_url(url), attempt, FETCH_TRIES,
                        last)
            if attempt < FETCH_TRIES:
                sleep(retry_delay() * attempt)
        raise UpstreamError(f"upstream {self.name}: cannot fetch {redact_url(url)} after {FETCH_TRIES} tries: {last}"
                            f"{tail}")

    def seed(self, source: Mirror) -> None:
        """Make this (absent) mirror a local copy of `source`'s refs and objects (hard links where the file system
        allows): a scratch mirror that later fetches only what is newer, and writes nothing into `source`."""
        if self.exists or not source.exists:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        run(["clone", "--quiet", "--mirror", "--", str(source.path), str(self.path)])
        if source.run(["config", "--get", _LAYOUT], check=False).text.strip() == UPSTREAM_REFS:
            self.set_config(_LAYOUT, UPSTREAM_REFS)
            self.set_config("remote.upstream.fetch", f"+refs/heads/*:{UPSTREAM_REFS}*")
        if source.partial:  # a blobless source lacks blobs: the copy asks the same promisor remote for them
            for key in (f"remote.{REMOTE}.url", f"remote.{REMOTE}.promisor", f"remote.{REMOTE}.partialclonefilter"):
                value = source.run(["config", "--get", key], check=False).text.strip()
                if value:
                    self.set_config(key, value)

    def _fetch_once(self, url: str, on_progress: Callable[[int], None], *, blobless: bool = False) -> tuple[int, str]:
        """One `git fetch --progress`, turning "Receiving objects:  45% (...)" into on_progress(45)."""
        # Tags fetched with --tags (and --force: a moved tag moves) are not pruned, so a person's tag stays too.
        args = ["fetch", "--progress", "--prune", "--tags", "--force", "--no-write-fetch-head"]
        if blobless:  # by the remote's name: git records a filter's promisor remote under the name fetched from
            self.set_config(f"remote.{REMOTE}.url", stored_url(url))
            args = [*args, f"--filter={BLOB_FILTER}", "--", REMOTE]
        else:
            args = [*args, "--", url]
        proc = popen([*args, f"+refs/heads/*:{UPSTREAM_REFS}*"], self.path, env=self._credentials(url) if blobless
                     else None, user_config=True, with_stdout=False)
        assert proc.stderr is not None
        lines: list[str] = []
        stream = proc.stderr.fileno()
        for chunk in iter(lambda: os.read(stream, 4096), b""):
            for piece in re.split(r"[\r\n]", chunk.decode("utf-8", "replace")):
                match = _RECEIVING.search(piece)
                if match:
                    on_progress(int(match.group(1)))
                elif piece.strip():
                    lines.append(piece)
        proc.stderr.close()
        return proc.wait(), "\n".join(lines)

    @staticmethod
    def _credentials(url: str) -> dict[str, str]:
        """The environment that gives this one git the URL's userinfo, which the mirror's config does not keep
        (git's config from the environment: a key may hold any character, `=` of a token too)."""
        stored = stored_url(url)
        return {} if stored == url else {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.{url}.insteadOf",
                                         "GIT_CONFIG_VALUE_0": stored}

    def _allows_filter(self, url: str) -> bool:
        """Whether the server says it serves partial clones: `filter` among the capabilities it advertises (one
        `git ls-remote`, its packets traced). git's dumb HTTP protocol advertises nothing, and a filtered fetch
        over it never ends: it marks the remote a promisor, and each object the dumb walker lacks starts a lazy
        fetch from that remote, whose walker lacks one too. An unreachable server counts as allowing: the fetch
        then fails, with its retries and its message."""
        env = {**self._credentials(url), "GIT_TRACE_PACKET": "1"}
        done = run(["-c", "protocol.version=2", "ls-remote", "--", url], self.path, env=env, user_config=True,
                   check=False)
        if done.status != 0:
            return True
        for line in done.stderr.splitlines():
            said = _ADVERTISED.search(line)
            if said and "filter" in said.group(1).split():
                return True
        return False

    def _settle_filter(self, url: str, stderr: str) -> str | None:
        """After a blobless fetch: a server that ignored the filter sent everything, so the mirror is a full one
        (no promisor remote: later fetches ask for no filter); the note says so once."""
        if _NO_FILTER not in stderr:
            return None
        for key in (f"remote.{REMOTE}.promisor", f"remote.{REMOTE}.partialclonefilter"):
            self.run(["config", "--unset-all", key], check=False)
        return self._no_filter(url)

    def _no_filter(self, url: str) -> str:
        return (f"{redact_url(url)} does not allow partial clones (uploadpack.allowFilter): {self.name}'s mirror "
                "has the whole history, blobs too")

    def prefetch_tree(self, commit: str, paths: Sequence[str] | None = None) -> None:
        """Fetch, in one go, the blobs of `commit`'s tree (only `paths`, when given) a blobless mirror lacks."""
        if not self.partial:
            return
        missing = self._missing([commit], no_walk=True)
        if not missing:
            return
        listing = self.run(["ls-tree", "-r", "-z", "--full-tree", "--end-of-options", commit,
                            *(["--", *paths] if paths is not None else [])]).stdout.decode("utf-8", "surrogateescape")
        wanted = {entry.split("\t", 1)[0].split()[2] for entry in listing.split("\0") if entry}
        self.fetch_blobs(sorted(wanted & missing))

    def prefetch_diffs(self, since: str, until: str, paths: Sequence[str] | None = None, *,
                       whole_commits: bool = False) -> None:
        """Fetch, in one go, the blobs a blobless mirror lacks for the diffs of since..until (of `paths` only,
        when given; with `whole_commits`, every file of a commit that touches one of them): what `git log -p`
        (already-merged detection) reads, which git would fetch a commit at a time."""
        if not self.partial:
            return
        missing = self._missing([until, f"^{since}"]) | self._missing([since], no_walk=True)
        if not missing:
            return
        listing = self.run(["log", "--no-renames", "--raw", "-z", "--no-abbrev", "--format=%H", "--end-of-options",
                            f"{since}..{until}"]).stdout.decode("utf-8", "surrogateescape")
        chosen = set(paths) if paths is not None else None
        commits: list[list[tuple[str, list[str]]]] = []  # per commit: (path, its old and new blob) of each file
        tokens = iter(listing.split("\0"))
        for token in tokens:
            token = token.lstrip("\n")
            if token.startswith(":"):
                if commits:
                    commits[-1].append((next(tokens, ""), token.split()[2:4]))
            elif token:
                commits.append([])
        wanted: set[str] = set()
        for files in commits:
            whole = chosen is None or (whole_commits and any(path in chosen for path, _ in files))
            wanted.update(oid for path, blobs in files for oid in blobs if whole or path in (chosen or ()))
        self.fetch_blobs(sorted(wanted & missing))

    def prefetch_preimages(self, patches: Sequence[Path]) -> None:
        """Fetch, in one go, the blobs the patches' `index <old>..<new>` lines name as their preimages that a
        blobless mirror lacks: what `git am -3` reads for its 3-way fallback (git alone would fetch one a patch,
        as each falls back). When one is no upstream blob (a stack's own), nothing is fetched ahead."""
        if not self.partial:
            return
        wanted: set[str] = set()
        for patch in patches:
            try:
                text = patch.read_text(encoding="utf-8", errors="surrogateescape")
            except OSError:
                continue  # git am says so, in its words
            wanted.update(_PREIMAGE.findall(text))
        wanted.discard("0" * 40)
        absent = self.absent(sorted(wanted))
        if not absent:
            return
        try:
            self.fetch_blobs(absent)
        except UpstreamError as failure:  # a preimage no upstream commit has (a stack's own): git says so later
            log.debug("preimages not fetched ahead: %s", failure)

    def absent(self, oids: Sequence[str]) -> list[str]:
        """Which of `oids` this mirror does not hold, asked without fetching any: `git cat-file` in a throwaway
        repository that borrows the mirror's objects (an alternate) and has no promisor remote to ask."""
        if not oids:
            return []
        stdin = "".join(f"{oid}\n" for oid in oids).encode()
        if not self.partial:  # nothing to fetch on demand: ask the mirror itself
            listing = self.run(["cat-file", "--batch-check=%(objectname)"], stdin=stdin).text
            return [line.split()[0] for line in listing.splitlines() if line.endswith(" missing")]
        from kpatch import scratch  # only here: a blobless mirror's am

        with scratch.folder("objects") as folder:
            probe = folder / "probe.git"
            run(["init", "--quiet", "--bare", "--", str(probe)])
            (probe / "objects" / "info" / "alternates").write_text(f"{(self.path / 'objects').resolve()}\n",
                                                                   encoding="utf-8")
            listing = run(["cat-file", "--batch-check=%(objectname)"], probe, stdin=stdin).text
        return [line.split()[0] for line in listing.splitlines() if line.endswith(" missing")]

    def _missing(self, revs: Sequence[str], *, no_walk: bool = False) -> set[str]:
        """The objects reachable from `revs` (their trees only, with `no_walk`) that this (blobless) mirror lacks,
        asked without fetching any."""
        listing = self.out(["rev-list", "--objects", "--missing=print", *(["--no-walk"] if no_walk else []),
                            "--end-of-options", *revs])
        return {line[1:].strip() for line in listing.splitlines() if line.startswith("?")}

    def fetch_blobs(self, oids: Sequence[str]) -> None:
        """Fetch these objects from the promisor remote in one request (with the user's credential helpers, and the
        URL this run fetched from when it has one), as git's own lazy fetch would one commit at a time."""
        if not oids:
            return
        url = _FETCHED.get(self.path) or self.out(["config", "--get", f"remote.{REMOTE}.url"], check=False)
        args = ["-c", "fetch.negotiationAlgorithm=noop", "fetch", "--no-tags", "--no-write-fetch-head",
                "--recurse-submodules=no", f"--filter={BLOB_FILTER}", "--stdin", REMOTE]
        done = run(args, self.path, stdin="".join(f"{oid}\n" for oid in oids).encode(), env=self._credentials(url),
                   user_config=True, check=False)
        if done.status != 0:
            problem = storage_problem(["fetch"], done.stderr, self.path)
            if problem:
                raise StorageError(problem)
            raise UpstreamError(f"upstream {self.name}: cannot fetch {len(oids)} blob(s) of the blobless mirror from "
                                f"{redact_url(url)}: {redact_text(fetch_failure(done.stderr))} (to work offline: "
                                f"--url {self.name}=PATH of a full clone, or KPATCH_BLOBLESS=0 for a new mirror)")

    def _migrate_layout(self) -> None:
        """A mirror an older kpatch made kept the upstream's branches in refs/heads, mixed with a person's: once
        the upstream's are in UPSTREAM_REFS, drop each refs/heads copy that is exactly the upstream branch of its
        name and checked out nowhere. Every other branch there is (or may be) a person's, and stays."""
        if self.run(["config", "--get", _LAYOUT], check=False).text.strip() == UPSTREAM_REFS:
            return
        upstream = dict(self.refs(UPSTREAM_REFS))
        checked_out = {line.split(" ", 1)[1] for line in self.out(["worktree", "list", "--porcelain"]).splitlines()
                       if line.startswith("branch ")}
        drop = [(ref, sha) for ref, sha in self.refs("refs/heads/")
                if upstream.get(UPSTREAM_REFS + ref[len("refs/heads/"):]) == sha and ref not in checked_out]
        if drop:  # each only if it still holds that commit
            self.run(["update-ref", "--stdin"], stdin="".join(f"delete {ref} {sha}\n" for ref, sha in drop).encode())
        # A remote (no URL: kpatch fetches) that names the namespace: `git checkout main` in a worktree makes a
        # branch of the person's that tracks upstream/main, as in a clone.
        self.set_config("remote.upstream.fetch", f"+refs/heads/*:{UPSTREAM_REFS}*")
        self.set_config(_LAYOUT, UPSTREAM_REFS)

    def owns(self, path: Path) -> bool:
        """True when `path` is a whole worktree of this mirror: its objects live here, and the mirror's record of
        it names this very folder (not a copy of it elsewhere). Read from git's files, no process."""
        if not (path / ".git").is_file():
            return False
        tree = Repository(path)
        try:
            record = tree.git_dir
            return (record / "HEAD").is_file() and tree.common_dir == self.path.resolve() and \
                record.parent == (self.path / "worktrees").resolve() and names_worktree(record, path) and \
                not initializing(record)
        except (OSError, GitError):
            return False

    def half_made(self, path: Path) -> bool:
        """True when `path` is what a `git worktree add` of this mirror left when it was killed: registered here,
        but still locked "initializing", without its HEAD, or without its `.git` file."""
        records = self._records(path)
        return bool(records) and (not (path / ".git").is_file() or
                                  any(initializing(r) or not (r / "HEAD").is_file() for r in records))

    def _records(self, path: Path) -> list[Path]:
        """The mirror's worktree records (`worktrees/<id>`) that name `path`."""
        folder = self.path / "worktrees"
        return [r for r in folder.iterdir() if r.is_dir() and names_worktree(r, path)] if folder.is_dir() else []

    def _forget(self, path: Path) -> None:
        """Drop the records of a worktree at `path` that is gone, even one a killed `git worktree add` left
        locked ("initializing"), and only those: `git worktree prune` would also drop the record another
        `worktree add` on this mirror is making at that moment (a scroll worker's, a range-diff's beside a
        rebase), before it has written its gitdir, and that add then fails ("could not open .../locked")."""
        for record in self._records(path):
            shutil.rmtree(record, ignore_errors=True)

    def _add(self, path: Path, commit: str, *options: str) -> None:
        self._forget(path)
        if killseam.armed("worktree:add"):
            # What a kill in the middle of `git worktree add` leaves: HEAD written, locked, nothing checked out.
            self.run(["worktree", "add", "--quiet", "--force", "--no-checkout", "--lock", "--reason", "initializing",
                      "--detach", "--", str(path), commit])
            killseam.reached("worktree:add")
        self.run(["worktree", "add", "--quiet", "--force", *options, "--detach", "--", str(path), commit])

    def add_worktree(self, path: Path, commit: str) -> None:
        self.prefetch_tree(commit)
        self._add(path, commit)

    def begin_worktree(self, path: Path, commit: str) -> Popen[bytes]:
        """Start a whole worktree at `commit` whose files a child git writes while kpatch goes on (a rebase's
        `git am` runs beside it); `end_worktree` waits for it. Until then it is locked "initializing", as inside
        `git worktree add`: a kill (the child dies with kpatch) leaves what `half_made` recognises, never a
        worktree that looks whole. The checkout is a direct child (`git worktree add` would run it as a
        grandchild, which outlives a killed kpatch)."""
        self.prefetch_tree(commit)
        self._forget(path)
        self.run(["worktree", "add", "--quiet", "--force", "--no-checkout", "--lock", "--reason", "initializing",
                  "--detach", "--", str(path), commit])
        return popen(["-c", "checkout.workers=1", "reset", "--quiet", "--hard", commit, "--"], path,
                     with_stdout=False)

    def end_worktree(self, path: Path, child: Popen[bytes], *, cancel: bool = False) -> bool:
        """Wait for `begin_worktree`'s checkout (stop it first with `cancel`); True when the worktree is whole (it
        is then unlocked). One git could not write whole (a full disk, say: `git reset` may still exit 0) is
        removed, and the caller makes the worktree the usual way, which names the problem."""
        if cancel:
            child.kill()
        _, err = child.communicate()
        said = err.decode("utf-8", "replace").strip()
        if child.returncode == 0 and not said:
            self.run(["worktree", "unlock", "--", str(path)])
            return True
        if not cancel:
            log.info("the worktree checked out beside the rebase at %s is not whole (%d): %s", path, child.returncode,
                     redact_text(said[-500:]))
        self.remove_worktree(path)
        return False

    def move_worktree(self, path: Path, to: Path) -> None:
        """Move a whole worktree of this mirror to `to` (a folder that does not exist yet, on the same disk), with
        no checkout. The mirror's record names `to` first, then the folder is renamed: a kill in between leaves a
        record whose folder is missing (`half_made(to)`: removed and made again), never a folder git has lost."""
        record = Repository(path).git_dir
        pointer = record / "gitdir"
        staged = record / "gitdir.kpatch-new"
        staged.write_text(f"{to.resolve() / '.git'}\n", encoding="utf-8")
        staged.replace(pointer)
        killseam.reached("worktree:move")
        to.parent.mkdir(parents=True, exist_ok=True)
        path.rename(to)

    def add_scratch(self, path: Path, commit: str, paths: Sequence[str]) -> None:
        """A worktree at `commit` that holds only `paths` on disk (a sparse checkout), with a split index.

        A stack's patches touch a few hundred of the upstream's files: writing the other thousands (150 MB for
        vLLM) would cost more than the whole rebase. Every other file is in the index, marked skip-worktree, so
        git (am, merges, status, add) treats it as unchanged. The split index makes each of am's index writes
        carry only the entries that changed, not all of them. Paths a sparse pattern cannot name get a full
        checkout instead.
        """
        patterns = [_sparse_pattern(p) for p in sorted(set(paths))]
        if not patterns or any(p is None for p in patterns):
            self.add_worktree(path, commit)
            return
        self.prefetch_tree(commit, paths)
        self._add(path, commit, "--no-checkout")
        tree = Repository(path)
        info = tree.git_dir / "info"
        info.mkdir(exist_ok=True)
        (info / "sparse-checkout").write_text("".join(f"{p}\n" for p in patterns), encoding="utf-8")
        # Only this command reads the patterns: later ones (a person's too) keep the skip-worktree bits as they are.
        tree.run(["-c", "core.sparseCheckout=true", "-c", "core.splitIndex=true", "read-tree", "-m", "-u",
                  "--end-of-options", "HEAD"])

    def remove_worktree(self, path: Path) -> None:
        """Remove a worktree; one left half-made by an interrupted `worktree add` is deleted and forgotten (the
        caller names a folder of the workspace: its worktree or scratch folder, never one read from a file)."""
        if self.owns(path):
            self.run(["worktree", "remove", "--force", "--force", "--", str(path)])
        else:
            shutil.rmtree(path, ignore_errors=True)
            self._forget(path)

    def enable_rerere(self) -> Path:
        """Turn on rerere (with autoupdate) for the mirror and its worktrees; return its rr-cache folder. The config
        is written only when it says otherwise: rebases running side by side on one mirror (the nightly's search
        on local workers) would fail on each other's config lock."""
        for key in ("rerere.enabled", "rerere.autoupdate"):
            if self.run(["config", "--get", key], check=False).text.strip() != "true":
                self.set_config(key, "true")
        return self.path / "rr-cache"


def sparse_covers(paths: Sequence[str]) -> bool:
    """Whether `Mirror.add_scratch` puts only `paths` on disk (else it checks out the whole tree)."""
    return bool(paths) and all(_sparse_pattern(p) is not None for p in paths)


def _sparse_pattern(path: str) -> str | None:
    """A sparse-checkout pattern that matches exactly `path` (gitignore syntax), or None when none can."""
    if not path or "\n" in path or "\r" in path:
        return None
    escaped = "".join(f"\\{c}" if c in "\\*?[" else c for c in path)
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "\\ "
    return f"/{escaped}"


_BOILERPLATE = ("please make sure you have the correct access rights", "and the repository exists")


# What git says when a fetch cannot pass on a retry (no repository there, not found, authentication refused);
# anything else (a refused or reset connection, a timeout, a name that did not resolve, a 5xx) may pass.
_PERMANENT = re.compile(r"does not appear to be a git repository|not a git repository|repository .* not found|"
                        r"repository not found|authentication failed|permission denied|could not read (username|"
                        r"password)|terminal prompts disabled|invalid username or password|"
                        r"the requested url returned error: (401|403|404)", re.IGNORECASE)


def permanent(stderr: str) -> bool:
    """Whether a failed fetch's stderr says a retry cannot help."""
    return _PERMANENT.search(stderr) is not None


def unreadable(url: str) -> str | None:
    """Why `url` is no git repository kpatch can fetch from (git's words), asked with one `git ls-remote`; None when
    it is one. For a URL a person gave on the command line, checked where it is used."""
    done = run(["ls-remote", "--heads", "--", url], None, user_config=True, check=False)
    return None if done.status == 0 else redact_text(fetch_failure(done.stderr))


def fetch_failure(stderr: str) -> str:
    """The lines of a failed fetch that say why (an ssh refusal is two: "Permission denied (publickey)." and
    "fatal: Could not read from remote repository."), without progress and git's access-rights boilerplate."""
    said = [line.strip() for line in stderr.splitlines() if line.strip() and "%" not in line
            and not line.strip().lower().startswith(_BOILERPLATE)]
    return "; ".join(dict.fromkeys(said[-3:])) or "no output"
