"""The KV-cache dtypes XPU can run, read from the application: the attention backends the XPU platform's
`get_attn_backend_cls` can return (`AttentionBackendEnum.NAME`, resolved through the enum's class paths, or a
class path in quotes) each say which cache dtypes they take (`supported_kv_cache_dtypes`, through their bases),
and vLLM refuses any other `kv_cache_dtype` at model load. A branch on a cache dtype none of them takes
(`if kv_cache_dtype == "fp8_ds_mla":`) is not reached on XPU.

Anything not read this way (a backend the model cannot resolve, a list that is not literal strings) leaves the
set unknown, and no cache-dtype branch is decided."""

from __future__ import annotations

import ast

from kpatch.verify.contract.reach.backends import selected_paths, xpu_selector
from kpatch.verify.contract.reach.index import Index
from kpatch.verify.contract.reach.source import Module

DTYPES_ATTR = "supported_kv_cache_dtypes"


class CacheDtypes:
    """What XPU's attention backends take, and why (a line naming the platform method and the backends)."""

    def __init__(self, dtypes: frozenset[str], where: str) -> None:
        self.dtypes, self.where = dtypes, where

    def decide(self, expr: ast.Compare) -> tuple[bool, str] | None:
        """The truth of a cache-dtype test on XPU when no dtype it names is one XPU takes, and why."""
        op, left, right = expr.ops[0], expr.left, expr.comparators[0]
        if not _is_cache_dtype(left):
            left, right = right, left
        if not _is_cache_dtype(left):
            return None
        if isinstance(op, (ast.Eq, ast.NotEq)) and isinstance(right, ast.Constant) and isinstance(right.value, str):
            named = [right.value]
        elif isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set)) \
                and right.elts and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in right.elts):
            named = [str(e.value) for e in right.elts if isinstance(e, ast.Constant)]
        else:
            return None
        if any(n in self.dtypes for n in named):
            return None  # a dtype XPU takes: the person's choice decides
        why = f"no attention backend XPU selects takes kv_cache_dtype {' or '.join(map(repr, named))} " \
              f"({self.where}: {', '.join(sorted(self.dtypes))}); any other is refused at model load"
        return isinstance(op, (ast.NotEq, ast.NotIn)), why


def _is_cache_dtype(expr: ast.expr) -> bool:
    name = expr.attr if isinstance(expr, ast.Attribute) else expr.id if isinstance(expr, ast.Name) else ""
    return name.endswith("cache_dtype")


def xpu_cache_dtypes(index: Index) -> CacheDtypes | None:
    """The cache dtypes XPU's attention backends take (None when a backend's list cannot be read)."""
    selector = xpu_selector(index)
    paths = selected_paths(index, *selector) if selector is not None else None
    if selector is None or not paths:
        return None
    dtypes: set[str] = set()
    for path in paths:
        found = _backend_dtypes(index, path)
        if found is None:
            return None
        dtypes |= found
    mod, method = selector
    return CacheDtypes(frozenset(dtypes), f"{mod.where(method)} {method.name}")


def _backend_dtypes(index: Index, path: str) -> set[str] | None:
    module, _, name = path.rpartition(".")
    mod = index.module_named(module)
    if mod is None:
        return None
    cls = mod.defs.get(name)
    if not isinstance(cls, ast.ClassDef):
        return _made_backend(index, mod, name)
    return _class_dtypes(index, mod, cls)


def _made_backend(index: Index, mod: Module, name: str) -> set[str] | None:
    """A backend a factory makes at module level from others (`Composite = make_composite(TritonBackend,
    FlashBackend, ...)`): at most the dtypes of the backends it is made from."""
    made = [n.value for n in mod.tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
            and [t.id for t in n.targets if isinstance(t, ast.Name)] == [name]]
    if len(made) != 1:
        return None
    found: set[str] = set()
    for arg in made[0].args:
        other = index.resolve(mod, arg.id) if isinstance(arg, ast.Name) else None
        if other is None or not isinstance(other[1], ast.ClassDef):
            continue
        dtypes = _class_dtypes(index, other[0], other[1])
        if dtypes is None:
            return None
        found |= dtypes
    return found or None


def _class_dtypes(index: Index, mod: Module, cls: ast.ClassDef) -> set[str] | None:
    for _, c in index.mro(mod, cls):
        for node in c.body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                continue
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                else node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(target, ast.Name) and target.id == DTYPES_ATTR:
                value = node.value
                if isinstance(value, (ast.List, ast.Tuple)) and value.elts and all(
                        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts):
                    return {str(e.value) for e in value.elts if isinstance(e, ast.Constant)}
                return None  # not literal strings, or empty (which a backend reads as "any dtype")
    return None
