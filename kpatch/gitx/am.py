"""The one `git am` engine: apply and rebase both use it, for a whole stack or one patch at a time.

It reads am's own per-patch report as it comes ("Applying: ...", "Falling back to patching base and 3-way
merge...", "No changes -- Patch already applied."), so one am process tells how each patch went and drives
the progress bar. Where am stops, it says which files and lines failed. A recorded resolution (rerere) that
resolves a conflict completely is continued without a person.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from kpatch.errors import GitError, StorageError
from kpatch.gitx import picks
from kpatch.gitx.repo import Repository
from kpatch.gitx.runner import failure_for, popen
from kpatch.gitx.storage import storage_problem

# -3: fall back to a 3-way merge; --keep-cr: CRLF files (real vLLM has them) keep their CRs;
# --keep-non-patch: "[XPU] Fix x" keeps its tag, so export gives back the same bytes.
AM_OPTIONS = ("-3", "--keep-cr", "--keep-non-patch", "--committer-date-is-author-date", "--no-gpg-sign")
# What `git am --continue` must be told again: am keeps -3 and --keep-non-patch in its state folder, but not
# these, so without them every commit after a resolved conflict got the current time as committer date (and
# a new SHA on every run).
RESUME_OPTIONS = ("--committer-date-is-author-date", "--no-gpg-sign")
log = logging.getLogger("kpatch.git")
_FAILED = re.compile(r"^error: patch failed: (.+):(\d+)$", re.MULTILINE)
# git's words when a patch's `index` lines name preimage blobs the repository does not have (the patch was made
# against another base), so `am -3` cannot build the merge's ancestor: git 2.39+ and older gits.
_NO_BLOB = re.compile(r"^error: (?:invalid object \d+ [0-9a-f]+ for '(.+)'|sha1 information is lacking or useless "
                      r"\((.+)\)\.?)$", re.MULTILINE)
_IN_INDEX = re.compile(r"^error: (.+): (?:does not exist in index|already exists in (?:index|working directory))$",
                       re.MULTILINE)


class Method(Enum):
    """How am took one patch."""

    CLEAN = "clean"
    THREE_WAY = "three-way"
    EMPTY = "empty"  # nothing left to apply: its change is already in the tree (no commit made)


@dataclass(frozen=True)
class Hunk:
    """One place where a patch did not apply: a file and the line git reported (or a conflict marker)."""

    path: str
    line: int | None


@dataclass(frozen=True)
class AmRun:
    """What one am process did: a method per patch it finished, and where it stopped (if it did)."""

    methods: tuple[Method, ...]
    stopped: bool  # am stopped at the patch right after the finished ones
    hunks: tuple[Hunk, ...] = ()
    rerere: tuple[int, ...] = ()  # offsets into `methods` of conflicts a recorded resolution resolved
    output: str = field(default="", repr=False)
    cause: str = ""  # why it stopped, in words, when the hunks alone do not say it (no 3-way merge was possible)


class Am:
    """`git am` in one worktree."""

    def __init__(self, worktree: Repository) -> None:
        self.tree = worktree

    @property
    def state_dir(self) -> Path:
        return self.tree.git_dir / "rebase-apply"

    def in_progress(self) -> bool:
        return self.state_dir.is_dir()

    def start(self, patches: Sequence[Path], on_progress: Callable[[int], None], *, rerere: bool = False) -> AmRun:
        """Apply `patches` on HEAD; `on_progress` gets how many are done."""
        if not patches:
            return AmRun(methods=(), stopped=False)
        from kpatch.gitx.mirror import Mirror  # only here: a worktree of a blobless mirror fetches preimages first

        common = self.tree.common_dir
        mirror = Mirror(common, common.name.removesuffix(".git"))
        if mirror.partial:
            mirror.prefetch_preimages(patches)
        return self._session(["am", *AM_OPTIONS, "--", *map(str, patches)], on_progress, rerere=rerere)

    def resume(self, on_progress: Callable[[int], None], *, rerere: bool = False) -> AmRun:
        """`git am --continue` after a person resolved and staged the stopped patch; then the rest."""
        return self._session(["am", "--continue", *RESUME_OPTIONS], on_progress, rerere=rerere, resuming=True)

    def after_killed_resume(self, head_before: str, created: Sequence[str] = ()) -> None:
        """Make sense of a `resume` that a kill interrupted (HEAD was `head_before` when it started).

        If it had not committed the person's resolution yet, am stays in progress: resume again. Otherwise
        am's state (possibly half-written, with a patch half-applied) is dropped and the worktree put at HEAD:
        the commits since `head_before` are the resolved patch and those after it; the rest is applied anew.
        """
        head = self.tree.head()
        if head == head_before and self.in_progress():
            return
        self.abort(head, created)

    def abort(self, restore: str, created: Sequence[str] = ()) -> None:
        """Leave any am or picks (even ones a kill left half-written) and put the worktree at `restore`.

        `created` are the files the patches add: an interrupted am may have left them untracked.
        """
        if picks.in_progress(self.tree):  # the rebase's fast path (gitx/picks.py) was killed
            picks.leave(self.tree)
        if self.in_progress():
            if self.tree.run(["am", "--abort"], check=False).status != 0 or self.in_progress():
                self.tree.run(["am", "--quit"], check=False)  # "could not parse author script": drop the state
            if self.in_progress():
                shutil.rmtree(self.state_dir, ignore_errors=True)
        self.tree.reset_hard(restore)
        self.tree.remove_untracked(created)

    def _session(self, args: list[str], on_progress: Callable[[int], None], *, rerere: bool,
                 resuming: bool = False) -> AmRun:
        methods: list[Method] = []
        resolved: list[int] = []
        outputs: list[str] = []
        while True:
            first = self._next() if resuming else 1
            done_before = len(methods)

            def report(n: int, done_before: int = done_before) -> None:
                on_progress(done_before + n)

            status, blocks, output = self._run(args, report)
            outputs.append(output)
            taken = [_method(b) for b in blocks]
            if resuming and taken:
                taken[0] = Method.THREE_WAY  # the patch a person (or rerere) resolved
            if status == 0:
                methods += taken
                on_progress(len(methods))
                return AmRun(methods=tuple(methods), stopped=False, rerere=tuple(resolved), output="\n".join(outputs))
            if not self.in_progress():  # failed before it started (bad patch file, broken repo): not a conflict
                raise failure_for(["git", *args], status, b"", output, self.tree.path)
            log.debug("git am stopped in %s:\n%s", self.tree.path, output.strip())
            problem = storage_problem(args[:1], output, self.tree.path, also=(self.tree.git_dir,), look=True)
            if problem:  # am stopped because it could not write, not at a conflict
                raise StorageError(problem)
            done = self._next() - first
            if done < 0 or done > len(blocks):
                raise GitError(["git", *args], status, "", f"git am stopped at an unexpected patch\n{output}")
            methods += taken[:done]
            if rerere and "using previous resolution" in output and not self.tree.unmerged():
                resolved.append(len(methods))
                args, resuming = ["am", "--continue", *RESUME_OPTIONS], True
                continue
            hunks, cause = _failed_hunks(self.tree, output), ""
            missing = [a or b for a, b in _NO_BLOB.findall(output)]
            if missing:  # nothing was merged, so nothing is marked in the tree: ask git where the hunks fail
                hunks, cause = self._unmergeable(hunks, missing)
            return AmRun(methods=tuple(methods), stopped=True, hunks=hunks, rerere=tuple(resolved),
                         output="\n".join(outputs), cause=cause)

    def _unmergeable(self, hunks: tuple[Hunk, ...], missing: list[str]) -> tuple[tuple[Hunk, ...], str]:
        """The stopped patch names preimage blobs this repository lacks: where its hunks fail on the tree as it
        is (`git apply --check`, which changes nothing), and the cause in words with the step that helps."""
        checked = self.tree.run(["apply", "--check", str(self.state_dir / "patch")], check=False)
        found = [Hunk(m.group(1), int(m.group(2))) for m in _FAILED.finditer(checked.stderr)]
        hunks = tuple(dict.fromkeys([*hunks, *found])) or tuple(Hunk(name, None) for name in dict.fromkeys(missing))
        files = ", ".join(dict.fromkeys(missing))
        cause = (f"its index lines name blobs this upstream does not have ({files}): it was made against another "
                 "base, so git could not fall back on a 3-way merge and changed no file; apply what does apply "
                 "with 'git am --show-current-patch=diff | git apply --reject', fix the hunks of the .rej files "
                 "by hand (then delete them)")
        return hunks, cause

    def _run(self, args: list[str], on_progress: Callable[[int], None]) -> tuple[int, list[list[str]], str]:
        """One am process: exit status, its stdout split into per-patch blocks, and all it printed."""
        proc = popen(args, self.tree.path)
        assert proc.stdout is not None and proc.stderr is not None
        errors: list[bytes] = []
        drain = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
        drain.start()
        blocks: list[list[str]] = []
        lines: list[str] = []
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            lines.append(line)
            if line.startswith("Applying: "):
                blocks.append([])
                on_progress(len(blocks) - 1)
            elif blocks:
                blocks[-1].append(line)
        status = proc.wait()
        drain.join()
        proc.stdout.close()
        proc.stderr.close()
        return status, blocks, "\n".join(lines) + "\n" + b"".join(errors).decode("utf-8", "replace")

    def _next(self) -> int:
        try:
            return int((self.state_dir / "next").read_text().strip())
        except (OSError, ValueError):
            return 1


def _method(block: list[str]) -> Method:
    if "No changes -- Patch already applied." in block:
        return Method.EMPTY
    if "Falling back to patching base and 3-way merge..." in block:
        return Method.THREE_WAY
    return Method.CLEAN


def _failed_hunks(tree: Repository, output: str) -> tuple[Hunk, ...]:
    """Where git said the patch failed, plus the conflict markers a 3-way merge left behind."""
    hunks = [Hunk(m.group(1), int(m.group(2))) for m in _FAILED.finditer(output)]
    hunks += [Hunk(m.group(1), None) for m in _IN_INDEX.finditer(output)]
    for name in tree.unmerged():
        hunks = [h for h in hunks if h.path != name]
        try:
            lines = (tree.path / name).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
        markers = [i + 1 for i, line in enumerate(lines) if line.startswith("<<<<<<< ")]
        hunks += [Hunk(name, line) for line in markers] or [Hunk(name, None)]
    return tuple(dict.fromkeys(hunks))
