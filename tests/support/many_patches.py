"""A project with long stacks (hundreds of patches) on real upstreams, built fast with `git fast-import`.

Used by the kill tests and `scripts/bench_kills.py`. Two upstreams, kernels first (the app requires it), like
the real project. Patches edit shared files (later patches depend on earlier ones), add new files (an
interrupted `git am` may leave them untracked) and touch a CRLF file (`--keep-cr`).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kpatch.examples.upstreams import write_patches
from kpatch.gitx import Repository

EPOCH = 1_700_000_000
FILES_PER_UPSTREAM = 40
LINES_PER_FILE = 60
_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}


@dataclass(frozen=True)
class LongProject:
    root: Path  # kpatch.toml and patches/
    upstreams: dict[str, Path]
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **_ENV}, input=stdin, check=True,
                          capture_output=True).stdout.decode()


def _file(name: str, index: int, crlf: bool) -> list[str]:
    end = "\r\n" if crlf else "\n"
    return [f"{name} {index} line {n}{end}" for n in range(LINES_PER_FILE)]


class _Importer:
    """Commits written as a `git fast-import` stream: hundreds of commits in one process."""

    def __init__(self) -> None:
        self.stream: list[bytes] = []
        self.mark = 0

    def commit(self, ref: str, message: str, when: int, author: str, changes: dict[str, str],
               parent: str | None = None) -> int:
        self.mark += 1
        msg = message.encode()
        head = f"commit {ref}\nmark :{self.mark}\nauthor {author} {EPOCH + when} +0000\n" \
               f"committer {author} {EPOCH + when} +0000\ndata {len(msg)}\n"
        self.stream.append(head.encode() + msg + b"\n")
        if parent:
            self.stream.append(f"from {parent}\n".encode())
        for path, text in changes.items():
            data = text.encode()
            self.stream.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
        self.stream.append(b"\n")
        return self.mark

    def run(self, repo: Path) -> None:
        _git(repo, "fast-import", "--quiet", stdin=b"".join(self.stream))


@dataclass(frozen=True)
class Upstreamed:
    """What the upstream does after the base, for a rebase: patches (by index) it merges as they are, lines
    next to a patch's line it changes (a 3-way apply), and the line one patch changes it rewrites (a conflict)."""

    merged: tuple[int, ...] = ()
    three_way: tuple[int, ...] = ()
    conflict: int | None = None


def make_upstream(path: Path, name: str, patches: int, history: int = 20,
                  later: Upstreamed | None = None) -> tuple[str, str]:
    """An upstream `path` (branch main) and, on branch `stack`, `patches` commits on its base.

    Returns (base, stack tip). Patch i edits one line of file i % FILES (so files see many patches in a row),
    every 25th adds a new file, every 40th edits the CRLF file. `later` adds upstream commits after the base.
    """
    path.mkdir(parents=True)
    _git(path, "init", "--quiet", "--initial-branch=main")
    files = {f"src/{name}_{i:02d}.txt": _file(name, i, crlf=(i == 0)) for i in range(FILES_PER_UPSTREAM)}
    upstream_files = {p: list(t) for p, t in files.items()}
    upstream = "Up Stream <up@example.invalid>"
    dev = "kpatch developers <dev@kpatch.invalid>"
    importer = _Importer()
    importer.commit("refs/heads/main", "initial import", 0, upstream, {p: "".join(t) for p, t in files.items()})
    for i in range(1, history + 1):
        importer.commit("refs/heads/main", f"{name} churn {i}", i, upstream,
                        {"docs/history.txt": "".join(f"churn {j}\n" for j in range(i))})
    base_mark = importer.mark
    paths = sorted(files)
    edits: list[tuple[str, int, str]] = []  # per patch: file, row, new line
    for i in range(patches):
        changes: dict[str, str] = {}
        target = paths[0] if i % 40 == 39 else paths[1 + i % (len(paths) - 1)]
        lines = files[target]
        row = (i * 7) % LINES_PER_FILE
        end = "\r\n" if lines[row].endswith("\r\n") else "\n"
        lines[row] = f"{name} fix {i} at line {row}{end}"
        edits.append((target, row, lines[row]))
        changes[target] = "".join(lines)
        if i % 25 == 24:
            changes[f"src/new/{name}_{i:03d}.txt"] = f"added by fix {i}\n"
        importer.commit("refs/heads/stack", f"{name} fix {i}\n\nUpstream-Status: pending\n", 1000 + i, dev,
                        changes, parent=f":{base_mark}" if i == 0 else None)
    if later is not None:
        _upstream_later(importer, name, later, edits, upstream_files, upstream)
    importer.run(path)
    base = _git(path, "rev-parse", f"main~{_later_count(later)}").strip()
    tip = _git(path, "rev-parse", "stack").strip()
    return base, tip


