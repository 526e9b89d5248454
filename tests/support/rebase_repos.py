"""A kernels and an app upstream whose histories after the pinned base exercise every rebase class."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from click.testing import Result

from kpatch.examples.upstreams import commit, init_repo, write_stack
from kpatch.gitx import Repository
from tests.support.cli import run_kpatch


def numbered(prefix: str, count: int = 30) -> str:
    return "".join(f"{prefix} line {i}\n" for i in range(1, count + 1))


def replace_line(text: str, number: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[number - 1] = new + "\n"
    return "".join(lines)


FILES = {name: numbered(name) for name in ("a", "b", "c", "d")}
P_VERBATIM = replace_line(FILES["a"], 5, "a line 5 fixed")
P_CONTEXT = replace_line(FILES["b"], 10, "b line 10 fixed")
P_CONFLICT = replace_line(FILES["c"], 15, "c line 15 fixed by us")
P_CLEAN = replace_line(FILES["d"], 20, "d line 20 fixed")
KERNEL_STACK = [
    ({"a.txt": P_VERBATIM}, "Fix a\n\nUpstream-Status: submitted\nUpstream-PR: up/kernels#11\n"),
    ({"b.txt": P_CONTEXT}, "Fix b\n\nUpstream-Status: submitted\n"),
    ({"c.txt": P_CONFLICT}, "Fix c\n\nUpstream-Status: pending\n"),
    ({"d.txt": P_CLEAN}, "Fix d\n\nUpstream-Status: pending\n"),
]
APP_STACK = [
    ({"app.txt": replace_line(numbered("app"), 3, "app uses fixed a")},
     "Use the a fix\n\nUpstream-Status: pending\nRequires: kernels/0001-Fix-a.patch\n"),
    ({"app2.txt": replace_line(numbered("app2"), 8, "app2 fixed")}, "Fix app2\n\nUpstream-Status: pending\n"),
]
CULPRIT_INDEX = 50  # the upstream commit (1-based, after the base) that rewrites the line "Fix c" changes
UPSTREAM_COMMITS = 70


@dataclass
class RebaseProject:
    root: Path
    kernels: Path
    app: Path
    culprit: str
    kernels_new: str

    def run(self, *args: str) -> Result:
        return run_kpatch(self.root, *args)

    def tracked(self) -> dict[str, bytes]:
        """kpatch.toml and every file under patches/: what a failed rebase must leave byte-identical."""
        files = {"kpatch.toml": (self.root / "kpatch.toml").read_bytes()}
        for path in sorted((self.root / "patches").rglob("*")):
            if path.is_file():
                files[str(path.relative_to(self.root))] = path.read_bytes()
        return files


def make_rebase_project(tmp: Path) -> RebaseProject:
    kernels, app = tmp / "up" / "kernels", tmp / "up" / "app"
    init_repo(kernels)
    base = commit(kernels, {f"{n}.txt": t for n, t in FILES.items()}, "import", 0)
    init_repo(app)
    app_base = commit(app, {"app.txt": numbered("app"), "app2.txt": numbered("app2")}, "import", 0)
    root = tmp / "project"
    write_stack(kernels, base, root / "patches" / "kernels", KERNEL_STACK)
    write_stack(app, app_base, root / "patches" / "app", APP_STACK)
    culprit = ""
    b_text = FILES["b"]
    for i in range(1, UPSTREAM_COMMITS + 1):
        if i == 20:  # (1) our "Fix a" merged verbatim, under another message
            commit(kernels, {"a.txt": P_VERBATIM}, "Merge the a fix (#11)", 100 + i)
        elif i == 35:  # (2) our "Fix b" merged together with a change next to it: another patch-id
            b_text = replace_line(P_CONTEXT, 12, "b line 12 reworded upstream")
            commit(kernels, {"b.txt": b_text}, "Rework b", 100 + i)
        elif i == CULPRIT_INDEX:  # (3) upstream rewrites the line "Fix c" changes
            culprit = commit(kernels, {"c.txt": replace_line(FILES["c"], 15, "c line 15 rewritten upstream")},
                             "Rewrite c", 100 + i)
        else:  # (4) unrelated churn
            commit(kernels, {f"churn/{i % 7}.txt": f"churn {i}\n"}, f"churn {i}", 100 + i)
        if i % 10 == 0:
            commit(app, {"docs.txt": f"docs {i}\n"}, f"app docs {i}", 100 + i)
    (root / "kpatch.toml").write_text(f"""version = 1

[[upstream]]
name = "kernels"
url = "{kernels}"
branch = "main"
base = "{base}"
patches = "patches/kernels"
requires = []

[[upstream]]
name = "app"
url = "{app}"
branch = "main"
base = "{app_base}"
patches = "patches/app"
requires = ["kernels"]
""")
    return RebaseProject(root=root, kernels=kernels, app=app, culprit=culprit, kernels_new=Repository(kernels).head())


def copy_rebase_project(template: RebaseProject, tmp: Path) -> RebaseProject:
    """A private copy of a rebase project built once per test run (its upstreams too: tests add commits)."""
    old = template.root.parent
    for name in ("up", "project"):
        shutil.copytree(old / name, tmp / name, symlinks=True)
    toml = tmp / "project" / "kpatch.toml"
    toml.write_text(toml.read_text().replace(str(old), str(tmp)))
    return replace(template, root=tmp / "project", kernels=tmp / "up" / "kernels", app=tmp / "up" / "app")
