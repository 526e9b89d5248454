"""One parsed file of the application: its tree, parents, names, attributes and imports, and small AST helpers."""

from __future__ import annotations

import ast
from collections.abc import Iterator

Scope = ast.FunctionDef | ast.AsyncFunctionDef


class Module:
    """A parsed application file, indexed in one pass."""

    def __init__(self, rel: str, name: str, tree: ast.Module) -> None:
        self.rel, self.name, self.tree = rel, name, tree
        self.parents: dict[ast.AST, ast.AST] = {}
        self.names: dict[str, list[ast.Name]] = {}  # every use of a name, by name
        self.attributes: dict[str, list[ast.Attribute]] = {}  # every `x.attr`, by attr
        self.rebound: set[str] = set()  # names some function declares global (or nonlocal)
        self.imports: dict[str, list[tuple[str, str | None, ast.stmt]]] = {}  # name -> [(module, attr, import)]
        stack: list[ast.AST] = [tree]
        while stack:  # one pass over the tree (ast.walk and iter_child_nodes cost most of the time here)
            node = stack.pop()
            for field in node._fields:
                value = getattr(node, field, None)
                if isinstance(value, ast.AST):
                    self.parents[value] = node
                    stack.append(value)
                elif isinstance(value, list):
                    for child in value:
                        if isinstance(child, ast.AST):
                            self.parents[child] = node
                            stack.append(child)
            if isinstance(node, ast.Name):
                self.names.setdefault(node.id, []).append(node)
            elif isinstance(node, ast.Attribute):
                self.attributes.setdefault(node.attr, []).append(node)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                self.rebound.update(node.names)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    top = a.name.split(".")[0]
                    self.imports.setdefault(a.asname or top, []).append((a.name if a.asname else top, None, node))
            elif isinstance(node, ast.ImportFrom):
                base = self.absolute(node)
                for a in node.names:
                    self.imports.setdefault(a.asname or a.name, []).append((base, a.name, node))
        self.defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = {
            n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        for node in tree.body:  # defs under a top-level `if` (platform-selected definitions) count too
            if isinstance(node, (ast.If, ast.Try)):
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                            and self.enclosing(inner) is None:
                        self.defs.setdefault(inner.name, inner)

    def absolute(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        package = self.name.split(".") if self.rel.endswith("__init__.py") else self.name.split(".")[:-1]
        package = package[:len(package) - node.level + 1]
        return ".".join(package + ([node.module] if node.module else []))

    def function(self, node: ast.AST) -> Scope | None:
        """The function around node (through classes), or None at module level."""
        scope = self.enclosing(node)
        while isinstance(scope, ast.ClassDef):
            scope = self.enclosing(scope)
        return scope

    def enclosing(self, node: ast.AST) -> Scope | ast.ClassDef | None:
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            parent = self.parents.get(parent)
        return parent

    def unit(self, node: ast.AST) -> tuple[ast.ClassDef | None, Scope | None]:
        """The outermost function (or method of a top-level class) around node: what callers call."""
        chain: list[ast.AST] = []
        scope = self.enclosing(node)
        while scope is not None:
            chain.append(scope)
            scope = self.enclosing(scope)
        chain.reverse()
        if not chain:
            return None, None
        if isinstance(chain[0], ast.ClassDef):
            method = next((c for c in chain[1:2] if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
            return chain[0], method
        head = chain[0]
        assert isinstance(head, (ast.FunctionDef, ast.AsyncFunctionDef))
        return None, head

    def where(self, node: ast.AST) -> str:
        return f"{self.rel}:{getattr(node, 'lineno', 0)}"


def text(node: ast.AST) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= 90 else text[:87] + "..."


def terminates(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function or class body, without nested functions, classes or lambdas."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def is_torch_ops_vllm(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "vllm" and isinstance(node.value, ast.Attribute) \
        and node.value.attr == "ops"


def inside(mod: Module, node: ast.AST, scope: ast.AST) -> bool:
    """Whether node is within scope."""
    parent = mod.parents.get(node)
    while parent is not None:
        if parent is scope:
            return True
        parent = mod.parents.get(parent)
    return False
