"""The demo's release-line step: a release branch cut from an older commit of each example upstream, a line for it
in kpatch.toml whose stacks are what that release carries, the line applied, a patch of main backported onto it
with `kpatch backport`, the line applied again (its worktree now carries it), and which patch is on which line
(`kpatch status --lines`). Git only: nothing is built, and main's stacks, worktrees and wheels stay as they were
(docs/workflow.md goes on from them).

The story: the release branch predates the kimi op, which upstream merged on main after the cut (the demo's
upstream move, after which main's rebase dropped the op's patch as upstream), so the line carries the op's patch
(with `Lines: 0.9`: main needs it no more) and the app's patch that requires it; main's test of the op is then
backported onto the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kpatch import config
from kpatch.engine.apply import ApplyResult, apply
from kpatch.examples.lines import BRANCH, CUT, LINE, TAG, cut_release, line_tables
from kpatch.examples.upstreams import APP_CHANGES, KERNEL_CHANGES, ExampleProject, write_stack
from kpatch.gitx import run
from kpatch.lines.backport import BackportResult, backport
from kpatch.lines.matrix import LineMatrix, line_matrix
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace
from kpatch.stack import load_series


@dataclass(frozen=True)
class Cut:
    upstream: str
    commit: str  # where its release branch starts
    tag: str  # the release tag made there


@dataclass(frozen=True)
class ReleaseLine:
    """What the step did: the release branches it cut, the line's stacks, the line applied, the backport, the
    line applied again, the matrix."""

    line: str
    branch: str
    cuts: tuple[Cut, ...]
    bases: tuple[tuple[str, str], ...]  # each upstream's base in the line's tables, as kpatch.toml declares it
    carried: tuple[str, ...]  # the patches the line starts with, UPSTREAM/FILE.patch
    picked: str  # main's patch it backports, UPSTREAM/FILE.patch
    applied: ApplyResult  # the line on its release branches, before the backport
    backport: BackportResult
    reapplied: ApplyResult  # after it, as the backport says to
    matrix: LineMatrix


def release_line(example: ExampleProject, ui: UI, cache_dir: Path) -> tuple[ReleaseLine, bool, str]:
    """Cut, declare, apply, backport, apply again, show the matrix; ok when every apply and the backport went in."""
    cuts = []
    for name, repo in (("kernels", example.kernels), ("app", example.app)):
        cuts.append(Cut(name, cut_release(repo), TAG))
        run(["tag", TAG, BRANCH], repo)
    patches = example.root / "patches"
    (files, message), = KERNEL_CHANGES[:1]  # the op, for this line only: main has it upstream
    op = [(files, f"{message}Lines: {LINE}\n")]
    carried = tuple(f"kernels/{n}" for n in write_stack(example.kernels, example.kernels_base,
                                                        patches / LINE / "kernels", op)) + \
        tuple(f"app/{n}" for n in write_stack(example.app, example.app_base, patches / LINE / "app", APP_CHANGES[:1]))
    toml = example.root / config.CONFIG_NAME
    with toml.open("a", encoding="utf-8") as handle:  # kpatch.toml's documented form (docs/config.md)
        handle.write(line_tables())
    picked = f"kernels/{load_series('kernels', patches / 'kernels').names()[0]}"  # main's test of the op
    on_line = config.load(toml).on_line(LINE)
    ws = Workspace.create(on_line, cache_dir, None)
    applied = apply(ws, ui, {}, discard=False)
    done = backport(ws, ui, config.load(toml), (picked,))
    reapplied = apply(Workspace.create(config.load(toml).on_line(LINE), cache_dir, None), ui, {}, discard=False)
    matrix = line_matrix(config.load(toml))
    result = ReleaseLine(line=LINE, branch=BRANCH, cuts=tuple(cuts), bases=tuple((u.name, u.base)
                                                                              for u in on_line.upstreams),
                         carried=carried, picked=picked, applied=applied,
                         backport=done, reapplied=reapplied, matrix=matrix)
    ok = applied.conflict is None and done.conflict is None and done.committed and reapplied.conflict is None
    outcome = done.patches[0].outcome.value if done.patches else "not backported"
    return result, ok, (f"{BRANCH} cut at commit {CUT} of each upstream; line {LINE} carries the release's "
                        f"{len(carried)} patches and applies in {ws.workdir.name}; main's {picked} {outcome} onto it; "
                        f"{matrix.missing} patch(es) missing from a line")
