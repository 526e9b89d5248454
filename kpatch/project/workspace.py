"""Where things live (mirrors, worktrees, the run state, the journal, logs) and the checks on a worktree.

Per project, kpatch keeps `.kpatch/` next to kpatch.toml: the run state (which also remembers the work folder
the last apply used), the recorded resolutions of a rebase in progress, the journal of an interrupted multi-file
write, and the writer lock. The cache is shared by every project of a user: a mirror there belongs to a URL
(`mirrors/<name>-<hash of the normalised URL>.git`, its lock `locks/<name>-<hash>`), never to an upstream's name.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from kpatch import scratch
from kpatch.config import Stack
from kpatch.config.model import MAIN
from kpatch.errors import GitError, StorageError, UsageError, WorktreeError
from kpatch.files import write_atomic
from kpatch.gitx import Mirror, Repository
from kpatch.gitx.checkout import shared_with
from kpatch.gitx.mirror import KEY_CONFIG
from kpatch.gitx.storage import place_problem
from kpatch.gitx.urls import mirror_folder, normalized_url
from kpatch.output.ui import article
from kpatch.project import journal, state
from kpatch.project.places import (
    KPATCH_DIR,
    default_cache_dir,
    line_reports_dir,
    line_state_dir,
    line_workdir,
    make_cache_dir,
)
from kpatch.project.state import RunState

if TYPE_CHECKING:
    from kpatch.output.ui import UI

WAIT_FOREVER = float("inf")
log = logging.getLogger("kpatch")
_HELD: set[Path] = set()  # the projects whose writer lock this process holds (an operation inside a night)
P = ParamSpec("P")
R = TypeVar("R")
_LEGACY = (".kpatch-state.json", ".kpatch-rebase.json", ".kpatch-rebase.journal", ".kpatch-export.journal")


@dataclass(frozen=True)
class Workspace:
    stack: Stack
    cache_dir: Path
    workdir: Path
    wait: float | None = None  # seconds a writer waits for the project's lock (None: it fails at once)
    say: Callable[[str], None] | None = field(default=None, compare=False, repr=False)  # a line for a person

    @classmethod
    def create(cls, stack: Stack, cache_dir: Path | None, workdir: Path | None, *,
               wait: float | None = None, say: Callable[[str], None] | None = None) -> Workspace:
        """The workspace for `stack`; without `workdir`, the one the last apply used (else ./work)."""
        workdir = workdir or line_workdir(stack.root, stack.line)
        ws = cls(stack=stack, cache_dir=(cache_dir or default_cache_dir()).resolve(), workdir=workdir.resolve(),
                 wait=wait, say=say)
        ws._refuse_legacy()
        if stack.lines:
            ws._refuse_shared_workdir()
        return ws

    @property
    def project_dir(self) -> Path:
        """The project's own folder of kpatch state (`.kpatch/`), whatever the line."""
        return self.stack.root / KPATCH_DIR

    @property
    def kpatch_dir(self) -> Path:
        """This line's run state, journal, recorded resolutions in progress and writer lock: `.kpatch/` for main,
        `.kpatch/lines/<line>/` for a release line (two lines of a project are written side by side)."""
        return line_state_dir(self.stack.root, self.stack.line)

    @property
    def dist_dir(self) -> Path:
        """Where the line's wheel set and its lock go by default: dist/ for main, dist-<line>/ for a release line."""
        return self.stack.root / ("dist" if self.stack.line == MAIN else f"dist-{self.stack.line}")

    @property
    def kept_lock(self) -> Path:
        """The lock of the line's last green night, kept for its nightly branch: pylock.toml next to kpatch.toml for
        main, patches/<line>/pylock.toml for a release line (a line's night never rewrites main's)."""
        root = self.stack.root
        return root / "pylock.toml" if self.stack.line == MAIN else root / "patches" / self.stack.line / "pylock.toml"

    @property
    def reports_dir(self) -> Path:
        """Where the line's test reports go by default: reports/ for main, reports-<line>/ for a release line."""
        return line_reports_dir(self.stack.root, self.stack.line)

    @property
    def nightly_dir(self) -> Path:
        """Where the line's nightly report and carry history go by default: reports/nightly/ for main,
        reports-<line>/nightly/ for a release line."""
        return self.reports_dir / "nightly"

    def _refuse_shared_workdir(self) -> None:
        """Each line works in its own folder: one inside another's would move (and clean) the other's worktrees."""
        mine = self.workdir
        for other in self.stack.line_names:
            if other == self.stack.line:
                continue
            theirs = line_workdir(self.stack.root, other).resolve()
            if mine == theirs or mine.is_relative_to(theirs) or theirs.is_relative_to(mine):
                raise UsageError(f"work folder {mine} is (or holds, or is inside) line {other}'s work folder {theirs}: "
                                 f"give line {self.stack.line} its own --workdir")

    @contextmanager
    def config_lock(self, doing: str) -> Iterator[None]:
        """Held while kpatch.toml is read and rewritten in a project with lines: each line has its own writer lock,
        and two lines' rebases (or backports) would otherwise each write kpatch.toml from the same old text."""
        # imported where used: locks and the writer's clean-up for writers only: readers (status) start without them
        from kpatch.project.exclusive import exclusive

        if not self.stack.lines:  # one line: its writer lock is the project's
            yield
            return
        self._ensure_kpatch_dir()
        with exclusive([self.project_dir / "kpatch-toml.lock"], doing, wait=WAIT_FOREVER, on_wait=self._say):
            yield

    @property
    def state_file(self) -> Path:
        return self.kpatch_dir / "state.json"

    @property
    def journal_dir(self) -> Path:
        return self.kpatch_dir / "journal"

    @property
    def log_dir(self) -> Path:
        return self.cache_dir / "logs"

    @property
    def scratch_dir(self) -> Path:
        return self.workdir / ".rebase"

    @property
    def rerere_dir(self) -> Path:
        """The recorded resolutions of the rebase in progress, per upstream (the mirror's rr-cache is shared)."""
        return self.kpatch_dir / "rerere"

    def mirror(self, name: str) -> Mirror:
        """Upstream `name`'s mirror: the one of its URL (kpatch.toml's). Until a writer moves it there, a mirror an
        older kpatch named after the upstream serves when this project's worktree is one of its own."""
        url = self.stack.get(name).mirror_url
        path = self.cache_dir / "mirrors" / mirror_folder(url)
        mirror = Mirror(path, name, url=normalized_url(url), guard=functools.partial(self.mirror_lock, path))
        if not path.exists():
            legacy = self._legacy_mirror(name)
            if legacy is not None and legacy.owns(self.worktree(name)):
                return legacy
        return mirror

    def _legacy_mirror(self, name: str) -> Mirror | None:
        """`mirrors/<name>.git`, an older kpatch's mirror (named after an upstream, whatever its URL), if there."""
        path = self.cache_dir / "mirrors" / f"{name}.git"
        legacy = Mirror(path, name)
        return legacy if path.is_dir() and legacy.exists else None

    @contextmanager
    def mirror_lock(self, mirror: Path, *, wait: float | None = WAIT_FOREVER, doing: str = "fetch") -> Iterator[None]:
        """Hold the lock of one mirror of the cache while `doing` writes it (a fetch, its move into place, a git am
        using its rr-cache): another project's kpatch writing it is waited for (it holds it only that long)."""
        from kpatch.project.exclusive import exclusive

        with exclusive([self.cache_dir / "locks" / mirror.name.removesuffix(".git")], doing, wait=wait,
                       on_wait=self._say):
            yield

    def _say(self, text: str) -> None:
        if self.say is not None:
            self.say(text)
        else:
            log.warning("%s", text)

    def worktree(self, name: str) -> Path:
        return self.workdir / name

    def worktree_beside(self, name: str) -> Path:
        """Where a rebase checks out the person's missing worktree while its `git am` runs (moved into place at
        the end): in the scratch folder, under a name no upstream can have."""
        return self.scratch_dir / ".worktrees" / name

    def tree(self, name: str) -> Repository:
        return Repository(self.worktree(name))

    # --- the run state --------------------------------------------------------------------------------------

    def stack_tree(self, kind: state.Kind, name: str) -> Path:
        """The folder an operation of `kind` writes for stack `name`: its worktree (apply) or a scratch one
        (rebase). Always this, whatever the run state file says: a copied project's file names the original's."""
        return self.worktree(name) if kind is state.Kind.APPLY else self.scratch_dir / name

    def read_state(self) -> RunState:
        """The run state, its paths the workspace's own: each stack of the operation in progress is one of
        kpatch.toml's upstreams, and works in the folder `stack_tree` names (what the file says is not used)."""
        run = state.read(self.state_file)
        if run is None:
            return RunState(workdir=str(self.workdir))
        if run.operation is not None:
            known = {u.name for u in self.stack.upstreams}
            for name, stack in run.operation.stacks.items():
                if name not in known or stack.name != name:
                    raise WorktreeError(f"{self.state_file}: the {run.operation.kind.value} in progress names "
                                        f"upstream {name!r}, which {self.stack.path.name} does not have; put the "
                                        f"upstream back, or remove {self.state_file} (its worktrees stay as they are)")
                stack.tree = str(self.stack_tree(run.operation.kind, name))
        run.workdir = str(self.workdir)
        return run

    def write_state(self, run: RunState) -> None:
        self._ensure_kpatch_dir()
        write_atomic(self.state_file, self.encode_state(run), durable=False)

    def encode_state(self, run: RunState) -> bytes:
        """The run state file's bytes, naming this work folder: relative when inside the project (a copy of the
        project then names its own)."""
        run.workdir = _relative_to(self.workdir, self.stack.root.resolve())
        return state.encode(run)

    def state_bytes(self) -> bytes | None:
        """The run state file as it is on disk (None: there is none), to put back with `put_state_bytes`."""
        try:
            return self.state_file.read_bytes()
        except FileNotFoundError:
            return None

    def put_state_bytes(self, data: bytes | None) -> None:
        if data is None:
            self.state_file.unlink(missing_ok=True)
        else:
            write_atomic(self.state_file, data, durable=False)

    def pending_journal(self) -> str | None:
        """The command whose journaled write was interrupted, or None (also for one whose run had finished)."""
        pending = journal.pending(self.journal_dir)
        if pending == "rebase" and journal.committed(self.journal_dir) and self.read_state().operation is None:
            # A rebase ends by writing the run state without its operation, then drops its journal: killed in
            # between, it had finished (files, worktrees and state new); only the journal folder is left.
            return None
        return pending

    def refuse_pending_journal(self) -> None:
        """Refuse while a journaled write is interrupted, saying how to finish or undo it (or, when its journal
        cannot be read, how to set it aside)."""
        interrupted = self.pending_journal()
        if interrupted:
            which = self.line_option(interrupted)
            raise WorktreeError(journal.problem(self.journal_dir) or
                                f"an interrupted 'kpatch {interrupted}' left kpatch.toml or patches/ half-written: "
                                f"run 'kpatch {interrupted} --continue{which}' or "
                                f"'kpatch {interrupted} --abort{which}'")

    def line_option(self, command: str) -> str:
        """What names this line to `command` on a command line: nothing for main (` --to main` for a backport)."""
        if command == "backport":
            return f" --to {self.stack.line}"
        return "" if self.stack.line == MAIN else f" --line {self.stack.line}"

    def refuse_if_busy(self, *, allow: state.Kind | None = None) -> RunState:
        """The run state, unless an operation (other than `allow`) or a half-written journal is in progress."""
        self.refuse_pending_journal()
        run = self.read_state()
        op = run.operation
        if op is not None and op.kind is not allow:
            where = f" (stopped in {op.stopped.tree})" if op.stopped else ""
            kind, which = op.kind.value, self.line_option(op.kind.value)
            raise WorktreeError(f"{article(kind)} is in progress{where}: run 'kpatch {kind} --continue{which}' "
                                f"or 'kpatch {kind} --abort{which}' first")
        return run

    @contextmanager
    def writer(self, command: str, ui: UI | None = None) -> Iterator[list[str]]:
        """Hold the project's writer lock (fails at once if another kpatch holds it, or waits `self.wait` seconds
        for it); notes about a holder that died holding it, and about what a killed kpatch left, go to `ui`."""
        from kpatch.project.exclusive import exclusive  # readers (status, export --check) take no lock

        if self.kpatch_dir in _HELD:  # a stage of an operation that holds it already (the nightly's rebase)
            yield []
            return
        self._ensure_kpatch_dir()
        make_cache_dir(self.cache_dir)
        with exclusive([self.kpatch_dir / "lock"], command, wait=self.wait,
                       on_wait=ui.note if ui is not None else self._say) as notes:
            if self.journal_dir.exists() and self.pending_journal() is None:
                journal.close(self.journal_dir)  # the journal of a run that had finished
            journal.sweep(self.journal_dir)  # what a kill left of a journal being staged or dropped
            notes += self._adopt_legacy_mirrors(command)
            notes += self._clean_after_kills(command)
            if ui is not None:
                ui.notes(notes)
            if command != "rebase --abort":  # that one only drops the copy's own folders (round two)
                self.refuse_shared_worktrees()
            _HELD.add(self.kpatch_dir)
            try:
                yield notes
            finally:
                _HELD.discard(self.kpatch_dir)

    def _adopt_legacy_mirrors(self, command: str) -> list[str]:
        """An older kpatch's cache named each mirror after an upstream (`mirrors/<name>.git`). One whose worktree
        here is this project's is this upstream's: it moves to its URL's folder (its worktrees, this project's and
        any other's, repaired). Any other is no URL's that kpatch can tell: left as it is, and this upstream's
        mirror fetched anew. Said once: after that the URL's mirror is there."""
        notes: list[str] = []
        for upstream in self.stack.upstreams:
            legacy = self._legacy_mirror(upstream.name)
            keyed = self.cache_dir / "mirrors" / mirror_folder(upstream.mirror_url)
            if legacy is None or keyed.exists():
                continue
            if not legacy.owns(self.worktree(upstream.name)):
                notes.append(f"upstream {upstream.name}: {legacy.path} (an older kpatch's mirror, named after an "
                             f"upstream, not keyed by its URL) is not used: {upstream.display_url} is fetched anew "
                             f"into {keyed.name}; remove the old one once no project uses it")
                continue
            with self.mirror_lock(keyed, doing=command), self.mirror_lock(legacy.path, doing=command):
                if keyed.exists() or not legacy.exists:  # another project moved it meanwhile
                    continue
                legacy.path.rename(keyed)
                moved = Mirror(keyed, upstream.name)
                moved.set_config(KEY_CONFIG, normalized_url(upstream.mirror_url))
                moved.run(["worktree", "repair"], check=False)  # each worktree's .git names the new folder
            notes.append(f"upstream {upstream.name}: moved the cache's mirror {legacy.path.name} (an older "
                         f"kpatch's, named after the upstream) to {keyed.name}, keyed by its URL")
        return notes

    def _clean_after_kills(self, command: str) -> list[str]:
        """Stop the git processes a killed kpatch left running, and remove the git lock files a killed git left,
        where they are this project's: its worktrees (under its lock), and each of its mirrors no other kpatch
        writes now (under that mirror's lock, tried once: one that is busy is cleaned another time)."""
        from kpatch.gitx import locks
        from kpatch.gitx.orphans import stop_orphans

        notes: list[str] = []
        swept = scratch.sweep()  # temp folders (patch text) of a kpatch that is dead
        if swept:
            notes.append(f"removed {len(swept)} temp folder(s) a killed kpatch left (e.g. {swept[0]})")
        stopped = stop_orphans([self.workdir])  # no git of ours runs yet: these are a dead one's
        folders: list[Path] = []
        for upstream in self.stack.upstreams:
            mirror = self.mirror(upstream.name)
            records = [p for p in (mirror.path / "worktrees").glob("*") if p.is_dir() and self._owns_record(p)]
            folders += records
            if not mirror.path.is_dir():
                continue
            try:
                with self.mirror_lock(mirror.path, wait=None, doing=command):
                    stopped += stop_orphans([mirror.path])
                    folders.append(mirror.path)
                    folders += _throwaway_records(mirror.path)
            except WorktreeError:
                log.info("%s: another kpatch writes it now; what a killed one left there is cleaned another time",
                         mirror.path)
        if stopped:
            notes.append(f"stopped {len(stopped)} git process(es) a killed kpatch left running "
                         f"(e.g. pid {stopped[0].pid} in {stopped[0].cwd})")
        cleared = locks.clear_stale(folders)
        if cleared:
            notes.append(f"removed {len(cleared)} git lock file(s) a killed git left (e.g. {cleared[0]})")
        return notes

    def _owns_record(self, record: Path) -> bool:
        """A mirror's worktree record (`worktrees/<id>`) of a folder in this project's work folder."""
        try:
            gitdir = Path(os.path.realpath((record / "gitdir").read_text(errors="replace").strip()))
        except OSError:
            return False
        return gitdir.is_relative_to(self.workdir.resolve())

    # --- checks ---------------------------------------------------------------------------------------------

    def check_worktree(self, name: str) -> Repository | None:
        """The worktree of `name` if it exists, checked: made by kpatch from its mirror, not mid-operation, clean."""
        path = self.worktree(name)
        if not self.check_owned(name):
            return None
        tree = Repository(path)
        busy = tree.operation()
        if busy:
            raise WorktreeError(f"worktree {path} is in the middle of a git {busy}; finish or abort it first")
        dirty = tree.dirty()
        if dirty:
            more = f" and {len(dirty) - 1} more" if len(dirty) > 1 else ""
            raise WorktreeError(f"worktree {path} has uncommitted changes ({dirty[0].strip()}{more}); "
                                "commit, stash or discard them first")
        return tree

    def check_owned(self, name: str) -> bool:
        """True when the worktree of `name` exists and is kpatch's; False when there is none (what a killed
        `git worktree add` left there is removed first); refused when the folder is something else."""
        path, mirror = self.worktree(name), self.mirror(name)
        if mirror.half_made(path):
            mirror.remove_worktree(path)
        if not path.exists():
            return False
        if not mirror.owns(path):
            other = self._other_mirror(path)
            why = f" (it is one of {other}, the mirror of another URL: did kpatch.toml's url change?)" if other \
                else ""
            raise WorktreeError(f"{path} exists but is not a kpatch worktree of {name}{why}; move it away")
        return True

    def _other_mirror(self, path: Path) -> Path | None:
        """The mirror of the cache `path` is a worktree of, when it is one (read from git's files)."""
        try:
            common = Repository(path).common_dir if (path / ".git").is_file() else None
        except (OSError, GitError):
            return None
        mirrors = (self.cache_dir / "mirrors").resolve()
        return common if common is not None and common.parent == mirrors else None

    def refuse_shared_worktrees(self) -> None:
        """Refuse to go on in a copy (`cp -a`) of a project whose worktrees still use the original's git state: any
        git command there (`am --continue`, a checkout) would move the original's worktrees instead."""
        if not self.workdir.is_dir():
            return
        for path in _worktree_folders(self.workdir):
            owner = shared_with(path)
            if owner is None or not owner.is_dir():  # a moved project's old place: no one else's worktree there
                continue
            first = ("run 'kpatch rebase --abort' here (it leaves the original alone), then " if
                     self.scratch_dir.is_dir() else "")
            raise WorktreeError(f"{path} shares its git state with {owner} (was the project copied with cp -a?): "
                                f"kpatch changes nothing of that one from here; to go on in this copy, {first}"
                                f"remove {self.workdir} (kpatch.toml and patches/ stay) and run 'kpatch apply'")

    def check_writable(self, *paths: Path) -> None:
        """Refuse before changing anything when a place kpatch must write is read-only (or not a folder)."""
        for path in paths:
            folder = path if path.is_dir() else _existing_parent(path)
            if folder is None:
                raise StorageError(f"cannot write {path}: no folder to create it in")
            problem = place_problem(folder)
            if problem and problem.startswith("read-only"):
                raise StorageError(f"{problem}: cannot write {path}")
            if not os.access(folder, os.W_OK | os.X_OK) or (path.is_file() and not os.access(path, os.W_OK)):
                raise StorageError(f"cannot write {path}: read-only (no permission)")

    def _ensure_kpatch_dir(self) -> None:
        if not self.project_dir.is_dir():
            self.project_dir.mkdir(parents=True, exist_ok=True)
            (self.project_dir / ".gitignore").write_text("# kpatch's own run state: never committed\n*\n")
        self.kpatch_dir.mkdir(parents=True, exist_ok=True)

    def _refuse_legacy(self) -> None:
        for name in _LEGACY:
            old = self.workdir / name
            if old.exists():
                raise WorktreeError(f"{old}: run state of an older kpatch; finish or abort its operation with "
                                    "that version, or remove the file and run 'kpatch apply' again")


