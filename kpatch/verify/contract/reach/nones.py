"""Objects that are None on XPU, so that a check of them (`if workspace is not None:`) keeps a call off XPU:
- `current_platform.get_device_capability()`;
- a call of a function (a factory, a classmethod `create`) every return of which XPU reaches returns None: the
  others sit behind a guard false on XPU (`if not hasattr(torch.ops._C, "op") or ...: return None`);
- a local or `self.` attribute assigned only such values where XPU runs, a buffer registered with one
  (`self.register_buffer("w", None)`), and a parameter every call passes one to (or leaves at a None default).

Each answer is a line of evidence ("" when the object may be something else on XPU)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Protocol

from kpatch.verify.contract.reach import arguments
from kpatch.verify.contract.reach.index import Index
from kpatch.verify.contract.reach.source import Module, Scope, inside, own_nodes, terminates, text
from kpatch.verify.contract.reach.verdict import MAX_DEPTH


class Values(Protocol):
    """What these guards ask of `values.Values` (which calls them): a Protocol, so the two modules are no circle."""

    def guard(self, mod: Module, node: ast.AST, stop: ast.AST | None = None, depth: int = 0) -> str: ...

    def resolve_function(self, mod: Module, func: ast.expr) -> tuple[Module, Scope] | None: ...

    def parameter_none(self, mod: Module, func: Scope, name: str, depth: int) -> str: ...

    def assigned(self, mod: Module, name: ast.Name, depth: int) -> list[tuple[Module, ast.expr]]: ...

    def attribute_values(self, mod: Module, expr: ast.Attribute) -> list[tuple[Module, ast.expr]] | None: ...


def none_on_xpu(v: Values, mod: Module, expr: ast.expr, depth: int) -> str:
    """Why expr is None whenever XPU evaluates it, or "" when it may not be."""
    if depth > MAX_DEPTH:
        return ""
    if isinstance(expr, ast.Constant):
        return "None" if expr.value is None else ""
    if isinstance(expr, ast.Call):
        return _call(v, mod, expr, depth)
    if isinstance(expr, ast.Name):
        func = mod.function(expr)
        if func is not None and expr.id in {a.arg for a in arguments.parameters(func)}:
            if any(isinstance(n, ast.Name) and n.id == expr.id and isinstance(n.ctx, ast.Store)
                   for n in ast.walk(func)):
                return ""  # rebound inside (`ws = ws or make()`)
            return v.parameter_none(mod, func, expr.id, depth + 1)
        return _all_none(v, v.assigned(mod, expr, depth + 1), depth)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls"):
        return _all_none(v, v.attribute_values(mod, expr) or [], depth)
    return ""


def _all_none(v: Values, values: list[tuple[Module, ast.expr]], depth: int) -> str:
    reasons = []
    for m, value in values:
        why = none_on_xpu(v, m, value, depth + 1)
        if not why:
            return ""
        reasons.append(why)
    return next((r for r in reasons if r != "None"), "None") if reasons else ""


def _call(v: Values, mod: Module, expr: ast.Call, depth: int) -> str:
    if isinstance(expr.func, ast.Attribute) and expr.func.attr == "get_device_capability":
        return "get_device_capability() is None on XPU"
    target = v.resolve_function(mod, expr.func)
    if target is None:
        return ""
    return returns_only_none(v, target[0], target[1], depth + 1)


def returns_only_none(v: Values, mod: Module, func: Scope, depth: int) -> str:
    """Why func returns None wherever XPU runs it (every return XPU reaches gives None), or ""."""
    if depth > MAX_DEPTH or any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for n in own_nodes(func)):
        return ""
    kept: list[ast.Return] = []
    for node in own_nodes(func):
        if not isinstance(node, ast.Return) or v.guard(mod, node, func, depth):
            continue
        if node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None):
            return ""
        kept.append(node)
    others = [n for n in own_nodes(func) if isinstance(n, ast.Return) and n not in kept]
    if not others:
        return ""  # a function that only ever returns None: no guard decides it, nothing platform-specific
    guard = v.guard(mod, others[0], func, depth)
    return f"{mod.where(func)}: {func.name} returns None on XPU ({guard})"


def parameter_none(v: Values, func: Scope, name: str,
                   calls: list[tuple[Module, ast.Call]] | None, method: bool, depth: int) -> str:
    """Why parameter `name` of func is None on XPU: every call (`calls`, all of them) passes an object None on
    XPU, or leaves the parameter at a None default. "" when any call may pass something else. method: func is
    a class's __init__, called through the class."""
    if not calls:
        return ""
    reasons = []
    for other, call in calls:
        bound = arguments.bind(func, call, skip_self=method)
        if bound is None or name not in bound:
            return ""
        why = none_on_xpu(v, other, bound[name], depth + 1)
        if not why:
            return ""
        reasons.append(f"{other.where(call)} passes `{text(bound[name])}`" + ("" if why == "None" else f": {why}"))
    more = f"; +{len(reasons) - 1} more call(s)" if len(reasons) > 1 else ""
    return f"every call of {func.name} passes None for {name} on XPU: {reasons[0]}{more}"


