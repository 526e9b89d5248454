"""The KV-cache dtypes XPU can run, read from the application: the attention backends the XPU platform's
`get_attn_backend_cls` can return (`AttentionBackendEnum.NAME`, resolved through the enum's class paths, or a
class path in quotes) each say which cache dtypes they take (`supported_kv_cache_dtypes`, through their bases),
and vLLM refuses any other `kv_cache_dtype` at model load. A branch on a cache dtype none of them takes
(`if kv_cache_dtype == "fp8_ds_mla":`) is not reached on XPU.

Anything not read this way (a backend the model cannot resolve, a list that is not literal strings) leaves the
set unknown, and no cache-dtype branch is decided."""

from __future__ import annotations

import ast
import re

from kpatch.verify.contract.reach.index import Index
from kpatch.verify.contract.reach.source import Module, text

PLATFORM_METHOD = "get_attn_backend_cls"
DTYPES_ATTR = "supported_kv_cache_dtypes"
_CLASS_PATH = re.compile(r"^[A-Za-z_]\w*(?:\.\w+)+\.[A-Z]\w*$")


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
    for rel in index.mentions(PLATFORM_METHOD):
        if b"PlatformEnum.XPU" not in index.data[rel]:
            continue
        mod = index.module(rel)
        if mod is None:
            continue
        for cls in mod.defs.values():
            if isinstance(cls, ast.ClassDef) and _is_xpu_platform(cls):
                method = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == PLATFORM_METHOD),
                              None)
                if method is not None:
                    return _from_method(index, mod, method)
    return None


def _is_xpu_platform(cls: ast.ClassDef) -> bool:
    return any(isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None
               and text(n.value) == "PlatformEnum.XPU" for n in cls.body)


def _from_method(index: Index, mod: Module, method: ast.FunctionDef) -> CacheDtypes | None:
    paths: set[str] = set()
    for node in ast.walk(method):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _CLASS_PATH.match(node.value):
            paths.add(node.value)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr.isupper():
            enum = index.resolve(mod, node.value.id)
            if enum is None or not isinstance(enum[1], ast.ClassDef):
                continue
            path = _member(enum[1], node.attr)
            if path is None:
                return None  # a member of an enum of backends whose class path is not a literal
            if path:
                paths.add(path)
    if not paths:
        return None
    dtypes: set[str] = set()
    for path in paths:
        found = _backend_dtypes(index, path)
        if found is None:
            return None
        dtypes |= found
    return CacheDtypes(frozenset(dtypes), f"{mod.where(method)} {method.name}")


def _member(enum: ast.ClassDef, name: str) -> str | None:
    """The class path an enum member names ("" when the class is no enum of class paths, or lacks the member)."""
    values = {t.id: n.value for n in enum.body if isinstance(n, ast.Assign) for t in n.targets
              if isinstance(t, ast.Name)}
    if not any(isinstance(v, ast.Constant) and isinstance(v.value, str) and _CLASS_PATH.match(v.value)
               for v in values.values()):
        return ""
    value = values.get(name)
    if value is None:
        return ""
    return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) \
        and _CLASS_PATH.match(value.value) else None


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
