"""Data flows one way, down: kpatch's packages import only packages on their own floor or below, and no two import
each other (directly or around a circle); inside a package, no two modules do either. Every import counts: at
module level, inside a function, and under TYPE_CHECKING. The floors, top to bottom: the CLI, the commands (one
module each, imported by the CLI alone), the work packages (the demo's and the night's, which call the rest), the
carry dashboard (which the night and `kpatch rebase` write to), their shared parts, the seams to outside systems,
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
    "demo",
    "nightly adopt lines",
    "dashboard",  # the carry history and the night's report record: below the nightly, above what it records
    "testing verify doctor",
    "wheels",
    "engine",
    "examples stack config project",  # examples: the example upstreams the demo and the tests build
    "gitx container forge procs",
    "errors scratch",
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
    assert "engine (floor 8) imports commands (floor 2), a higher floor" in problems(import_graph(root))


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
    ("import kpatch.demo.pipeline, os", ["demo"]),
    ("from kpatch import cli, __version__", ["cli", "kpatch"]),
    ("if TYPE_CHECKING:\n    from kpatch.commands import status", ["commands"]),
    ("class A:\n    def f(self) -> None:\n        import kpatch.wheels.lock as lock", ["wheels"]),
    ("from . import sibling\nimport kpatchless", []),
])
def test_each_form_of_import_names_its_package(code: str, packages: list[str]) -> None:
    found = [p for node in ast.walk(ast.parse(code)) for p in imported(node, KPATCH)]
    assert found == packages


def module_of(path: Path, root: Path) -> str:
    """kpatch/engine/apply.py -> kpatch.engine.apply; kpatch/forge/__init__.py -> kpatch.forge."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph(root: Path) -> Graph:
    """Module -> the kpatch modules its imports run (`from kpatch.a.b import c` runs kpatch.a, kpatch.a.b and, when
    it is a module, kpatch.a.b.c), anywhere in it. An import of a module's own package is left out: Python runs a
    package before its modules, so that edge is no circle."""
    modules = {module_of(path, root): path for path in root.rglob("*.py")}
    graph: Graph = {}
    for name, path in sorted(modules.items()):
        edges = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                named = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            for target in named:
                parts = target.split(".")
                edges.update(".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in modules)
        edges -= {name, *(e for e in edges if name.startswith(e + "."))}
    return graph


def module_circles(graph: Graph) -> list[str]:
    """Each group of modules that import one another around a circle, one line each (strongly connected)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[str] = []

    def visit(node: str) -> None:  # Tarjan's
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append("circle between modules: " + ", ".join(sorted(group)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def faces_importing_their_modules(root: Path) -> list[str]:
    """A package's __init__.py that imports its own modules inside a function (a dispatcher in the face): they
    import the package back, a circle the module graph cannot see."""
    found = []
    for path in sorted(root.rglob("__init__.py")):
        package = module_of(path, root)
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(function, ast.FunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package + "."):
                    found.append(f"{package}.{function.name} imports {node.module}")
    return found


def test_no_two_modules_import_each_other() -> None:
    graph = module_graph(KPATCH)
    assert {"kpatch.cli", "kpatch.forge.hosts", "kpatch.testing.suites"} <= graph.keys()
    assert module_circles(graph) == []
    assert faces_importing_their_modules(KPATCH) == []


def test_a_circle_between_two_modules_is_found(tmp_path: Path) -> None:
    """A test of the test: testing/run.py importing testing/local.py (which imports run) inside a function, and a
    package face with a dispatcher that imports its own module, are each found."""
    root = _copy(tmp_path)
    run = root / "testing" / "run.py"
    run.write_text(run.read_text() + "\n\ndef _planted() -> None:\n    from kpatch.testing.local import run_local\n")
    face = root / "forge" / "__init__.py"
    face.write_text(face.read_text() + "\n\ndef _planted() -> None:\n    from kpatch.forge.github.pulls import x\n")
    assert module_circles(module_graph(root)) == [
        "circle between modules: kpatch.testing.local, kpatch.testing.run"]
    assert faces_importing_their_modules(root) == ["kpatch.forge._planted imports kpatch.forge.github.pulls"]


def _copy(tmp_path: Path) -> Path:
    """kpatch's sources in a temp folder, to plant an import in."""
    root = tmp_path / "kpatch"
    for path in KPATCH.rglob("*.py"):
        target = root / path.relative_to(KPATCH)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    return root
