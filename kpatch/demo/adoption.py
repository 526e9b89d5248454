"""`kpatch demo --adopt`: a team that already carries a fork starts with kpatch in three commands.

The example upstreams, a kernels fork (a branch `xpu` of the kernels upstream: the example stack as commits on its
base) and the app's patches as a quilt folder of plain `git diff` files; then, in an empty project, `kpatch init`,
`kpatch import kernels --from FORK@xpu`, `kpatch import app --series DIR` and `kpatch apply`. Each step is the real
command's code on real git repositories; nothing is built, so it takes a few seconds and needs no Docker.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from kpatch import config, forge
from kpatch.adopt.branch import ImportResult, import_branch
from kpatch.adopt.init import InitResult, UpstreamSpec, init
from kpatch.adopt.quilt import import_series
from kpatch.demo.pipeline import OnStep, Outcome, Step, Steps, StepsOutcome, _apply, in_folder
from kpatch.engine.apply import ApplyResult
from kpatch.examples.upstreams import PATCH_AUTHOR, ExampleProject, make_example_project
from kpatch.gitx import out, run
from kpatch.gitx.am import AM_OPTIONS
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace

FORK_BRANCH = "xpu"


@dataclass(frozen=True)
class Carried:
    """What the team carries before kpatch: a fork branch of the kernels upstream and a folder of the app's diffs."""

    fork: Path  # a clone of the kernels upstream whose branch FORK_BRANCH holds the stack as commits
    quilt: Path  # plain diffs and a quilt `series`
    originals: dict[str, dict[str, bytes]]  # upstream -> patch file -> bytes: the stacks the fork was made from


@dataclass(frozen=True)
class AdoptResult(StepsOutcome):
    folder: Path
    kept: bool
    steps: tuple[Step, ...]
    init: InitResult | None
    imports: tuple[ImportResult, ...]
    applied: ApplyResult | None
    identical: tuple[str, ...]  # the upstreams whose imported patch files are byte-identical to the fork's own
    project: Path  # the adopted project
    seconds: float


def run_adopt(folder: Path, ui: UI, *, kept: bool, on_step: OnStep) -> AdoptResult:
    """Build the example and the team's fork and quilt folder in `folder` (empty), then adopt them."""
    started = time.monotonic()
    run_ = _Adopt(folder, ui, on_step)
    for name, body in (("example", run_.example), ("init", run_.init), ("import kernels", run_.import_fork),
                       ("import app", run_.import_quilt), ("apply", run_.apply)):
        if not run_.step(name, body):
            break
    imports = tuple(r for r in (run_.results.get("import kernels"), run_.results.get("import app")) if r)
    return AdoptResult(folder=folder, kept=kept, steps=tuple(run_.steps), init=run_.results.get("init"),
                       imports=imports, applied=run_.results.get("apply"), identical=tuple(run_.identical),
                       project=run_.project, seconds=round(time.monotonic() - started, 2))


