"""Patches as git sees them: format-patch, patch-id, trial applies, the preimages a stack made (what `git am`
reads back out of a mail is in `mails`)."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kpatch import killseam, scratch
from kpatch.gitx.mirror import Mirror
from kpatch.gitx.repo import Repository, literal
from kpatch.gitx.runner import failure_for, popen

if TYPE_CHECKING:
    from concurrent.futures import Future
    from subprocess import Popen

# Options that make format-patch output depend on nothing but the commit (no version, signature or
# abbreviation noise); user and system git config is ignored for the same reason.
FORMAT_PATCH = ("format-patch", "--zero-commit", "--no-signature", "-N", "--full-index", "--no-thread",
                "--no-attach", "--no-cover-letter", "--no-notes", "--encode-email-headers", "-M", "--stat=72")


_PATHSPEC_WALK_MAX = 64  # above this many paths, list the range's changed paths instead (commit_patch_ids)


class Trial(Enum):
    """What `git am -3` of one patch would do, found on a throwaway index."""

    CLEAN = "clean"
    THREE_WAY = "three-way"
    EMPTY = "empty"
    CONFLICT = "conflict"


# format-patch runs started ahead of need (prefetch_patches), by (repository, base, tip SHA); the latest few only.
_AHEAD: dict[tuple[Path, str, str], Future[list[bytes]]] = {}
_AHEAD_MAX = 4  # one per stack of a rebase; ones never asked for (the rebase went on with git am) age out


def prefetch_patches(tree: Repository, base: str, tip: str) -> None:
    """Start `format_patches(tree, base, tip)` (`tip` a full SHA) in a thread of its own: a later call for the same
    range takes its result instead of running git again, so format-patch runs while the caller does other work."""
    from concurrent.futures import ThreadPoolExecutor  # only here: most runs never format ahead

    while len(_AHEAD) >= _AHEAD_MAX:
        del _AHEAD[next(iter(_AHEAD))]
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kpatch-format")  # joined at exit, not before
    _AHEAD[(tree.common_dir, base, tip)] = pool.submit(_format_patches, tree, base, tip)
    pool.shutdown(wait=False)


def format_patches(tree: Repository, base: str, tip: str = "HEAD") -> list[bytes]:
    """`git format-patch` of base..tip, one mbox text per commit, deterministic bytes."""
    if _AHEAD:
        ahead = _AHEAD.pop((tree.common_dir, base, tree.head() if tip == "HEAD" else tip), None)
        if ahead is not None and ahead.exception() is None:  # a failure there is raised again here, by git
            return ahead.result()
    return _format_patches(tree, base, tip)


def _format_patches(tree: Repository, base: str, tip: str) -> list[bytes]:
    with scratch.folder("export") as folder:
        tree.run([*FORMAT_PATCH, "--output-directory", str(folder), "--end-of-options", f"{base}..{tip}"])
        return [p.read_bytes() for p in sorted(folder.iterdir(), key=_number)]


class Formatting:
    """`format_patches(tree, base, tip)` started now and read as git writes it (`texts`): the caller reads each
    patch while git writes the next, instead of after the last. The same command and the same texts: git writes
    its files one after the other, each closed before the next is opened, so a file is whole once the next one is
    there (or git has exited). A context manager: leaving it early stops git and removes its folder."""

    def __init__(self, tree: Repository, base: str, tip: str = "HEAD") -> None:
        self._ahead: list[bytes] | None = None
        if _AHEAD:  # started ahead already (prefetch_patches): its result, as format_patches takes it
            ahead = _AHEAD.pop((tree.common_dir, base, tree.head() if tip == "HEAD" else tip), None)
            if ahead is not None and ahead.exception() is None:
                self._ahead = ahead.result()
        self._tree = tree
        self._proc: Popen[bytes] | None = None
        self._folder: Path | None = None
        self._stderr: list[bytes] = []
        if self._ahead is not None:
            return
        import threading  # only here: the one reader of git's stderr while the caller polls its files

        self._folder = scratch.make("export")
        self._command = [*FORMAT_PATCH, "--output-directory", str(self._folder), "--end-of-options",
                         f"{base}..{tip}"]
        try:
            self._proc = popen(self._command, tree.path, with_stdout=False)
        except BaseException:
            shutil.rmtree(self._folder, ignore_errors=True)
            raise
        stderr = self._proc.stderr
        assert stderr is not None
        # drained as it comes: git blocks on a full pipe (a rename-limit warning per commit would fill it)
        self._drain = threading.Thread(target=lambda: self._stderr.append(stderr.read()), daemon=True)
        self._drain.start()

    def __enter__(self) -> Formatting:
        return self

    def __exit__(self, *_: object) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            self._drain.join()
            self._proc = None
        if self._folder is not None:
            killseam.reached("scratch:export")
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def texts(self, each: Callable[[int, bytes, Path | None], None]) -> list[bytes]:
        """Every patch text, in order (format_patches' list); `each(index, text, file)` is called for each as soon
        as it is whole, with the file git wrote it in (None for a run started ahead), which `each` may move away.
        A git failure is raised as `Repository.run` raises it."""
        if self._ahead is not None:
            for index, text in enumerate(self._ahead):
                each(index, text, None)
            return self._ahead
        proc, folder = self._proc, self._folder
        assert proc is not None and folder is not None
        read: dict[int, bytes] = {}  # by format-patch's number
        seen: dict[int, str] = {}  # every file listed so far, by number
        while True:
            finished = proc.poll() is not None  # before listing: every file is whole once git has exited
            names = os.listdir(folder)  # noqa: PTH208  # names only: a Path per entry, each poll, costs more
            if finished or len(names) != len(seen):  # (`each` may have moved files away)
                seen.update((int(name.partition("-")[0]), name) for name in names)  # as _number reads them
            # Taken in turn, 1, 2, ..., each once a later one is there (a listing made while git adds files may
            # miss one: a hashed folder's order); whatever is left once git has exited, in order.
            fresh = sorted(set(seen) - set(read)) if finished else []
            last, number = max(seen, default=0), len(read) + 1
            while not finished and number in seen and number < last:
                fresh.append(number)
                number += 1
            for number in fresh:
                read[number] = text = (folder / seen[number]).read_bytes()
                each(len(read) - 1, text, folder / seen[number])
            if finished:
                break
            if not fresh:
                time.sleep(0.002)
        self._drain.join()
        stderr = b"".join(self._stderr).decode("utf-8", "replace")
        if proc.returncode != 0:
            raise failure_for(["git", *self._command], proc.returncode, b"", stderr, self._tree.path)
        return [read[number] for number in sorted(read)]


def _number(path: Path) -> int:
    """format-patch's number of a file it wrote: by number, not by name (`10000-` sorts before `1001-`)."""
    return int(path.name.partition("-")[0])


# Patch-ids asked ahead of need (prefetch_patch_ids), by what was asked; the latest few only.
_IDS_AHEAD: dict[tuple[object, ...], Future[Any]] = {}


def prefetch_patch_ids(repo: Repository, since: str, until: str, paths: Sequence[str], files: Sequence[Path]) -> None:
    """Start `commit_patch_ids(repo, since, until, paths, subjects=...)` (since and until full SHAs) and
    `file_patch_ids(repo, files)` in threads of their own: a later call with the same arguments takes the result
    (a rebase asks them once its stack is read, and starts them while it is read, on the paths it expects)."""
    from concurrent.futures import ThreadPoolExecutor  # only here: most runs never hash ahead

    def walk() -> tuple[dict[str, str], dict[str, str]]:
        seen: dict[str, str] = {}
        return _commit_patch_ids(repo, since, until, paths, verbatim=False, subjects=seen, renames=False), seen

    while len(_IDS_AHEAD) >= 2 * _AHEAD_MAX:
        del _IDS_AHEAD[next(iter(_IDS_AHEAD))]
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kpatch-patch-ids")  # joined at exit, not before
    _IDS_AHEAD[("walk", repo.common_dir, since, until, tuple(paths), False, False)] = pool.submit(walk)
    _IDS_AHEAD[("files", repo.common_dir, tuple(files), False)] = pool.submit(_file_patch_ids, repo, files)
    pool.shutdown(wait=False)


def drop_patch_ids_ahead() -> None:
    """Forget the patch-ids asked ahead and not taken: a file's are its bytes when they were asked (a run in the same
    process, a test's, may have changed the file since)."""
    _IDS_AHEAD.clear()


def _taken(key: Callable[[], tuple[object, ...]]) -> Any:
    """The result of a prefetch_patch_ids call asked just so (None: none, or it failed: the caller runs it and
    meets the failure itself). `key` is made only when something was asked ahead: it reads the repository's git
    folder, and `git patch-id` of files needs none (a project folder that is no git repository, say)."""
    if not _IDS_AHEAD:
        return None
    from kpatch.errors import KpatchError

    try:
        wanted = key()
    except KpatchError:  # no git folder there: nothing of it was asked ahead
        return None
    ahead = _IDS_AHEAD.pop(wanted, None)
    return ahead.result() if ahead is not None and ahead.exception() is None else None


def patch_ids(repo: Repository, diff: bytes, *, verbatim: bool = False) -> list[tuple[str, str]]:
    """(patch-id, commit or zeros) of every patch in `diff`, in order: the one patch-id path.

    `--stable` ignores whitespace (what already-merged detection wants); `--verbatim` does not (what tells a
    patch applied with its CRs from one whose CRs were stripped).
    """
    text = repo.run(["patch-id", "--verbatim" if verbatim else "--stable"], stdin=diff).text
    return [(parts[0], parts[1]) for parts in (line.split() for line in text.splitlines()) if len(parts) == 2]


def file_patch_ids(repo: Repository, files: Sequence[Path], *, verbatim: bool = False) -> list[str | None]:
    """The patch-id of each patch file (None for one git finds no diff in), in one call when it can."""
    ahead = _taken(lambda: ("files", repo.common_dir, tuple(files), verbatim))
    if ahead is not None:
        return list(ahead)
    return _file_patch_ids(repo, files, verbatim=verbatim)


def _file_patch_ids(repo: Repository, files: Sequence[Path], *, verbatim: bool = False) -> list[str | None]:
    from kpatch.errors import SeriesError
    from kpatch.files import PATCH_FILE, read_input

    texts = [read_input(f, PATCH_FILE, SeriesError) for f in files]
    ids = [pid for pid, _ in patch_ids(repo, b"".join(texts), verbatim=verbatim)]
    if len(ids) == len(files):
        return list(ids)
    return [next(iter(pid for pid, _ in patch_ids(repo, text, verbatim=verbatim)), None) for text in texts]


def commit_patch_ids(repo: Repository, since: str, until: str, paths: Sequence[str] | None = None, *,
                     verbatim: bool = False, subjects: dict[str, str] | None = None,
                     renames: bool = False) -> dict[str, str]:
    """{commit: patch-id} for since..until (only commits touching `paths`, when given), oldest first.

    A walk limited by pathspecs costs about (changed entries x pathspecs): with a few dozen paths it is the
    cheapest way; with hundreds, listing every commit's paths once (`git log --raw`) and diffing only the commits
    that touch them is (300 paths over 1,500 commits of a vLLM-sized tree: 2.7 s against 0.7 s; 30 paths:
    0.12 s against 0.17 s). `subjects`, when given, is filled with {commit: subject} of every commit hashed.
    `renames`: diff with rename detection (as patch files are written), which pairs a removed and an added file
    only when the pathspec names both: for patches that rename a file, walked with their own paths.
    """
    ahead = _taken(lambda: ("walk", repo.common_dir, since, until, tuple(paths) if paths is not None else None,
                            verbatim, renames))
    if ahead is not None:
        ids, seen = ahead
        if subjects is not None:
            subjects.update(seen)
        return dict(ids)
    return _commit_patch_ids(repo, since, until, paths, verbatim=verbatim, subjects=subjects, renames=renames)


def _commit_patch_ids(repo: Repository, since: str, until: str, paths: Sequence[str] | None, *, verbatim: bool,
                      subjects: dict[str, str] | None, renames: bool) -> dict[str, str]:
    if paths is not None and not paths:
        return {}
    if isinstance(repo, Mirror):  # a blobless one: the blobs the diffs read, in one fetch (nothing for a full one)
        repo.prefetch_diffs(since, until, paths, whole_commits=not renames and paths is not None and
                            len(paths) > _PATHSPEC_WALK_MAX)
    if renames or paths is None or len(paths) <= _PATHSPEC_WALK_MAX:
        # with paths and without `renames`: no rename detection, as the walk over many paths below has none
        detect = ["-M"] if renames else ["--no-renames"] if paths is not None else []
        limit = ["--", *literal(paths)] if paths is not None else []
        return _log_patch_ids(repo, [*detect, "--reverse", "--end-of-options", f"{since}..{until}", *limit],
                              verbatim=verbatim, subjects=subjects)
    wanted = set(paths)
    touching = _commits_touching(repo, since, until, wanted)
    if not touching:
        return {}
    # The diff is cut down to `paths` here, not by a pathspec: git matches every pathspec against every entry.
    return _log_patch_ids(repo, ["--no-renames", "--no-walk=unsorted", "--end-of-options", *touching],
                          verbatim=verbatim, subjects=subjects, only=wanted)


def _commits_touching(repo: Repository, since: str, until: str, paths: set[str]) -> list[str]:
    """Commits of since..until (oldest first) whose own diff touches one of `paths` (merges: none)."""
    listing = repo.run(["log", "--reverse", "--no-renames", "--raw", "-z", "--format=%H", "--end-of-options",
                        f"{since}..{until}"]).stdout.decode("utf-8", "surrogateescape")
    # -z --raw: each commit's SHA, then per changed file ":<modes> <oids> <status>" and its path, NUL-separated.
    found: list[str] = []
    sha = ""
    tokens = iter(listing.split("\0"))
    for token in tokens:
        token = token.lstrip("\n")
        if token.startswith(":"):
            if next(tokens, None) in paths and found[-1:] != [sha]:
                found.append(sha)
        elif token:
            sha = token
    return found


def patch_ids_of(repo: Repository, commits: Sequence[str], *, verbatim: bool = False) -> dict[str, str]:
    """{commit: patch-id} for exactly these commits."""
    if not commits:
        return {}
    return _log_patch_ids(repo, ["--no-walk=unsorted", "--end-of-options", *commits], verbatim=verbatim)


def _log_patch_ids(repo: Repository, args: list[str], *, verbatim: bool, subjects: dict[str, str] | None = None,
                   only: set[str] | None = None) -> dict[str, str]:
    diff = repo.run(["log", "-p", "--no-color", "--no-ext-diff", "--format=commit %H %s", *args]).stdout
    if only is not None:
        diff = _only_paths(diff, only)
    if subjects is not None:  # patch-id reads the SHA after "commit " and ignores the rest of the line
        for found in _COMMIT_LINE.finditer(diff):
            subjects[found.group(1).decode()] = (found.group(2) or b"").decode("utf-8", "replace")
    return {commit: pid for pid, commit in patch_ids(repo, diff, verbatim=verbatim)}


_COMMIT_LINE = re.compile(rb"^commit (.{40})(?:.(.*))?$", re.MULTILINE)  # its SHA (40 bytes), and after a byte the rest
_SECTION = re.compile(rb"^(?=diff --git |commit )", re.MULTILINE)  # where a file's or a commit's section starts
_LONE_CR = re.compile(rb"\r(?!\n)")  # a line break to bytes.splitlines(), not to the sections' ^


def _only_paths(diff: bytes, paths: set[str]) -> bytes:
    """`git log -p --no-renames` output with the file sections of other paths left out: cut into sections by the
    regex engine (a file's from its `diff --git` line, a commit's from its `commit` line), not line by line."""
    if _LONE_CR.search(diff):
        return _only_paths_by_line(diff, paths)
    kept = []
    for section in _SECTION.split(diff):
        if section.startswith(b"diff --git ") and \
                _diff_path(section.split(b"\n", 1)[0][len(b"diff --git "):]) not in paths:
            continue
        kept.append(section)
    return b"".join(kept)


def _only_paths_by_line(diff: bytes, paths: set[str]) -> bytes:
    """_only_paths, line by line as bytes.splitlines() cuts them (a lone CR too)."""
    kept: list[bytes] = []
    keep = True
    for line in diff.splitlines(keepends=True):
        if line.startswith(b"diff --git "):
            keep = _diff_path(line.rstrip(b"\n")[len(b"diff --git "):]) in paths
        elif line.startswith(b"commit "):
            keep = True
        if keep:
            kept.append(line)
    return b"".join(kept)


def _diff_path(names: bytes) -> str | None:
    """The path of a `diff --git a/P b/P` line without renames (both sides name it), C-quoted or not."""
    if names.startswith(b'"'):
        return _unquote(names)[2:]
    size = (len(names) - 5) // 2  # "a/" P " b/" P
    return names[2:2 + size].decode("utf-8", "surrogateescape") if names[2 + size:5 + size] == b" b/" else None


_ESCAPES = {ord("a"): 7, ord("b"): 8, ord("t"): 9, ord("n"): 10, ord("v"): 11, ord("f"): 12, ord("r"): 13}


def _unquote(quoted: bytes) -> str:
    """The first of git's C-quoted names in `quoted` ("a/x\\ty" ...), its escapes and \\ooo octal bytes undone."""
    out = bytearray()
    i = 1
    while i < len(quoted) and quoted[i] != ord('"'):
        byte = quoted[i]
        if byte == ord("\\") and i + 1 < len(quoted):
            nxt = quoted[i + 1]
            if ord("0") <= nxt <= ord("7"):
                out.append(int(quoted[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(byte)
        i += 1
    return out.decode("utf-8", "surrogateescape")


def trial(repo: Repository, commit: str, kept: Sequence[Path], patch: Path) -> Trial:
    """What `git am -3` of `patch` would do on `commit` with `kept` applied first, on a throwaway index only."""
    with TrialIndex(repo, commit) as index:
        return index.next(patch) if index.keep(kept) else Trial.CONFLICT


class TrialIndex:
    """A throwaway index at a commit that patches go onto one after another, as `git am -3` takes them: `next`
    says what am would do with a patch and keeps it when it applies (a conflict is undone), so trying n patches
    costs n applies, not the n^2 of applying every earlier one again for each (a 250-patch stack stopped early
    took 90 s of trial applies that way). Nothing but the index file in its own temp folder is written."""

    def __init__(self, repo: Repository, commit: str) -> None:
        self.repo = repo
        self._folder = scratch.make("trial")
        self._env = {"GIT_INDEX_FILE": str(self._folder / "index")}
        try:
            self.repo.run(["read-tree", "--end-of-options", commit], env=self._env)
        except BaseException:
            shutil.rmtree(self._folder, ignore_errors=True)
            raise
        self._tree: str | None = None  # the index's tree, once written

    def __enter__(self) -> TrialIndex:
        return self

    def __exit__(self, *_: object) -> None:
        killseam.reached("scratch:trial")
        shutil.rmtree(self._folder, ignore_errors=True)

    def keep(self, patches: Sequence[Path]) -> bool:
        """Apply `patches` (each with its 3-way fallback); False when one does not apply."""
        self._tree = None
        return all(self._apply(path, "--3way") for path in patches)

    def next(self, patch: Path) -> Trial:
        """What am would do with `patch` here; it stays applied unless it conflicts.

        It goes on with `--3way` even when it applies as it is: that also writes the blob the patch made where it
        was written (its preimage plus the patch), which the next patch to the same file names as its preimage;
        a later 3-way fallback (am's, and the next trial's) needs it, and a fresh mirror does not have it."""
        before = self._tree or self.repo.out(["write-tree"], env=self._env)
        clean = self._apply(patch, "--check")
        applied = self._apply(patch, "--3way")
        if not applied and clean:  # the merge conflicts where the patch applies as it is: am takes it as it is
            self._reset(before)
            applied = self._apply(patch)
        if not applied:
            self._reset(before)
            return Trial.CONFLICT
        self._tree = self.repo.out(["write-tree"], env=self._env)
        if self._tree == before:
            return Trial.EMPTY
        return Trial.CLEAN if clean else Trial.THREE_WAY

    def _reset(self, tree: str) -> None:
        """Back to `tree` (a 3-way try that failed left conflicts in the index)."""
        self.repo.run(["read-tree", "--end-of-options", tree], env=self._env)
        self._tree = tree

    def _apply(self, path: Path, *how: str) -> bool:
        return self.repo.run(["-c", "rerere.enabled=false", "apply", "--cached", *how, "--", str(path)],
                             env=self._env, check=False).status == 0



_ZERO = "0" * 40
_SECTION_INDEX = re.compile(r"^index ([0-9a-f]{40})\.\.([0-9a-f]{40})(?: ([0-7]{6}))?$", re.MULTILINE)
_SECTION_PATHS = re.compile(r"^(?:--- a/|\+\+\+ b/|rename from |rename to )(.+)$", re.MULTILINE)


@dataclass(frozen=True)
class _Section:
    """One file of one patch: the blob its full-index line says it turns into which."""

    patch: int  # its patch's place in the stack
    paths: tuple[str, ...]  # its old name first, then the new one (the same for a change in place)
    old: str
    new: str
    mode: str


def restore_preimages(mirror: Mirror, patches: Sequence[Path]) -> int:
    """Write the preimage blobs `patches` (a stack, in order) name that `mirror` lacks because an earlier patch of the
    stack made them: a fork's blobs, which no upstream has, so a fresh mirror lacks them. Each is made from its own
    preimage and that earlier patch's part for the file alone, on a throwaway index (no tree, no base), in stack
    order. Returns how many blobs were written.

    `git am -3` falls back to a 3-way merge from exactly those blobs. Without them, a patch that needs the fallback
    (upstream moved its context) stops as a conflict ("Repository lacks necessary blobs") in a rebase from a fresh
    checkout, where one after `kpatch apply` (whose am wrote them) merges it."""
    sections = [s for i, path in enumerate(patches) for s in _sections(i, path)]
    made_by: dict[str, _Section] = {}
    for section in sections:
        made_by.setdefault(section.new, section)
    wanted = sorted({s.old for s in sections if s.old in made_by})
    missing = set(mirror.absent(wanted))
    needed: dict[tuple[int, str], _Section] = {}
    for blob in sorted(missing):  # each missing blob, and the missing ones it is made from in turn
        link = made_by.get(blob)
        while link is not None and (link.patch, link.paths[0]) not in needed:
            needed[(link.patch, link.paths[0])] = link
            link = made_by.get(link.old) if link.old in missing else None
    made: set[str] = set()
    with scratch.folder("preimages") as folder:
        env = {"GIT_INDEX_FILE": str(folder / "index")}
        for index in sorted({s.patch for s in needed.values()}):
            ready = [s for s in needed.values() if s.patch == index and (s.old not in missing or s.old in made)]
            if not ready:
                continue
            mirror.run(["read-tree", "--empty"], env=env)
            mirror.run(["update-index", "--add", "--index-info"], env=env,
                       stdin="".join(f"{s.mode} {s.old}\t{s.paths[0]}\n" for s in ready).encode())
            includes = [f"--include={_glob_literal(p)}" for s in ready for p in s.paths]
            if mirror.run(["apply", "--cached", *includes, "--", str(patches[index])], env=env,
                          check=False).status == 0:
                made.update(s.new for s in ready)
    return len(made & missing)


def _sections(index: int, patch: Path) -> list[_Section]:
    """The files of a full-index patch whose blobs it names (a patch whose paths git quotes is left out)."""
    try:
        text = patch.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return []  # git am says so, in its words
    found = []
    for part in text.split("\ndiff --git ")[1:]:
        header = part.split("\n@@", 1)[0]
        blobs = _SECTION_INDEX.search(header)
        paths = tuple(dict.fromkeys(_SECTION_PATHS.findall(header)))
        if blobs and paths and blobs.group(1) != _ZERO and blobs.group(2) != _ZERO:
            found.append(_Section(index, paths, blobs.group(1), blobs.group(2), blobs.group(3) or "100644"))
    return found


def _glob_literal(path: str) -> str:
    """`path` as a `git apply --include` pattern that matches only itself."""
    return re.sub(r"([*?\[\\])", r"\\\1", path)