def _later_count(later: Upstreamed | None) -> int:
    if later is None:
        return 0
    return 2 * (len(later.merged) + len(later.three_way) + (later.conflict is not None))


def _upstream_later(importer: _Importer, name: str, later: Upstreamed, edits: list[tuple[str, int, str]],
                    files: dict[str, list[str]], author: str) -> None:
    """Upstream commits after the base: each event, then an unrelated churn commit."""
    events = [(i, "merged") for i in later.merged] + [(i, "three-way") for i in later.three_way]
    events += [(later.conflict, "conflict")] if later.conflict is not None else []
    for number, (index, kind) in enumerate(sorted(events)):
        path, row, line = edits[index]
        end = "\r\n" if line.endswith("\r\n") else "\n"
        if kind == "merged":  # the very change of the patch, under another message
            files[path][row] = line
            message = f"Merge {name} fix {index} (#{100 + index})"
        elif kind == "three-way":  # the last context line of the patch's hunk
            files[path][row + 3] = f"{name} upstream rewords line {row + 3}{end}"
            message = f"Reword {name} line {row + 3}"
        else:  # the patch's own line
            files[path][row] = f"{name} upstream rewrites line {row}{end}"
            message = f"Rewrite {name} line {row}"
        importer.commit("refs/heads/main", message, 5000 + 2 * number, author, {path: "".join(files[path])})
        importer.commit("refs/heads/main", f"{name} later churn {number}", 5001 + 2 * number, author,
                        {f"docs/later_{number}.txt": f"later {number}\n"})


def make_long_project(folder: Path, counts: dict[str, int] | None = None,
                      later: dict[str, Upstreamed] | None = None) -> LongProject:
    """`folder/up/<name>` upstreams and `folder/project` with their stacks (default: 150 + 150 patches)."""
    counts = counts or {"kernels": 150, "app": 150}
    later = later or {}
    root = folder / "project"
    upstreams: dict[str, Path] = {}
    toml = ["version = 1\n"]
    previous: str | None = None
    for name, count in counts.items():
        upstream = folder / "up" / name
        base, tip = make_upstream(upstream, name, count, later=later.get(name))
        patches = root / "patches" / name
        scratch = folder / f".scratch-{name}"
        _git(upstream, "worktree", "add", "--quiet", "--detach", str(scratch), tip)
        names = write_patches(scratch, base, patches)
        _git(upstream, "worktree", "remove", "--force", str(scratch))
        _git(upstream, "branch", "--quiet", "-D", "stack")  # the patches are not upstream's
        (patches / "series").write_text("".join(f"{n}\n" for n in names))
        requires = f'["{previous}"]' if previous else "[]"
        toml.append(f'\n[[upstream]]\nname = "{name}"\nurl = "{upstream}"\nbranch = "main"\nbase = "{base}"\n'
                    f'patches = "patches/{name}"\nrequires = {requires}\n')
        upstreams[name] = upstream
        previous = name
    (root / "kpatch.toml").write_text("".join(toml))
    return LongProject(root=root, upstreams=upstreams, counts=dict(counts))


def heads(workdir: Path, names: list[str]) -> dict[str, str | None]:
    """Each worktree's HEAD (None where there is no worktree)."""
    return {n: Repository(workdir / n).head() if (workdir / n).exists() else None for n in names}