class _Adopt(Steps):
    def __init__(self, folder: Path, ui: UI, on_step: OnStep) -> None:
        super().__init__(folder, ui, on_step)
        self.project = folder / "project"
        self.example_project: ExampleProject | None = None
        self.carried: Carried | None = None
        self.identical: list[str] = []

    @property
    def ws(self) -> Workspace:
        return Workspace.create(config.load(self.project / config.CONFIG_NAME), self.folder / "cache", None)

    def example(self) -> Outcome:
        self.example_project = make_example_project(self.folder)
        self.carried = carry(self.example_project, self.folder)
        shutil.rmtree(self.project)  # the stacks live on in the fork and the quilt folder only
        self.project.mkdir()
        names = len(self.carried.originals["app"])
        return self.carried, True, (f"two upstreams with history; a kernels fork (branch {FORK_BRANCH}: "
                                    f"{len(self.carried.originals['kernels'])} commits on the base) and the app's "
                                    f"{names} patches as a quilt folder of plain diffs; an empty project")

    def init(self) -> Outcome:
        example = self._example()
        specs = [UpstreamSpec(name="kernels", url=str(example.kernels), base="v1.0"),
                 UpstreamSpec(name="app", url=str(example.app), base="v1.0")]
        result = init(self.project, specs, {"kernels": (), "app": ("kernels",)}, self.ui, ci=False,
                      cache_dir=self.folder / "cache")
        return result, True, (f"kpatch init --upstream kernels=...@v1.0 --upstream app=...@v1.0 --requires "
                              f"app:kernels: {len(result.written)} files written")

    def import_fork(self) -> Outcome:
        carried = self._carried()
        result = import_branch(self.ws, self.ui, "kernels", str(carried.fork), FORK_BRANCH, base_ref=None)
        same = self._same("kernels", carried)
        return result, same, (f"kpatch import kernels --from FORK@{FORK_BRANCH}: {len(result.files)} commits as "
                              f"patches, {'byte-identical to' if same else 'NOT the same as'} the stack the fork "
                              "was made from")

    def import_quilt(self) -> Outcome:
        carried = self._carried()
        author = f"{PATCH_AUTHOR[0]} <{PATCH_AUTHOR[1]}>"
        result = import_series(self.ws, self.ui, "app", carried.quilt, base_ref=None, author=author)
        return result, True, (f"kpatch import app --series {carried.quilt.name}/ --author ...: {len(result.files)} "
                              "plain diffs as patches, each applied onto the base")

    def apply(self) -> Outcome:
        return _apply(self.ws, self.ui)

    def _same(self, name: str, carried: Carried) -> bool:
        folder = self.project / "patches" / name
        mine = {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "series"}
        same = mine == carried.originals[name]
        if same:
            self.identical.append(name)
        return same

    def _example(self) -> ExampleProject:
        assert self.example_project is not None, "the example step runs first"
        return self.example_project

    def _carried(self) -> Carried:
        assert self.carried is not None, "the example step runs first"
        return self.carried


def carry(example: ExampleProject, folder: Path) -> Carried:
    """The team's fork and patch folder, made from the example project's stacks: the kernels patches `git am`'d
    on branch FORK_BRANCH of a clone, the app's patches applied on a scratch clone and written back with `git
    diff` one commit at a time (plain diffs, no headers) with a quilt `series`."""
    originals = {name: _files(example.root / "patches" / name) for name in ("kernels", "app")}
    fork = folder / "forks" / "kernels"
    _am_branch(example.kernels, example.kernels_base, example.root / "patches" / "kernels", fork)
    scratch = folder / "forks" / ".app"
    _am_branch(example.app, example.app_base, example.root / "patches" / "app", scratch)
    quilt = folder / "quilt-app"
    quilt.mkdir(parents=True)
    commits = out(["rev-list", "--reverse", f"{example.app_base}..HEAD"], scratch).split()
    names = _series(example.root / "patches" / "app")
    for name, sha in zip(names, commits, strict=True):
        diff = run(["diff", f"{sha}~1", sha], scratch).stdout  # bytes: a CRLF file keeps its CRs
        (quilt / name.replace(".patch", ".diff")).write_bytes(diff)
    (quilt / "series").write_text("".join(f"{n.replace('.patch', '.diff')} -p1\n" for n in names), encoding="utf-8")
    shutil.rmtree(scratch)
    return Carried(fork=fork, quilt=quilt, originals=originals)


def _am_branch(upstream: Path, base: str, patches: Path, into: Path) -> None:
    run(["clone", "--quiet", "--", str(upstream), str(into)])
    run(["config", "core.autocrlf", "false"], into)
    run(["checkout", "--quiet", "-b", FORK_BRANCH, base], into)
    files = [str(patches / name) for name in _series(patches)]
    run(["am", *AM_OPTIONS, "--", *files], into)


def _series(folder: Path) -> list[str]:
    lines = (folder / "series").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "series"}



def demo_adopt(folder: Path | None, ui: UI, *, keep: bool, on_step: OnStep) -> AdoptResult:
    """The adoption demo in `folder` (empty or new; kept) or a temp folder removed unless `keep`."""
    def body(where: Path, kept: bool) -> AdoptResult:
        with forge.offline("the demo runs offline"):
            return run_adopt(where, ui, kept=kept, on_step=on_step)

    return in_folder(folder, ui, keep=keep, body=body)
