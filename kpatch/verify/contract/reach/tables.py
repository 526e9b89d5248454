"""Tables asked only whether they hold a class: a module-level dict, set, list or tuple of classes (a kernel table by
backend name, `_LINEAR_BACKEND_KERNEL_MAP = {"b12x": {B12xNvFp4LinearKernel, ...}, ...}`) whose every use is a
membership test (`kernel in TABLE`, `kernel in TABLE.get(backend, set())`, a local assigned `TABLE.get(...)` or
`TABLE[...]` and then only tested so, `for key, kernels in TABLE.items(): ... kernel not in kernels`). Such a test
hands out no class: what runs is taken from elsewhere (a list keyed by platform), so a class listed there is not
loaded by it. Any other use (an iteration that keeps the class, an index passed on, the table's name in quotes)
leaves the table a use of the class."""

from __future__ import annotations

import ast
import re

from kpatch.verify.contract.reach.index import Index
from kpatch.verify.contract.reach.source import Module

_CONTAINERS = (ast.List, ast.Tuple, ast.Set)


class Tables:
    """Which module-level tables are only asked whether they hold something (memoized per table)."""

    def __init__(self, index: Index) -> None:
        self._index = index
        self._known: dict[tuple[str, str], str] = {}

    def membership_only(self, mod: Module, ref: ast.AST) -> str:
        """Why `ref` (a class named in a table) is not loaded through that table, or ""."""
        child, parent = ref, mod.parents.get(ref)
        while isinstance(parent, (*_CONTAINERS, ast.Dict)):
            if isinstance(parent, ast.Dict) and child not in parent.values:
                return ""
            child, parent = parent, mod.parents.get(parent)
        if child is ref or not isinstance(parent, (ast.Assign, ast.AnnAssign)) or parent.value is not child \
                or mod.parents.get(parent) is not mod.tree:
            return ""
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        if len(targets) != 1 or not isinstance(targets[0], ast.Name):
            return ""
        name = targets[0].id
        key = (mod.rel, name)
        if key not in self._known:
            self._known[key] = self._tested_only(mod, parent, name)
        return self._known[key]

    def _tested_only(self, mod: Module, assign: ast.stmt, name: str) -> str:
        quoted = re.compile(rb"[\"']" + re.escape(name.encode()) + rb"[\"']")
        uses = 0
        for rel in self._index.mentions(name):
            if quoted.search(self._index.data[rel]):
                return ""  # getattr(module, "TABLE"): used unseen
            other = self._index.module(rel)
            if other is None or any(attr == name and alias != name for alias, bound in other.imports.items()
                                    for _, attr, _ in bound):
                return ""  # unreadable, or imported under another name (`from mod import TABLE as T`)
            nodes: list[ast.Name | ast.Attribute] = [*other.names.get(name, []), *other.attributes.get(name, [])]
            for node in nodes:
                if isinstance(node.ctx, ast.Store):
                    if other is mod and mod.parents.get(node) is assign:
                        continue
                    return ""  # rebound elsewhere
                if isinstance(node.ctx, ast.Del) or not _membership_use(other, node):
                    return ""
                uses += 1
        if not uses:
            return ""
        return f"{mod.where(assign)}: {name} is only asked whether it holds a class (`x in {name}...`), which " \
               "loads none"


def _membership_use(mod: Module, node: ast.expr) -> bool:
    """Whether this use of a table only tests membership: `x in T`, `x in T.get(k)` / `T[k]` (or a local assigned
    one and only tested so), `for k, v in T.items()` (or `.values()`) with v only tested so; `T.keys()` or `k in T`
    for a dict's keys."""
    parent = mod.parents.get(node)
    if _is_tested(mod, node):
        return True
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return _tested_value(mod, parent)
    if not (isinstance(parent, ast.Attribute) and parent.value is node):
        return False
    call = mod.parents.get(parent)
    if not (isinstance(call, ast.Call) and call.func is parent):
        return False
    if parent.attr == "get":
        return _tested_value(mod, call)
    if parent.attr == "keys":
        return True
    loop = mod.parents.get(call)
    if parent.attr not in ("items", "values") or not isinstance(loop, ast.For) or loop.iter is not call:
        return False
    target = loop.target
    if parent.attr == "items":
        if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
            return False
        target = target.elts[1]
    return isinstance(target, ast.Name) and _only_tested(mod, target.id, mod.function(loop) or mod.tree)


def _is_tested(mod: Module, node: ast.expr) -> bool:
    """`x in node` / `x not in node`."""
    parent = mod.parents.get(node)
    return isinstance(parent, ast.Compare) and len(parent.ops) == 1 and isinstance(parent.ops[0], (ast.In, ast.NotIn)) \
        and parent.comparators[0] is node


def _tested_value(mod: Module, value: ast.expr) -> bool:
    """A value taken from a table is only tested for membership: directly, or through a local it is assigned to."""
    if _is_tested(mod, value):
        return True
    assign = mod.parents.get(value)
    if not (isinstance(assign, ast.Assign) and assign.value is value and len(assign.targets) == 1
            and isinstance(assign.targets[0], ast.Name)):
        return False
    scope = mod.function(assign)
    return scope is not None and _only_tested(mod, assign.targets[0].id, scope)


def _only_tested(mod: Module, name: str, scope: ast.AST) -> bool:
    """Every load of local `name` within scope is a membership test's container."""
    loads = [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
    return all(_is_tested(mod, n) for n in loads)