def keyword_none(v: Values, index: Index, mod: Module, func: Scope, name: str,
                 reached: Callable[[Module, ast.AST, int], bool], depth: int) -> str:
    """Why keyword-only parameter `name` of method func (None by default) is None on XPU: every call by the method's
    name that passes it (`x.method(..., name=...)`, or spreads `**kwargs`) is off XPU or passes an object None there.
    The calls are found by name through any object, the model not knowing types; "" when a class built on func's
    uses the method as a value (`self.method` passed on, `getattr(self, "method")`), where a call may pass the
    keyword unseen. Another object's attribute of that name, not called, is taken for data of another class."""
    owner = mod.enclosing(func)
    default = dict(zip((p.arg for p in func.args.kwonlyargs), func.args.kw_defaults, strict=True)).get(name)
    if not isinstance(owner, ast.ClassDef) or not (isinstance(default, ast.Constant) and default.value is None):
        return ""

    def own(other: Module, node: ast.AST) -> bool:  # node sits in a class built on func's
        cls, _ = other.unit(node)
        return cls is not None and any(c is owner for _, c in index.mro(other, cls))

    getattr_self = re.compile(rb"getattr\(\s*self\s*,\s*[\"']" + re.escape(func.name.encode()) + rb"[\"']")
    rels = set(index.mentions(name)) | {r for r in index.mentions(func.name) if b"**" in index.data[r]}
    reasons = []
    for rel in sorted(rels):
        other = index.module(rel)
        if other is None:
            continue
        for use in other.attributes.get(func.name, []):
            call = other.parents.get(use)
            if inside(other, use, func) or isinstance(use.ctx, ast.Store):
                continue
            if not isinstance(call, ast.Call) or call.func is not use:
                if isinstance(use.value, ast.Name) and use.value.id in ("self", "cls") and own(other, use):
                    return ""  # a bound method passed on
                continue
            passed = [k for k in call.keywords if k.arg in (name, None)]
            if not passed:
                continue
            if not reached(other, call, depth + 1):
                reasons.append(f"{other.where(call)} (not reached on XPU)")
                continue
            why = none_on_xpu(v, other, passed[0].value, depth + 1) if passed[0].arg == name else ""
            if not why:
                return ""
            said = "" if why == "None" else f": {why}"
            reasons.append(f"{other.where(call)} passes `{text(passed[0].value)}`{said}")
        if getattr_self.search(index.data[rel]) and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr" and n.args
               and isinstance(n.args[0], ast.Name) and n.args[0].id == "self" and own(other, n)
               and any(isinstance(a, ast.Constant) and a.value == func.name for a in n.args[1:])
               for n in ast.walk(other.tree)):
            return ""
    if not reasons:
        return f"no call of {func.name} passes {name}, None by default"
    more = f"; +{len(reasons) - 1} more call(s)" if len(reasons) > 1 else ""
    return f"every call of {func.name} that passes {name} is off XPU or passes None: {reasons[0]}{more}"


def register_buffer_values(cls: ast.ClassDef, attr: str) -> list[ast.expr]:
    """The values `self.register_buffer("attr", value, ...)` gives attr in cls."""
    out = []
    for node in ast.walk(cls):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "register_buffer" and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == "self" and len(node.args) >= 2 \
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == attr:
            out.append(node.args[1])
    return out


def returns_number(v: Values, mod: Module, func: Scope, depth: int) -> int | None:
    """The one integer func returns wherever XPU runs it (`get_cdna_version()`: 0 once every `if on_gfx950():
    return 4` is false there), or None."""
    if depth > MAX_DEPTH or not terminates(func.body) \
            or any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for n in own_nodes(func)):
        return None
    found: set[int] = set()
    for node in own_nodes(func):
        if not isinstance(node, ast.Return) or v.guard(mod, node, func, depth):
            continue
        value = node.value
        if not (isinstance(value, ast.Constant) and isinstance(value.value, int) and not isinstance(value.value, bool)):
            return None
        found.add(value.value)
    return found.pop() if len(found) == 1 else None
