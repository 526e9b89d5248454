"""Data flows one way, down: kpatch's packages import only packages on their own floor or below, and no two import
each other (directly or around a circle). Every import counts: at module level, inside a function, and under
TYPE_CHECKING. The floors, top to bottom: the CLI, the commands (one module each, imported by the CLI alone), the
work packages (the demo's and the night's, which call the rest), their shared parts, the seams to outside systems,
and the leaves every floor uses."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

KPATCH = Path(__file__).resolve().parents[2] / "kpatch"

FLOORS: tuple[frozenset[str], ...] = tuple(frozenset(floor.split()) for floor in (
    "__main__",
    "cli",
    "commands",
    "examples",
    "nightly adopt lines",
    "testing verify doctor",
    "wheels",
    "engine",
    "stack config project",
    "gitx container forge procs",
    "errors",
    "output files killseam kpatch",  # kpatch: kpatch/__init__.py (__version__)
))

Graph = dict[str, set[str]]


def package_of(path: Path, root: Path) -> str:
    """kpatch/engine/apply.py -> engine; kpatch/cli.py -> cli; kpatch/__init__.py -> kpatch."""
    parts = path.relative_to(root).with_suffix("").parts
    return "kpatch" if parts == ("__init__",) else parts[0]


def imported(node: ast.AST, root: Path) -> list[str]:
    """The kpatch packages one import statement names (`from kpatch import config` names config)."""
    if isinstance(node, ast.Import):
        modules = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        if node.module != "kpatch":
            modules = [node.module]
        else:  # a subpackage or module of kpatch, or a name from kpatch/__init__.py
            modules = [f"kpatch.{a.name}" if (root / a.name).is_dir() or (root / f"{a.name}.py").is_file()
                       else "kpatch" for a in node.names]
    else:
        return []
    return [m.split(".")[1] if "." in m else "kpatch" for m in modules if m.split(".")[0] == "kpatch"]


def import_graph(root: Path) -> Graph:
    """Package -> the other kpatch packages it imports anywhere in its modules."""
    graph: Graph = {}
    for path in sorted(root.rglob("*.py")):
        source = package_of(path, root)
        edges = graph.setdefault(source, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            edges.update(p for p in imported(node, root) if p != source)
    return graph


def floor_of(package: str) -> int:
    return next(i for i, floor in enumerate(FLOORS) if package in floor)


def problems(graph: Graph) -> list[str]:
    """Each circle between packages and each import from a lower floor to a higher one, one line each."""
    found = [f"{package} is on no floor: add it to FLOORS" for package in sorted(graph)
             if not any(package in floor for floor in FLOORS)]
    if found:
        return found
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        found.append(f"circle between packages: {' -> '.join(err.args[1])}")
    for source, targets in sorted(graph.items()):
        found += [f"{source} (floor {floor_of(source)}) imports {target} (floor {floor_of(target)}), a higher floor"
                  for target in sorted(targets) if floor_of(target) < floor_of(source)]
    return found


def test_kpatch_imports_flow_down_without_circles() -> None:
    graph = import_graph(KPATCH)
    assert {"cli", "commands", "engine", "output"} <= graph.keys()  # the walk found the package
    assert problems(graph) == []


def test_nothing_but_the_cli_imports_a_command() -> None:
    assert [source for source, targets in import_graph(KPATCH).items()
            if "commands" in targets and source != "cli"] == []


def test_an_upward_import_inside_a_function_is_found(tmp_path: Path) -> None:
    """A test of the test: engine importing a command inside a function fails it, naming both."""
    root = _copy(tmp_path)
    apply = root / "engine" / "apply.py"
    apply.write_text(apply.read_text() + "\n\ndef _planted() -> None:\n    from kpatch.commands import status\n")
    assert "engine (floor 7) imports commands (floor 2), a higher floor" in problems(import_graph(root))


def test_a_circle_on_one_floor_is_found() -> None:
    """Two packages of one floor that import each other: a circle, though neither is higher."""
    graph = import_graph(KPATCH)
    graph["killseam"].add("files")
    graph["files"].add("killseam")
    found = problems(graph)
    assert len(found) == 1 and found[0].startswith("circle between packages: ")
    assert "files" in found[0] and "killseam" in found[0]


@pytest.mark.parametrize(("code", "packages"), [
    ("from kpatch.nightly.run import Night", ["nightly"]),
    ("import kpatch.examples.demo, os", ["examples"]),
    ("from kpatch import cli, __version__", ["cli", "kpatch"]),
    ("if TYPE_CHECKING:\n    from kpatch.commands import status", ["commands"]),
    ("class A:\n    def f(self) -> None:\n        import kpatch.wheels.lock as lock", ["wheels"]),
    ("from . import sibling\nimport kpatchless", []),
])
def test_each_form_of_import_names_its_package(code: str, packages: list[str]) -> None:
    found = [p for node in ast.walk(ast.parse(code)) for p in imported(node, KPATCH)]
    assert found == packages


def _copy(tmp_path: Path) -> Path:
    """kpatch's sources in a temp folder, to plant an import in."""
    root = tmp_path / "kpatch"
    for path in KPATCH.rglob("*.py"):
        target = root / path.relative_to(KPATCH)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    return root
