"""Opt-in config guards: a path taken only when a user sets a config value away from its default, to a value no XPU
code names (`if vllm_config.kernel_config.moe_backend == "deep_gemm_mega_moe":`, or a decode backend read with
`extra.get("decode_backend", "auto")` and refused with `if backend != "latency_specialized": raise`).

A config value is read as one of:
- `cfg.field` where a `*Config` class declares `field: T = "default"` (and only with that default);
- `getattr(cfg, "field", "default")` or `cfg.get("field", "default")` (a dict of extra options);
- a local, or a `self.` attribute, assigned only such reads (or an `a if c else b` of reads with one default).
A test of it against a string other than its default is false on XPU when that string appears in no XPU module
(a path with `xpu` in it: the platform, XPU models): vLLM's XPU code never selects that value, so the path runs only
if a user opts in to a CUDA-only choice. A string some XPU module names (`deep_gemm_mega_moe` in an XPU model) may be
taken there: the test stays unknown, and the call reported.
"""

from __future__ import annotations

import ast
import re
from typing import Protocol

from kpatch.verify.contract.reach.index import Index
from kpatch.verify.contract.reach.source import Module


class Reads(Protocol):
    """What this module asks of `values.Values`."""

    def assigned(self, mod: Module, name: ast.Name, depth: int) -> list[tuple[Module, ast.expr]]: ...

    def attribute_values(self, mod: Module, expr: ast.Attribute) -> list[tuple[Module, ast.expr]] | None: ...


class Defaults:
    """The string defaults `*Config` classes declare for their fields, and the strings XPU modules name."""

    def __init__(self, index: Index) -> None:
        self._index = index
        self._fields: dict[str, tuple[str, str] | None] = {}  # field -> (default, where) or None: none/several
        self._declared: dict[str, dict[str, set[tuple[str, str]]]] = {}  # module -> field -> (default, where)
        self._xpu: bytes | None = None

    def field(self, name: str) -> tuple[str, str] | None:
        """The one string default of `name` among `*Config` classes, and where it is declared."""
        if name not in self._fields:
            found: set[tuple[str, str]] = set()
            for rel in self._index.mentions(name):
                found |= self._declared_in(rel).get(name, set())
            self._fields[name] = found.pop() if len({d for d, _ in found}) == 1 else None
        return self._fields[name]

    def _declared_in(self, rel: str) -> dict[str, set[tuple[str, str]]]:
        """The string defaults the `*Config` classes of one module declare, by field: the module's tree walked once,
        not once per field asked about (vLLM's config modules are mentioned by most fields' names)."""
        if rel not in self._declared:
            declared: dict[str, set[tuple[str, str]]] = {}
            mod = self._index.module(rel) if b"Config" in self._index.data.get(rel, b"") else None
            classes = [c for c in ast.walk(mod.tree) if isinstance(c, ast.ClassDef) and c.name.endswith("Config")] \
                if mod is not None else []
            for stmt in (s for c in classes for s in c.body):
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                        and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                    assert mod is not None
                    declared.setdefault(stmt.target.id, set()).add((stmt.value.value, mod.where(stmt)))
            self._declared[rel] = declared
        return self._declared[rel]

    def named_by_xpu(self, string: str) -> bool:
        """Whether a module with `xpu` in its path writes `string` as a literal."""
        if self._xpu is None:
            self._xpu = b"\n".join(data for rel, data in self._index.data.items() if "xpu" in rel.lower())
        return re.search(rb"[\"']" + re.escape(string.encode()) + rb"[\"']", self._xpu) is not None


def default_of(v: Reads, defaults: Defaults, mod: Module, expr: ast.expr, depth: int,
               seen: frozenset[int] = frozenset()) -> tuple[str, str] | None:
    """The default string of the config value expr reads, and where that default is written (None: not a config
    read, or its default is not one string)."""
    if id(expr) in seen or depth > 4:
        return None
    seen = seen | {id(expr)}
    if isinstance(expr, ast.Call) and len(expr.args) == 3 - isinstance(expr.func, ast.Attribute) \
            and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in expr.args[-2:]) \
            and not expr.keywords:
        is_getattr = isinstance(expr.func, ast.Name) and expr.func.id == "getattr"
        is_get = isinstance(expr.func, ast.Attribute) and expr.func.attr == "get" \
            and _configish(v, mod, expr.func.value, depth)
        if is_getattr or is_get:
            key, default = (str(a.value) for a in expr.args[-2:] if isinstance(a, ast.Constant))
            declared = defaults.field(key) if is_getattr else None
            if declared is not None and declared[0] != default:
                return None
            return default, mod.where(expr)
        return None
    if isinstance(expr, ast.IfExp):
        both = [default_of(v, defaults, mod, e, depth, seen) for e in (expr.body, expr.orelse)]
        ones = [b for b in both if b is not None]
        consts = [e for e in (expr.body, expr.orelse) if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(ones) + len(consts) == 2 and len({d for d, _ in ones} | {str(c.value) for c in consts}) == 1:
            return ones[0] if ones else None
        return None
    if isinstance(expr, ast.Name):
        sources = v.assigned(mod, expr, depth + 1)
    elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls"):
        sources = v.attribute_values(mod, expr) or []
    elif isinstance(expr, ast.Attribute) and _config_name(expr.value):
        return defaults.field(expr.attr)
    else:
        return None
    reads = [default_of(v, defaults, m, e, depth + 1, seen) for m, e in sources]
    if not reads or None in reads or len({r[0] for r in reads if r is not None}) != 1:
        return None
    return reads[0]


def opt_in_test(v: Reads, defaults: Defaults, mod: Module, expr: ast.Compare, depth: int) -> tuple[bool, str] | None:
    """The truth on XPU of `config_value == "s"` (or `!=`) for a string s other than the value's default that no
    XPU module names, and why; None when this is not such a test."""
    if len(expr.ops) != 1 or not isinstance(expr.ops[0], (ast.Eq, ast.NotEq)):
        return None
    for a, b in ((expr.left, expr.comparators[0]), (expr.comparators[0], expr.left)):
        if not (isinstance(b, ast.Constant) and isinstance(b.value, str)):
            continue
        read = default_of(v, defaults, mod, a, depth)
        if read is None or read[0] == b.value or defaults.named_by_xpu(b.value):
            continue
        why = f"{read[1]}: an opt-in config value, {read[0]!r} unless a user sets it; no XPU module names {b.value!r}"
        return isinstance(expr.ops[0], ast.NotEq), why
    return None


def _configish(v: Reads, mod: Module, expr: ast.expr, depth: int) -> bool:
    """Whether expr is a config object: named as one, or a local assigned only from one
    (`extra = vllm_config.additional_config`)."""
    if _config_name(expr):
        return True
    sources = v.assigned(mod, expr, depth + 1) if isinstance(expr, ast.Name) else []
    return bool(sources) and all(_config_name(e) for _, e in sources)


def _config_name(expr: ast.expr) -> bool:
    """`kernel_config`, `vllm_config.additional_config`: a name or attribute whose last part says config."""
    name = expr.attr if isinstance(expr, ast.Attribute) else expr.id if isinstance(expr, ast.Name) else ""
    return "config" in name.lower()
