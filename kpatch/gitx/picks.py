"""Picking commits onto HEAD in one `git rebase -i` process (ort merges), the fast path of a rebase.

`git am` writes the whole index about three times per patch; a rebase's sequencer picks a stack of commits with
one index write each. What it does not report is how each pick went: which commits became empty (dropped) and
where it stopped. That is read back here from the commits it made, their author, date and message, which the
picks keep (the caller makes sure no two commits share them), and from REBASE_HEAD at a stop.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kpatch import scratch
from kpatch.gitx.repo import Repository, literal
from kpatch.gitx.runner import Completed, failure_for, popen

# --empty=drop: a commit whose change is already in HEAD leaves no commit (am says "No changes");
# --reapply-cherry-picks: no patch-id walk of the upstream range (kpatch finds what is merged itself);
# --committer-date-is-author-date with kpatch's fixed committer: the same SHAs `git am` makes.
PICK_OPTIONS = ("--interactive", "--empty=drop", "--reapply-cherry-picks", "--committer-date-is-author-date",
                "--no-gpg-sign", "--no-autosquash", "--no-autostash")
# rerere stays out of the picks: kpatch leaves a stopped pick and lets `git am` (which uses it) take that patch.
PICK_CONFIG = ("-c", "rerere.enabled=false", "-c", "rebase.missingCommitsCheck=ignore",
               "-c", "advice.skippedCherryPicks=false")
log = logging.getLogger("kpatch.git")
_PROGRESS = re.compile(rb"Rebasing \((\d+)/\d+\)")
_IDENTITY = "%H%x00%an <%ae>%x00%ad%x00%B%x00"


@dataclass(frozen=True)
class PickRun:
    """What one run of picks did: the new commit per picked commit (None: dropped as empty), up to a stop."""

    picked: tuple[str | None, ...]  # one per commit before `stopped` (all of them when it did not stop)
    stopped: bool  # the rebase stopped at commits[len(picked)]; HEAD is at the last pick, the worktree clean


def identities(tree: Repository, commits: Sequence[str]) -> dict[str, str]:
    """{commit: author, author date and message}: what a pick keeps of a commit."""
    return _identities(tree, ["--no-walk=unsorted", "--end-of-options", *commits]) if commits else {}


def pick(tree: Repository, commits: Sequence[str], on_progress: Callable[[int], None]) -> PickRun | None:
    """Pick `commits` in order onto HEAD in one rebase; at a stop, leave it (HEAD at the last pick, clean).

    `on_progress` gets how many picks are done, as the rebase reports them.

    None, with HEAD where it was, when the picks could not be told apart afterwards (two commits with the same
    author, date and message); a rebase that fails before it begins raises as any git command does.
    """
    if not commits:  # nothing to pick (every patch found upstream before): git's rebase says "nothing to do"
        return PickRun(picked=(), stopped=False)
    keys = identities(tree, commits)
    if len(set(keys.values())) != len(commits):
        log.info("picks: two commits share author, date and message; not picking")
        return None
    start = tree.head()
    with scratch.folder("picks") as folder:
        todo = folder / "todo"
        todo.write_text("".join(f"pick {sha}\n" for sha in commits), encoding="ascii")
        args = [*PICK_CONFIG, "rebase", *PICK_OPTIONS, "--onto", start, start]
        proc = _rebase(tree, args, {"GIT_SEQUENCE_EDITOR": _copy_into(todo)}, on_progress)
    stopped_at: str | None = None
    if proc.status != 0:
        if not in_progress(tree):  # failed before it started (or could not write): not a stop at a commit
            raise failure_for(["git", *args], proc.status, proc.stdout, proc.stderr, tree.path)
        stopped_at = _read(tree.git_dir / "REBASE_HEAD")
        leave(tree)
    made = list(_identities(tree, ["--reverse", "--end-of-options", f"{start}..HEAD"]).items())
    picked: list[str | None] = []
    for sha in commits:
        if sha == stopped_at:
            break
        if made and made[0][1] == keys[sha]:
            picked.append(made.pop(0)[0])
        else:
            picked.append(None)
    if made or (stopped_at is not None and stopped_at not in commits):  # not what was asked: undo it all
        log.warning("picks cannot be matched to their commits; back to %s\n%s", start, proc.stderr)
        tree.reset_hard(start)
        return None
    return PickRun(picked=tuple(picked), stopped=stopped_at is not None)


def in_progress(tree: Repository) -> bool:
    return (tree.git_dir / "rebase-merge").is_dir()


def leave(tree: Repository) -> None:
    """Quit a rebase (even one a kill left half-written) keeping HEAD; the worktree back at HEAD."""
    if tree.run(["rebase", "--quit"], check=False).status != 0 or in_progress(tree):
        shutil.rmtree(tree.git_dir / "rebase-merge", ignore_errors=True)
    for name in ("REBASE_HEAD", "AUTO_MERGE"):
        (tree.git_dir / name).unlink(missing_ok=True)
    tree.reset_hard("HEAD")


def applies_each(tree: Repository, checks: Sequence[tuple[str, Path, Sequence[str]]]) -> list[bool]:
    """Whether `git apply` takes each (commit, patch file, paths) as it is (no 3-way), on a throwaway index.

    One throwaway index holds each check's files, as they are in its commit, under a folder of its own (`<n>/`),
    and each patch is checked there with `git apply --cached --check --directory=<n>`: one process per patch
    instead of three (their entries come from the trees read in one `cat-file --batch`), run side by side.
    """
    if not checks:
        return []
    folders = [f"kpatch-check-{n}" for n in range(len(checks))]
    entries = _entries(tree, [(commit, paths) for commit, _, paths in checks])
    with scratch.folder("check") as folder:
        env = {"GIT_INDEX_FILE": str(folder / "index")}
        listing = b"".join(b"%s %s\t%s/%s\0" % (mode, sha.encode(), top.encode(), path)
                           for top, found in zip(folders, entries, strict=True) for path, (mode, sha) in found.items())
        tree.run(["update-index", "-z", "--index-info"], stdin=listing, env=env)

        def check(top: str, patch: Path) -> bool:
            return tree.run(["-c", "rerere.enabled=false", "apply", "--cached", "--check", f"--directory={top}",
                             "--", str(patch)], env=env, check=False).status == 0

        from concurrent.futures import ThreadPoolExecutor  # only here: most runs check nothing

        with ThreadPoolExecutor(max_workers=min(4, len(checks))) as pool:  # each waits on its own git process
            return list(pool.map(check, folders, [patch for _, patch, _ in checks]))


def _entries(tree: Repository, wanted: Sequence[tuple[str, Sequence[str]]]) -> list[dict[bytes, tuple[bytes, str]]]:
    """{path: (mode, object)} of the given paths in each commit, as `git ls-tree` lists them (files only: a path
    that is a folder there gets no entry), from the folders' trees read in one `git cat-file --batch`."""
    asked = sorted({f"{commit}:{path.rpartition('/')[0]}" for commit, paths in wanted for path in paths
                    if "\n" not in path.rpartition("/")[0]})
    lines = "".join(f"{line}\n" for line in asked).encode("utf-8", "surrogateescape")
    answer = tree.run(["cat-file", "--batch"], stdin=lines).stdout
    trees: dict[str, dict[bytes, tuple[bytes, str]]] = {}
    at = 0
    for line in asked:
        end = answer.index(b"\n", at)
        header = answer[at:end].split(b" ")
        at = end + 1
        if len(header) != 3 or not header[2].isdigit():  # "<name> missing": no such folder in that commit
            trees[line] = {}
            continue
        size = int(header[2])
        trees[line] = _tree_entries(answer[at:at + size], len(header[0]) // 2) if header[1] == b"tree" else {}
        at += size + 1
    found = []
    for commit, paths in wanted:
        # A folder name with a newline cannot be a cat-file line: those files are listed by ls-tree instead.
        entries = _listed(tree, commit, [path for path in paths if "\n" in path.rpartition("/")[0]])
        for path in paths:
            folder, _, name = path.rpartition("/")
            if "\n" in folder:
                continue
            entry = trees[f"{commit}:{folder}"].get(name.encode("utf-8", "surrogateescape"))
            if entry is not None and entry[0] != b"40000":
                entries[path.encode("utf-8", "surrogateescape")] = entry
        found.append(entries)
    return found


def _listed(tree: Repository, commit: str, paths: Sequence[str]) -> dict[bytes, tuple[bytes, str]]:
    """{path: (mode, object)} of the files at `paths` in `commit` (folders left out), from `git ls-tree`."""
    if not paths:
        return {}
    listing = tree.run(["ls-tree", "-z", "--full-tree", "--end-of-options", commit, "--", *literal(paths)]).stdout
    entries: dict[bytes, tuple[bytes, str]] = {}
    for entry in filter(None, listing.split(b"\0")):
        meta, _, path = entry.partition(b"\t")
        mode, kind, sha = meta.split(b" ")
        if kind != b"tree":
            entries[path] = (mode, sha.decode())
    return entries


def _tree_entries(data: bytes, width: int) -> dict[bytes, tuple[bytes, str]]:
    """{name: (mode, object)} of a raw tree object ("<mode> <name>\\0<binary object name>" per entry)."""
    entries: dict[bytes, tuple[bytes, str]] = {}
    at = 0
    while at < len(data):
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        entries[data[space + 1:nul]] = (data[at:space], data[nul + 1:nul + 1 + width].hex())
        at = nul + 1 + width
    return entries


def _copy_into(todo: Path) -> str:
    """A sequence editor that writes `todo` over the file git gives it, with shell builtins only (no `cp`:
    PATH may hold nothing but git and sh)."""
    return (f"kpatch_todo() {{ while IFS= read -r line; do printf '%s\\n' \"$line\"; done < {shlex.quote(str(todo))}"
            " > \"$1\"; }; kpatch_todo")


def _rebase(tree: Repository, args: list[str], env: dict[str, str], on_progress: Callable[[int], None]) -> Completed:
    """Run the rebase, reading its "Rebasing (n/m)" progress off stderr as it comes."""
    started = time.monotonic()
    proc = popen(args, tree.path, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    output: list[bytes] = []
    drain = threading.Thread(target=lambda: output.append(proc.stdout.read()), daemon=True)  # type: ignore[union-attr]
    drain.start()
    errors, pending = bytearray(), b""
    while chunk := os.read(proc.stderr.fileno(), 65536):
        errors += chunk
        *lines, pending = re.split(rb"[\r\n]", pending + chunk)
        for line in lines:
            if match := _PROGRESS.match(line):
                on_progress(int(match.group(1)) - 1)
    status = proc.wait()
    drain.join()
    proc.stdout.close()
    proc.stderr.close()
    stderr = errors.decode("utf-8", "replace")
    log.debug("git %s (cwd=%s) -> %d in %.3fs%s", " ".join(args), tree.path, status, time.monotonic() - started,
              f"\n{stderr.strip()}" if status else "")
    return Completed(status=status, stdout=b"".join(output), stderr=stderr)


def _identities(tree: Repository, args: list[str]) -> dict[str, str]:
    listing = tree.run(["log", f"--format={_IDENTITY}", "--date=raw", *args]).stdout.decode("utf-8", "replace")
    fields = listing.split("\0")
    return {fields[i].lstrip("\n"): "\0".join(fields[i + 1:i + 4]) for i in range(0, len(fields) - 3, 4)}


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip() or None
    except OSError:
        return None
