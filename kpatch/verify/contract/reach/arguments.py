"""Branches a function takes on its own arguments: `if rope_dim_offset == 0 and not inverse:` is decided at each
call, by what the caller passes (or the parameter's default), not by the platform."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from kpatch.verify.contract.reach.source import Module, Scope
from kpatch.verify.contract.reach.verdict import Value

_UNKNOWN = object()
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}


def parameters(func: Scope) -> list[ast.arg]:
    a = func.args
    return [*a.posonlyargs, *a.args, *a.kwonlyargs]


def branches(mod: Module, node: ast.AST, func: Scope) -> list[tuple[ast.expr, bool]]:
    """The tests around node inside func (not inside a nested function) that read only func's parameters, each
    with the value it must have for node to run."""
    names = {a.arg for a in parameters(func)}
    out: list[tuple[ast.expr, bool]] = []
    child, parent = node, mod.parents.get(node)
    while parent is not None and parent is not func:
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return []
        if isinstance(parent, (ast.If, ast.IfExp)):
            in_body = child in parent.body if isinstance(parent, ast.If) else child is parent.body
            in_else = child in parent.orelse if isinstance(parent, ast.If) else child is parent.orelse
            read = {n.id for n in ast.walk(parent.test) if isinstance(n, ast.Name)}
            if (in_body or in_else) and read and read <= names:
                out.append((parent.test, in_body))
        child, parent = parent, mod.parents.get(parent)
    return out


def bind(func: Scope, call: ast.Call, skip_self: bool = False) -> dict[str, ast.expr] | None:
    """What each parameter of func is at this call: the argument passed, else its default (a parameter with
    neither is left out); None when the call spreads arguments (*args, **kwargs) or passes ones func lacks.
    skip_self: func is a method called through its class or object (`Cls(...)` runs `__init__(self, ...)`)."""
    a = func.args
    positional = [*a.posonlyargs, *a.args][1 if skip_self else 0:]
    if any(isinstance(x, ast.Starred) for x in call.args) or any(k.arg is None for k in call.keywords) \
            or (len(call.args) > len(positional) and a.vararg is None):
        return None
    bound: dict[str, ast.expr] = {}
    for param, default in zip(positional[len(positional) - len(a.defaults):], a.defaults, strict=True):
        bound[param.arg] = default
    for param, kw_default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        if kw_default is not None:
            bound[param.arg] = kw_default
    for param, arg in zip(positional, call.args, strict=False):
        bound[param.arg] = arg
    known = {p.arg for p in parameters(func)}
    for kw in call.keywords:
        if kw.arg not in known and a.kwarg is None:
            return None
        if kw.arg is not None:
            bound[kw.arg] = kw.value
    return bound


def decide(test: ast.expr, bound: dict[str, ast.expr]) -> Value:
    """The truth of test when its parameters are the constants bound to them (None when any is not a constant)."""
    value = _evaluate(test, bound)
    return None if value is _UNKNOWN else bool(value)


def _evaluate(expr: ast.expr, bound: dict[str, ast.expr]) -> Any:
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.Name):
        arg = bound.get(expr.id)
        return arg.value if isinstance(arg, ast.Constant) else _UNKNOWN
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        inner = _evaluate(expr.operand, bound)
        return _UNKNOWN if inner is _UNKNOWN else not inner
    if isinstance(expr, ast.BoolOp):
        decisive = isinstance(expr.op, ast.Or)  # the truth that ends an `or` (True) or an `and` (False)
        values = [_evaluate(v, bound) for v in expr.values]
        for v in values:
            if v is not _UNKNOWN and bool(v) is decisive:
                return decisive
        return _UNKNOWN if _UNKNOWN in values else not decisive
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and type(expr.ops[0]) in _COMPARE:
        left, right = _evaluate(expr.left, bound), _evaluate(expr.comparators[0], bound)
        if left is _UNKNOWN or right is _UNKNOWN:
            return _UNKNOWN
        try:
            return _COMPARE[type(expr.ops[0])](left, right)
        except TypeError:
            return _UNKNOWN
    return _UNKNOWN
