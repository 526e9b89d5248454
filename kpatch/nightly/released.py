"""`kpatch nightly --released-pairs`: whether the newest released pair of the stack's two upstreams carries the fix
yet, as lines of the night's report (kpatch.verify.pairs does the checking; this module says what to check)."""

from __future__ import annotations

import posixpath
from pathlib import Path

from kpatch.errors import KpatchError
from kpatch.project.workspace import Workspace
from kpatch.stack.mbox import read_diff
from kpatch.verify.gate import contract_pairs
from kpatch.verify.pairs import Released, night_notes
from kpatch.verify.release import index_url


def what(ws: Workspace) -> Released | str:
    """The pair to check: the application upstream and the kernels it requires (their names as distributions),
    and the package its patches change (the folder the Python files they touch, outside tests/, share). A string
    says why there is nothing to check."""
    pairs = contract_pairs(ws)
    if not pairs:
        return "the stack has no kernels/application pair (no upstream requires another)"
    kernels, app = pairs[0]
    upstream = next(u for u in ws.stack.upstreams if u.name == app)
    files: set[str] = set()
    for patch in sorted(upstream.patches.glob("*.patch")):
        try:
            files |= {d.new_path for d in read_diff(patch) if d.new_path and d.new_path.endswith(".py")
                      and not d.new_path.startswith(("tests/", "test/"))}
        except KpatchError:
            continue
    if not files:
        return f"{app}'s patches change no Python file outside tests/: there is no model package to look for"
    folder = posixpath.commonpath([posixpath.dirname(f) for f in files])
    if not folder:
        return f"{app}'s patches change Python files with no common folder: there is no model package to look for"
    return Released(app=app, kernels=kernels, model=folder + "/", model_name=folder)


def notes(ws: Workspace) -> tuple[str, ...]:
    """The report's lines (never raises: a pair that cannot be checked is one line saying why)."""
    found = what(ws)
    if isinstance(found, str):
        return (f"released pairs: not checked ({found})",)
    try:
        index = index_url()
    except KpatchError as err:
        return (f"released pairs: not checked (no package index: {err})",)
    return night_notes(found, index, Path(ws.cache_dir) / "releases")
