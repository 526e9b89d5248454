"""Flow through one function's statements on XPU, for two questions the branch tests alone do not answer:
- the truth of a local where it is returned (`failures = []`, then `if not self._is_cuda: failures.append(...)`:
  a list a platform check always fills is not empty), and
- which strings a selection function can return (`backend = self.resolve_backend(...)`, then
  `if backend == "cooperative":`): a string literal it returns where XPU runs, or a value it returns unchanged
  (`return self._backend`), assumed equal to the string, when nothing before that return ends the function.

Statements run in order; an `if` whose test is known on XPU runs one branch, else both (joined); loops, `with` and
`try` blocks make the locals they touch unknown. Anything not modelled leaves a value unknown (None), so the
answer is "may be reached" unless a line says otherwise.
"""

from __future__ import annotations

import ast
from enum import Enum
from typing import Protocol

from kpatch.verify.contract.reach.source import Module, Scope, own_nodes, terminates, text
from kpatch.verify.contract.reach.verdict import MAX_DEPTH, Value


class Values(Protocol):
    """What the flow asks of `values.Values` (which calls the flow): a Protocol, so the two modules are no circle."""

    def guard(self, mod: Module, node: ast.AST, stop: ast.AST | None = None, depth: int = 0) -> str: ...

    def value(self, mod: Module, expr: ast.expr, depth: int = 0) -> Value: ...

    def resolve_function(self, mod: Module, func: ast.expr) -> tuple[Module, Scope] | None: ...

State = dict[str, Value]  # the truth of each local assigned so far (None: not known)
_FILLS = frozenset({"append", "insert", "add", "appendleft"})  # list/set/deque methods that leave it non-empty


class End(Enum):
    TARGET = "target"  # the statement asked about runs
    END = "end"  # the function returned or raised first
    FALL = "fall"  # ran to the end of the statements


def truth_at(v: Values, mod: Module, func: Scope, node: ast.Return, name: str, depth: int) -> Value:
    """The truth of local `name` where `return name` runs (None when not known or the return is not reached)."""
    end, state = _run(v, mod, func.body, node, {}, {}, depth)
    return state.get(name) if end is End.TARGET else None


def may_return(v: Values, mod: Module, func: Scope, string: str, depth: int, seen: frozenset[int] = frozenset()
               ) -> bool:
    """Whether func can return `string` on XPU (False only when every return it reaches is shown not to)."""
    if depth > MAX_DEPTH or id(func) in seen or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own_nodes(func)):
        return True
    for node in own_nodes(func):
        if not isinstance(node, ast.Return) or node.value is None or v.guard(mod, node, func, depth):
            continue
        value = node.value
        if isinstance(value, ast.Constant):
            if value.value == string:
                return True
            continue
        if isinstance(value, ast.Call):
            target = v.resolve_function(mod, value.func)
            if target is None or may_return(v, target[0], target[1], string, depth + 1, seen | {id(func)}):
                return True
            continue
        if isinstance(value, (ast.Name, ast.Attribute)):
            end, _ = _run(v, mod, func.body, node, {}, {text(value): string}, depth)
            if end is End.TARGET:
                return True
            continue
        return True
    return False


def always_returns(v: Values, mod: Module, func: Scope, string: str, depth: int,
                   seen: frozenset[int] = frozenset()) -> bool:
    """Whether every return func reaches on XPU returns `string` (a literal, or a call of a function that does)."""
    if depth > MAX_DEPTH or id(func) in seen or not terminates(func.body) \
            or any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own_nodes(func)):
        return False
    found = False
    for node in own_nodes(func):
        if not isinstance(node, ast.Return) or v.guard(mod, node, func, depth):
            continue
        value = node.value
        if isinstance(value, ast.Constant) and value.value == string:
            found = True
            continue
        target = v.resolve_function(mod, value.func) if isinstance(value, ast.Call) else None
        if target is None or not always_returns(v, target[0], target[1], string, depth + 1, seen | {id(func)}):
            return False
        found = True
    return found


def _run(v: Values, mod: Module, body: list[ast.stmt], target: ast.AST, state: State, assume: dict[str, str],
         depth: int) -> tuple[End, State]:
    state = dict(state)
    for stmt in body:
        inside = any(n is target for n in ast.walk(stmt))
        if isinstance(stmt, ast.If):
            test = _test(v, mod, stmt.test, state, assume, depth)
            branches = [b for b, runs in ((stmt.body, True), (stmt.orelse, False)) if test is None or test is runs]
            outcomes = [_run(v, mod, b, target, state, assume, depth) for b in branches]
            hit = [s for e, s in outcomes if e is End.TARGET]
            if hit:
                return End.TARGET, _join(hit)
            falls = [s for e, s in outcomes if e is End.FALL]
            if not falls:
                return End.END, state
            state = _join(falls)
            continue
        if inside:
            return End.TARGET, state if stmt is target else _forget(state, stmt)
        if isinstance(stmt, (ast.Return, ast.Raise)):
            return End.END, state
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                state[targets[0].id] = _truth(v, mod, stmt.value, state, depth)
                continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                and isinstance(stmt.value.func, ast.Attribute) and isinstance(stmt.value.func.value, ast.Name) \
                and stmt.value.func.attr in _FILLS:
            state[stmt.value.func.value.id] = True
            continue
        state = _forget(state, stmt)
    return End.FALL, state


def _forget(state: State, stmt: ast.stmt) -> State:
    """The locals a statement not modelled may change become unknown: every local it names (bound there, a method
    called on it, or passed to a function that may fill it)."""
    named = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    return {name: (None if name in named else value) for name, value in state.items()}


def _join(states: list[State]) -> State:
    names = {name for s in states for name in s}
    out: State = {}
    for name in names:
        values = {s.get(name) for s in states}
        out[name] = values.pop() if len(values) == 1 else None
    return out


def _test(v: Values, mod: Module, expr: ast.expr, state: State, assume: dict[str, str], depth: int) -> Value:
    if isinstance(expr, ast.Name) and expr.id in state:
        return state[expr.id]
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        inner = _test(v, mod, expr.operand, state, assume, depth)
        return None if inner is None else not inner
    if isinstance(expr, ast.BoolOp):
        decisive = isinstance(expr.op, ast.Or)
        values = [_test(v, mod, e, state, assume, depth) for e in expr.values]
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and isinstance(expr.ops[0], (ast.Eq, ast.NotEq)):
        right = expr.comparators[0]
        for a, b in ((expr.left, right), (right, expr.left)):
            if isinstance(b, ast.Constant) and isinstance(b.value, str) and text(a) in assume:
                return (assume[text(a)] == b.value) is isinstance(expr.ops[0], ast.Eq)
    return v.value(mod, expr, depth)


def _truth(v: Values, mod: Module, expr: ast.expr, state: State, depth: int) -> Value:
    """The truth of an assigned value: a literal's, a local's so far, or what the function called returns."""
    if isinstance(expr, ast.Constant):
        return bool(expr.value)
    if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
        if any(isinstance(e, ast.Starred) for e in expr.elts):  # [*rest]: empty when rest is
            return True if any(not isinstance(e, ast.Starred) for e in expr.elts) else None
        return bool(expr.elts)
    if isinstance(expr, ast.Dict):
        return bool(expr.keys)
    if isinstance(expr, ast.Name) and expr.id in state:
        return state[expr.id]
    return v.value(mod, expr, depth + 1)
