"""The demo's release-line step: a release branch cut from an older commit of each example upstream, a line for it
in kpatch.toml, that line applied, a fix made on main (committed in its worktree, exported) backported onto it
with `kpatch backport`, the line applied again (its worktree now carries the fix), and which patch is on which line
(`kpatch status --lines`). Git only: nothing is built."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kpatch import config
from kpatch.engine.apply import ApplyResult, apply
from kpatch.engine.export import Change, export
from kpatch.errors import SeriesError
from kpatch.examples.lines import BRANCH, CUT, FIXES, LINE, cut_release, line_tables
from kpatch.examples.upstreams import PATCH_AUTHOR, ExampleProject, commit
from kpatch.gitx import run
from kpatch.lines.backport import BackportResult, backport
from kpatch.lines.matrix import LineMatrix, line_matrix
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace

TAG = "v0.9"


@dataclass(frozen=True)
class Cut:
    upstream: str
    commit: str  # where its release branch starts (and its tag v0.9)


@dataclass(frozen=True)
class ReleaseLine:
    """What the step did: the release branches it cut, main's new fix, the line applied, the backport, the
    matrix."""

    line: str
    branch: str
    cuts: tuple[Cut, ...]
    fix: str  # main's new patch, UPSTREAM/FILE.patch
    applied: ApplyResult  # the line on its release branches, before the backport
    backport: BackportResult
    reapplied: ApplyResult  # after it, as the backport says to
    matrix: LineMatrix


def release_line(example: ExampleProject, ui: UI, cache_dir: Path) -> tuple[ReleaseLine, bool, str]:
    """Cut, declare, apply, fix on main, backport, show the matrix; ok when the apply and the backport went in."""
    cuts = []
    for name, repo in (("kernels", example.kernels), ("app", example.app)):
        cuts.append(Cut(name, cut_release(repo)))
        run(["tag", TAG, BRANCH], repo)
    toml = example.root / config.CONFIG_NAME
    with toml.open("a", encoding="utf-8") as handle:  # kpatch.toml's documented form (docs/config.md)
        handle.write(line_tables())
    stack = config.load(toml)
    fix = _fix_on_main(Workspace.create(stack, cache_dir, None), ui)
    ws = Workspace.create(stack.on_line(LINE), cache_dir, None)
    applied = apply(ws, ui, {}, discard=False)
    done = backport(ws, ui, config.load(toml), (fix,))
    reapplied = apply(Workspace.create(config.load(toml).on_line(LINE), cache_dir, None), ui, {}, discard=False)
    matrix = line_matrix(config.load(toml))
    result = ReleaseLine(line=LINE, branch=BRANCH, cuts=tuple(cuts), fix=fix, applied=applied, backport=done,
                         reapplied=reapplied, matrix=matrix)
    ok = applied.conflict is None and done.conflict is None and done.committed and reapplied.conflict is None
    outcome = done.patches[0].outcome.value if done.patches else "nothing"
    return result, ok, (f"{BRANCH} cut at commit {CUT} of each upstream; line {LINE} applied in {ws.workdir.name}; "
                        f"main's new fix {fix} {outcome}; {matrix.missing} patch(es) missing from a line")


def _fix_on_main(ws: Workspace, ui: UI) -> str:
    """A fix a person makes on main: a commit in its kernels worktree, written to patches/ by `kpatch export`."""
    files, message = FIXES[0]
    commit(ws.workdir / "kernels", files, message, 3000, PATCH_AUTHOR)
    exported = export(ws, ui, ["kernels"], check=False)
    written = [c.path for c in exported.files if c.change is Change.ADDED and c.path.suffix == ".patch"]
    if len(written) != 1:
        raise SeriesError(f"kpatch export wrote {len(written)} new patch file(s) for the demo's fix, not one")
    return f"kernels/{written[0].name}"
