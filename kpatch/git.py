"""The only module that runs git: mirrors, worktrees, `git am`, format-patch, patch-id."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from kpatch.errors import FailedHunk, GitError, UpstreamError

log = logging.getLogger("kpatch.git")

# Applied commits get this committer and the author's date, so the same base and patches give the same SHAs.
COMMITTER = ("kpatch", "kpatch@localhost")
FETCH_TRIES = 3
# Options that make format-patch output depend on nothing but the commit (no version, signature or
# abbreviation noise); user and system git config is ignored for the same reason.
FORMAT_PATCH = ["format-patch", "--zero-commit", "--no-signature", "-N", "--full-index", "--no-thread",
                "--no-attach", "--no-cover-letter", "--no-notes", "--encode-email-headers", "-M", "--stat=72"]


@dataclass(frozen=True)
class AmOutcome:
    """What `git am` did: how many patches it applied, and where it stopped if it stopped."""

    applied: int
    stopped_at: int | None  # 0-based index into the patches given to this am run
    hunks: tuple[FailedHunk, ...]


def run(args: Sequence[str], cwd: Path | None = None, *, stdin: bytes | None = None,
        env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """Run git; raise GitError with command, status and output when it fails and `check` is set."""
    command = ["git", *args]
    started = time.monotonic()
    proc = subprocess.run(command, cwd=cwd, input=stdin, capture_output=True, env=_env(env))
    log.debug("%s (cwd=%s) -> %d in %.3fs", " ".join(command), cwd, proc.returncode, time.monotonic() - started)
    if check and proc.returncode != 0:
        raise GitError(command, proc.returncode, _text(proc.stdout), _text(proc.stderr))
    return proc


def out(args: Sequence[str], cwd: Path | None = None, **kwargs: object) -> str:
    """stdout of a git command as text, trailing newline removed."""
    return _text(run(args, cwd, **kwargs).stdout).rstrip("\n")  # type: ignore[arg-type]


def _ignore(percent: int) -> None:
    pass


def fetch_mirror(mirror: Path, url: str, upstream: str, on_progress: Callable[[int], None] = _ignore,
                 retry_delay: float = 1.0) -> None:
    """Create the bare mirror if needed, then fetch every branch and tag of `url` into it (incremental).

    `on_progress` gets the percentage of objects received, read from git's own progress output.
    """
    if not (mirror / "HEAD").exists():
        mirror.mkdir(parents=True, exist_ok=True)
        run(["init", "--quiet", "--bare", str(mirror)])
    refspecs = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"]
    last = ""
    for attempt in range(1, FETCH_TRIES + 1):
        status, stderr = _fetch(mirror, [url, *refspecs], on_progress)
        if status == 0:
            on_progress(100)
            # Changed-path Bloom filters let path-limited walks (already-merged detection) skip most commits.
            run(["commit-graph", "write", "--reachable", "--changed-paths", "--split"], mirror)
            return
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        log.warning("fetch %s from %s failed (try %d/%d): %s", upstream, url, attempt, FETCH_TRIES, last)
        if attempt < FETCH_TRIES:
            time.sleep(retry_delay * attempt)
    raise UpstreamError(f"upstream {upstream}: cannot fetch {url} after {FETCH_TRIES} tries: {last}")


def _fetch(mirror: Path, args: list[str], on_progress: Callable[[int], None]) -> tuple[int, str]:
    """git fetch --progress, turning "Receiving objects:  45% (...)" into on_progress(45)."""
    command = ["git", "fetch", "--progress", "--prune", "--no-write-fetch-head", *args]
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=mirror, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=_env({"GIT_TERMINAL_PROMPT": "0"}))
    assert proc.stderr is not None
    lines: list[str] = []
    stream = proc.stderr.fileno()
    for chunk in iter(lambda: os.read(stream, 4096), b""):
        for piece in re.split(r"[\r\n]", _text(chunk)):
            match = re.search(r"Receiving objects:\s+(\d+)%", piece)
            if match:
                on_progress(int(match.group(1)))
            elif piece.strip():
                lines.append(piece)
    status = proc.wait()
    log.debug("%s (cwd=%s) -> %d in %.3fs", " ".join(command), mirror, status, time.monotonic() - started)
    return status, "\n".join(lines)


def resolve(repo: Path, ref: str) -> str | None:
    """The commit SHA `ref` names in `repo` (full SHA, tag, branch, or other rev), or None."""
    candidates = (ref,) if re.fullmatch(r"[0-9a-f]{40}", ref) else (f"refs/tags/{ref}", f"refs/heads/{ref}", ref)
    for candidate in candidates:
        proc = run(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{candidate}^{{commit}}"], repo,
                   check=False)
        if proc.returncode == 0:
            return _text(proc.stdout).strip()
    return None


def count_commits(repo: Path, since: str, until: str) -> int:
    return int(out(["rev-list", "--count", f"{since}..{until}"], repo))


def symlinks_in_tree(repo: Path, commit: str, paths: Sequence[str]) -> set[str]:
    """Those of `paths` (and of their parent folders) that are symlinks in `commit`."""
    prefixes = sorted({"/".join(p.split("/")[: i + 1]) for p in paths for i in range(p.count("/") + 1)})
    if not prefixes:
        return set()
    listing = out(["ls-tree", "-z", "--full-tree", commit, "--", *prefixes], repo).split("\0")
    return {entry.split("\t", 1)[1] for entry in listing if entry.startswith("120000 ")}


def is_worktree_of(path: Path, mirror: Path) -> bool:
    """True when `path` is a worktree whose objects live in `mirror`."""
    if not (path / ".git").exists():
        return False
    proc = run(["rev-parse", "--git-common-dir"], path, check=False)
    if proc.returncode != 0:
        return False
    common = Path(_text(proc.stdout).strip())
    common = common if common.is_absolute() else (path / common)
    return common.resolve() == mirror.resolve()


def add_worktree(mirror: Path, path: Path, commit: str) -> None:
    run(["worktree", "prune"], mirror)
    run(["worktree", "add", "--quiet", "--force", "--detach", str(path), commit], mirror)


def remove_worktree(mirror: Path, path: Path) -> None:
    """Remove a worktree; one left half-made by an interrupted `worktree add` is deleted and pruned."""
    if is_worktree_of(path, mirror):
        run(["worktree", "remove", "--force", str(path)], mirror)
    else:
        shutil.rmtree(path, ignore_errors=True)
        run(["worktree", "prune"], mirror)


def reset_hard(path: Path, commit: str) -> None:
    """Put a worktree kpatch owns (a rebase's scratch) back at `commit`, discarding everything."""
    run(["reset", "--quiet", "--hard", commit], path)


def checkout(path: Path, commit: str) -> None:
    """Detach a clean worktree at `commit`."""
    run(["checkout", "--quiet", "--detach", commit], path)


def dirty_files(path: Path) -> list[str]:
    """Uncommitted changes, untracked files included (porcelain lines)."""
    return [line for line in out(["status", "--porcelain", "--untracked-files=normal"], path).splitlines() if line]


def operation_in_progress(path: Path) -> str | None:
    """'am', 'rebase', 'merge' or 'cherry-pick' when the worktree is in the middle of one."""
    markers = (("rebase-apply", "am"), ("rebase-merge", "rebase"), ("MERGE_HEAD", "merge"),
               ("CHERRY_PICK_HEAD", "cherry-pick"))
    args = ["rev-parse", "--path-format=absolute"]
    for marker, _ in markers:
        args += ["--git-path", marker]
    for location, (_, name) in zip(out(args, path).splitlines(), markers, strict=True):
        if Path(location).exists():
            return name
    return None


def head(path: Path) -> str:
    return out(["rev-parse", "HEAD"], path)


def commits(path: Path, base: str, tip: str = "HEAD") -> list[str]:
    """SHAs in base..tip, oldest first."""
    return out(["rev-list", "--reverse", f"{base}..{tip}"], path).split()


def am(path: Path, patches: Sequence[Path], on_progress: Callable[[int], None]) -> AmOutcome:
    """`git am -3` the patches in one process; report progress by watching git's own state folder."""
    if not patches:
        return AmOutcome(applied=0, stopped_at=None, hunks=())
    # --keep-non-patch: a subject like "[XPU] Fix x" keeps its tag, so export gives back the same bytes.
    args = ["am", "-3", "--quiet", "--keep-non-patch", "--committer-date-is-author-date", "--no-gpg-sign",
            *map(str, patches)]
    state = Path(out(["rev-parse", "--path-format=absolute", "--git-path", "rebase-apply"], path))
    started = time.monotonic()
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(["git", *args], cwd=path, stdout=stdout, stderr=stderr, env=_env(_am_env()))
        while True:
            try:
                proc.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                _report(state, on_progress)
        stdout.seek(0)
        stderr.seek(0)
        out_text, err_text = _text(stdout.read()), _text(stderr.read())
    log.debug("git am of %d patches (cwd=%s) -> %d in %.3fs\n%s%s", len(patches), path, proc.returncode,
              time.monotonic() - started, out_text, err_text)
    if proc.returncode == 0:
        on_progress(len(patches))
        return AmOutcome(applied=len(patches), stopped_at=None, hunks=())
    return _stopped(path, state, ["git", *args], proc.returncode, out_text, err_text)


def am_continue(path: Path, remaining: int, on_progress: Callable[[int], None]) -> AmOutcome:
    """`git am --continue` after a person resolved and staged the conflict."""
    state = Path(out(["rev-parse", "--path-format=absolute", "--git-path", "rebase-apply"], path))
    first = _am_number(state, "next") - 1
    proc = run(["am", "--continue"], path, check=False, env=_am_env())
    if proc.returncode == 0:
        on_progress(remaining)
        return AmOutcome(applied=remaining, stopped_at=None, hunks=())
    outcome = _stopped(path, state, ["git", "am", "--continue"], proc.returncode, _text(proc.stdout),
                       _text(proc.stderr))
    stopped = None if outcome.stopped_at is None else outcome.stopped_at - first
    return AmOutcome(applied=outcome.applied - first, stopped_at=stopped, hunks=outcome.hunks)


def am_abort(path: Path) -> None:
    run(["am", "--abort"], path, env=_am_env())


def format_patches(path: Path, base: str, tip: str = "HEAD") -> list[bytes]:
    """`git format-patch` of base..tip, one mbox text per commit, deterministic bytes."""
    with tempfile.TemporaryDirectory(prefix="kpatch-export-") as folder:
        run([*FORMAT_PATCH, "--output-directory", folder, f"{base}..{tip}"], path, env=_isolated())
        return [p.read_bytes() for p in sorted(Path(folder).iterdir())]


def patch_ids(repo: Path, diff_text: bytes) -> list[str]:
    """`git patch-id --stable` of every patch in `diff_text`, in order."""
    text = _text(run(["patch-id", "--stable"], repo, stdin=diff_text).stdout)
    return [line.split()[0] for line in text.splitlines() if line]


def file_patch_ids(repo: Path, files: Sequence[Path]) -> list[str | None]:
    """The stable patch-id of each patch file (None for one git finds no diff in), in one call when it can."""
    ids = patch_ids(repo, b"".join(f.read_bytes() for f in files)) if files else []
    if len(ids) == len(files):
        return list(ids)
    return [next(iter(patch_ids(repo, f.read_bytes())), None) for f in files]


def commit_patch_ids(repo: Path, base: str, tip: str) -> dict[str, str]:
    """{commit SHA: stable patch-id} for base..tip, in one log + one patch-id call."""
    diff = run(["log", "-p", "--no-color", "--no-ext-diff", "--format=commit %H", f"{base}..{tip}"], repo,
               env=_isolated()).stdout
    text = _text(run(["patch-id", "--stable"], repo, stdin=diff).stdout)
    return {parts[1]: parts[0] for parts in (line.split() for line in text.splitlines()) if len(parts) == 2}


def _stopped(path: Path, state: Path, command: list[str], status: int, stdout: str, stderr: str) -> AmOutcome:
    if not state.exists():  # failed before it started: not a conflict
        raise GitError(command, status, stdout, stderr)
    first = _am_number(state, "next")
    return AmOutcome(applied=first - 1, stopped_at=first - 1, hunks=_failed_hunks(path, stdout + stderr))


def _failed_hunks(path: Path, output: str) -> tuple[FailedHunk, ...]:
    """Where git said the patch failed, plus the conflict markers a 3-way merge left behind."""
    hunks: list[FailedHunk] = []
    for match in re.finditer(r"^error: patch failed: (.+):(\d+)$", output, re.MULTILINE):
        hunks.append(FailedHunk(match.group(1), int(match.group(2))))
    for match in re.finditer(r"^error: (.+): (?:does not exist in index|already exists in index)$", output,
                             re.MULTILINE):
        hunks.append(FailedHunk(match.group(1), None))
    unmerged = out(["diff", "--name-only", "--diff-filter=U", "-z"], path).split("\0")
    for name in filter(None, unmerged):
        hunks = [h for h in hunks if h.path != name]
        try:
            lines = (path / name).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
        markers = [i + 1 for i, line in enumerate(lines) if line.startswith("<<<<<<< ")]
        hunks.extend(FailedHunk(name, line) for line in markers or [None])  # type: ignore[list-item]
    return tuple(dict.fromkeys(hunks))


def _am_number(state: Path, name: str) -> int:
    try:
        return int((state / name).read_text().strip())
    except (OSError, ValueError):
        return 1


def _report(state: Path, on_progress: Callable[[int], None]) -> None:
    if (state / "next").exists():
        on_progress(_am_number(state, "next") - 1)


def _am_env() -> dict[str, str]:
    return {**_isolated(), "GIT_COMMITTER_NAME": COMMITTER[0], "GIT_COMMITTER_EMAIL": COMMITTER[1]}


def _isolated() -> dict[str, str]:
    """Ignore user and system git config, so output and commits do not depend on the machine."""
    return {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def _env(extra: dict[str, str] | None) -> dict[str, str] | None:
    if not extra:
        return None
    return {**os.environ, **extra}


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def init_repo(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    run(["init", "--quiet", "--initial-branch=main", str(path)])


def commit_all(repo: Path, message: str, author: tuple[str, str], when: int) -> str:
    """Stage everything and commit it with a fixed author, committer and date; return the SHA."""
    stamp = f"@{when} +0000"
    env = {**_isolated(), "GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1], "GIT_AUTHOR_DATE": stamp,
           "GIT_COMMITTER_NAME": author[0], "GIT_COMMITTER_EMAIL": author[1], "GIT_COMMITTER_DATE": stamp}
    run(["add", "--all"], repo)
    run(["commit", "--quiet", "--no-gpg-sign", "--allow-empty", "--message", message], repo, env=env)
    return head(repo)


def tag(repo: Path, name: str) -> None:
    run(["tag", name], repo)


def write_patches(repo: Path, base: str, folder: Path) -> list[str]:
    """`git format-patch` of base..HEAD into `folder` with kpatch's flags; return the file names in order."""
    folder.mkdir(parents=True, exist_ok=True)
    listing = out([*FORMAT_PATCH, "--output-directory", str(folder), f"{base}..HEAD"], repo, env=_isolated())
    return [Path(line).name for line in listing.splitlines() if line]


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    subject: str
    author: str
    date: str


class Step(Enum):
    """What one `git am -3` of one patch did."""

    CLEAN = "clean"
    THREE_WAY = "three-way"
    EMPTY = "empty"  # the patch changes nothing any more: its content is already upstream
    CONFLICT = "conflict"


@dataclass(frozen=True)
class StepResult:
    step: Step
    rerere: bool  # a recorded resolution resolved the conflict
    hunks: tuple[FailedHunk, ...]


def is_ancestor(repo: Path, older: str, newer: str) -> bool:
    return run(["merge-base", "--is-ancestor", older, newer], repo, check=False).returncode == 0


def first_parent_range(repo: Path, since: str, until: str) -> list[str]:
    """Commits of since..until along the first-parent line, oldest first: the order bisection walks."""
    return out(["rev-list", "--first-parent", "--reverse", f"{since}..{until}"], repo).split()


def commit_info(repo: Path, sha: str) -> CommitInfo:
    text = out(["show", "--no-patch", "--format=%H%x00%s%x00%an <%ae>%x00%aI", sha], repo)
    full, subject, author, date = text.split("\0")
    return CommitInfo(sha=full, subject=subject, author=author, date=date)


def range_patch_ids(repo: Path, since: str, until: str, paths: Sequence[str]) -> dict[str, str]:
    """{stable patch-id: commit} for the commits of since..until that touch `paths` (only those are hashed)."""
    if not paths:
        return {}
    diff = run(["log", "-p", "--no-color", "--no-ext-diff", "--no-renames", "--format=commit %H",
                f"{since}..{until}", "--", *paths], repo, env=_isolated()).stdout
    text = _text(run(["patch-id", "--stable"], repo, stdin=diff).stdout)
    ids: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            ids.setdefault(parts[0], parts[1])
    return ids


def last_commit_touching(repo: Path, since: str, until: str, paths: Sequence[str]) -> str | None:
    found = out(["log", "-1", "--format=%H", f"{since}..{until}", "--", *paths], repo) if paths else ""
    return found or None


def trial(repo: Path, commit: str, kept: Sequence[Path], patch: Path) -> Step:
    """What `git am -3` of `patch` would do on `commit` with `kept` applied first, on a throwaway index only."""
    with tempfile.TemporaryDirectory(prefix="kpatch-trial-") as folder:
        env = {**_isolated(), "GIT_INDEX_FILE": str(Path(folder) / "index")}

        def apply(path: Path, *how: str) -> bool:
            return run(["-c", "rerere.enabled=false", "apply", "--cached", *how, str(path)], repo, env=env,
                       check=False).returncode == 0

        run(["read-tree", commit], repo, env=env)
        if not all(apply(k, "--3way") for k in kept):
            return Step.CONFLICT
        before = out(["write-tree"], repo, env=env)
        if apply(patch):
            step = Step.CLEAN
        elif apply(patch, "--3way"):
            step = Step.THREE_WAY
        else:
            return Step.CONFLICT
        return Step.EMPTY if out(["write-tree"], repo, env=env) == before else step


def enable_rerere(repo: Path) -> Path:
    """Turn on rerere (with autoupdate) for `repo` and its worktrees; return its rr-cache folder."""
    run(["config", "rerere.enabled", "true"], repo)
    run(["config", "rerere.autoupdate", "true"], repo)
    return Path(out(["rev-parse", "--path-format=absolute", "--git-common-dir"], repo)) / "rr-cache"


def am_one(path: Path, patch: Path) -> StepResult:
    """`git am -3` of one patch; a conflict that rerere resolved completely is continued automatically."""
    before = head(path)
    proc = run(["am", "-3", "--keep-non-patch", "--committer-date-is-author-date", "--no-gpg-sign", str(patch)],
               path, check=False, env=_am_env())
    output = _text(proc.stdout) + _text(proc.stderr)
    three_way = "Falling back to patching base and 3-way merge" in output
    if proc.returncode == 0:
        if head(path) == before:
            return StepResult(Step.EMPTY, False, ())
        return StepResult(Step.THREE_WAY if three_way else Step.CLEAN, False, ())
    if operation_in_progress(path) != "am":
        raise GitError(["git", "am", str(patch)], proc.returncode, _text(proc.stdout), _text(proc.stderr))
    unmerged = out(["diff", "--name-only", "--diff-filter=U"], path)
    if "using previous resolution" in output and not unmerged:
        resumed = run(["am", "--continue"], path, check=False, env=_am_env())
        if resumed.returncode == 0:
            return StepResult(Step.THREE_WAY, True, ())
    return StepResult(Step.CONFLICT, False, _failed_hunks(path, output))


def am_resume(path: Path) -> StepResult:
    """`git am --continue` after a person resolved the conflict (rerere records the resolution)."""
    before = head(path)
    proc = run(["am", "--continue"], path, check=False, env=_am_env())
    if proc.returncode != 0:
        output = _text(proc.stdout) + _text(proc.stderr)
        return StepResult(Step.CONFLICT, False, _failed_hunks(path, output))
    return StepResult(Step.THREE_WAY if head(path) != before else Step.EMPTY, False, ())


def archive(repo: Path, commit: str, prefix: str) -> bytes:
    """A tar of the tracked files at `commit`, under `prefix` (what a build gets: no untracked files)."""
    return run(["archive", "--format=tar", f"--prefix={prefix}", commit], repo, env=_isolated()).stdout


def archive_paths(repo: Path, commit: str, prefix: str, paths: Sequence[str]) -> bytes:
    """A tar of only `paths` (files or folders) of the tree at `commit`, under `prefix` (what a test run gets)."""
    return run(["archive", "--format=tar", f"--prefix={prefix}", commit, "--", *paths], repo, env=_isolated()).stdout


def describe(repo: Path, commit: str) -> tuple[str, int] | None:
    """(nearest tag, commits since it) for `commit`, or None when no tag is reachable."""
    proc = run(["describe", "--tags", "--long", commit], repo, check=False)
    if proc.returncode != 0:
        return None
    tag, count, _ = _text(proc.stdout).strip().rsplit("-", 2)
    return tag, int(count)
