"""Test selection (`[[upstream]] test-selection = true`): in a scrolling step, the tests whose files or imports the
upstream diff touches run first, then the rest, so a red step shows itself early in the log.

The diff is the upstream's own, from the pinned base to the commit the step tries (never the stack's patches:
they touch the same files every night). The test files are the suite's (`test_*.py` and `*_test.py` under its
`paths`) in the patched tree the step built, so a test the stack adds runs too. A test goes first when its own
file changed, or when it imports (directly: `import a.b`, `from a.b import c`, `from . import c`) a module whose
file changed. The order reaches the suite's command as $KPATCH_TESTS: the first ones, then the rest, each group in
path order.
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Sequence

from kpatch.dashboard.night import Selection
from kpatch.gitx.repo import Repository


def test_files(repo: Repository, tree: str, paths: Sequence[str]) -> list[str]:
    """The suite's test files in `tree`, in path order."""
    listed = repo.run(["ls-tree", "-r", "-z", "--name-only", tree, "--", *paths]).stdout  # -z: no quoted names
    return sorted(p for p in listed.decode("utf-8", "surrogateescape").split("\0") if p and _is_test(p))


def select(repo: Repository, upstream: str, base: str, commit: str, tree: str,
           paths: Sequence[str]) -> tuple[Selection, tuple[str, ...]]:
    """The selection for one step, and $KPATCH_TESTS's files in order (the first ones, then the rest)."""
    tests = test_files(repo, tree, paths)
    changed = set(repo.run(["diff", "-z", "--name-only", "--no-renames", base, commit, "--"]).stdout.decode(
        "utf-8", "surrogateescape").split("\0")) - {""}
    modules = {_module(path): path for path in changed if path.endswith(".py")}
    sources = _read(repo, tree, tests)
    first: list[str] = []
    why: list[str] = []
    for test in tests:
        if test in changed:
            first.append(test)
            why.append("changed")
            continue
        hit = next((m for m in _imports(test, sources.get(test, b"")) if m in modules), None)
        if hit is not None:
            first.append(test)
            why.append(f"imports {hit} ({modules[hit]} changed)")
    rest = [t for t in tests if t not in first]
    selection = Selection(upstream=upstream, base=base, commit=commit, first=tuple(first), why=tuple(why),
                          rest=len(rest))
    return selection, (*first, *rest)


def _is_test(path: str) -> bool:
    name = posixpath.basename(path)
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _module(path: str) -> str:
    """`app/models/x.py` -> app.models.x; `a/b/__init__.py` -> a.b; a leading `src/` is not part of the name."""
    stem = path.removesuffix(".py").removesuffix("/__init__").removeprefix("src/")
    return stem.replace("/", ".")


def _imports(path: str, source: bytes) -> list[str]:
    """The modules `path` imports directly (absolute names; relative ones resolved from its folder), and for
    `from M import n` also M.n (n may be a module)."""
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return []  # a test file that does not parse is still run, in its turn
    package = posixpath.dirname(path).replace("/", ".")
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
                module = ".".join([*parts, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found += [module, *(f"{module}.{alias.name}" for alias in node.names)]
    return [m for m in found if m]


def _read(repo: Repository, tree: str, files: Sequence[str]) -> dict[str, bytes]:
    """Each file's bytes at `tree`, in one `git cat-file --batch`."""
    if not files:
        return {}
    data = repo.run(["cat-file", "--batch"], stdin="".join(f"{tree}:{f}\n" for f in files).encode()).stdout
    read: dict[str, bytes] = {}
    at = 0
    for name in files:
        end = data.index(b"\n", at)
        header = data[at:end].split()
        at = end + 1
        if len(header) < 3 or header[1] == b"missing":
            continue
        size = int(header[2])
        read[name] = data[at:at + size]
        at += size + 1
    return read