def _worktree_folders(workdir: Path) -> Iterator[Path]:
    """Every folder in the work folder that may be a worktree: work/<name>, and those in kpatch's own hidden
    folders (work/.rebase/<name>, work/.rebase/.worktrees/<name>, work/.propose/<name>...); never a walk of a
    worktree's own files."""
    folders = [workdir]
    while folders:
        folder = folders.pop()
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
        except OSError:
            continue
        for child in children:
            if (child / ".git").is_file():
                yield child
            elif child.name.startswith("."):
                folders.append(child)


def _relative_to(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _existing_parent(path: Path) -> Path | None:
    for folder in (path.parent, *path.parent.parents):
        if folder.exists():
            return folder if folder.is_dir() else None
    return None


def writes(label: str) -> Callable[[Callable[Concatenate[Workspace, UI, P], R]],
                                   Callable[Concatenate[Workspace, UI, P], R]]:
    """An operation that changes the project: it runs holding the writer lock (`label` names it to a kpatch that
    finds the lock taken). The one place each operation takes it; inside another operation it is held already."""
    def decorate(func: Callable[Concatenate[Workspace, UI, P], R]) -> Callable[Concatenate[Workspace, UI, P], R]:
        @functools.wraps(func)
        def locked(ws: Workspace, ui: UI, /, *args: P.args, **kwargs: P.kwargs) -> R:
            with ws.writer(label, ui):
                return func(ws, ui, *args, **kwargs)
        return locked
    return decorate


def _throwaway_records(mirror: Path) -> list[Path]:
    """The mirror's worktree records of kpatch's own throwaway worktrees (a range-diff's side, gitx/rangediff.py,
    in a temp folder): no project owns them, so their git locks are cleared under the mirror's lock, where a kill
    left them; a record whose temp folder is gone (swept: its kpatch was killed) is removed."""
    from kpatch.gitx.rangediff import THROWAWAY_PREFIX

    kept = []
    for record in sorted(p for p in (mirror / "worktrees").glob("*") if p.is_dir() and not p.is_symlink()):
        try:
            gitdir = Path((record / "gitdir").read_text(errors="replace").strip())
        except OSError:
            continue
        if not gitdir.parent.parent.name.startswith(THROWAWAY_PREFIX):
            continue
        if scratch.owner_alive(gitdir.parent.parent.name):
            continue  # another kpatch's (a scroll worker's, say) at work now: never touched
        if os.path.lexists(gitdir.parent.parent):
            kept.append(record)
        else:
            shutil.rmtree(record, ignore_errors=True)
    return kept
