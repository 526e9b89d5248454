"""torch.cuda on XPU: vLLM's XPU build runs a torch built for XPU, without CUDA. Its `torch.cuda` state is false
(`is_available()`), and a query of a CUDA device (`torch.cuda.get_device_capability()`, `get_device_properties`,
`current_device`, ...) raises (torch's `_lazy_init`: "Torch not compiled with CUDA enabled"), so a statement that
always evaluates one ends its function there: `if torch.cuda.get_device_capability(dev)[0] != 10: raise ...`
refuses XPU, whatever the test would have said.

The application may replace a `torch.cuda` function with XPU's (vLLM's XPU model runner sets
`torch.cuda.is_current_stream_capturing = torch.xpu.is_current_stream_capturing`): a name it assigns so is not
taken for either (`patched`)."""

from __future__ import annotations

import ast
import re

from kpatch.verify.contract.reach.index import Index

# torch.cuda's state, false on a machine whose torch drives an XPU (no CUDA device, no CUDA stream to capture)
FALSE_ON_XPU = frozenset({"is_available", "is_initialized", "is_current_stream_capturing"})
# torch.cuda functions that initialise CUDA first, which raises in a torch built without it
RAISES_ON_XPU = frozenset({"get_device_capability", "get_device_properties", "get_device_name", "current_device",
                           "mem_get_info", "synchronize"})
_ASSIGNED = re.compile(rb"\btorch\s*\.\s*cuda\s*\.\s*(\w+)\s*=(?!=)|setattr\(\s*torch\s*\.\s*cuda\s*,\s*[\"'](\w+)")


def patched(index: Index) -> frozenset[str]:
    """The `torch.cuda` names the application assigns anywhere (`torch.cuda.NAME = ...`, `setattr(torch.cuda,
    "NAME", ...)`): on XPU they may be XPU's own functions."""
    names: set[str] = set()
    for rel in index.mentions("cuda"):
        for m in _ASSIGNED.finditer(index.data[rel]):
            names.add((m.group(1) or m.group(2)).decode())
    return frozenset(names)


def is_torch_cuda(expr: ast.expr) -> bool:
    """`torch.cuda` (or `cuda` imported from torch, as vLLM does not)."""
    return isinstance(expr, ast.Attribute) and expr.attr == "cuda" and isinstance(expr.value, ast.Name) \
        and expr.value.id == "torch"


def raising_call(stmt: ast.stmt, unpatched: frozenset[str]) -> ast.Call | None:
    """A call of a CUDA device query (one of RAISES_ON_XPU, not in `patched`) that `stmt` always evaluates: in the
    test of an `if`, `while` or `assert`, or the value of an expression statement or assignment, and not behind an
    `and`/`or` after its first operand, a branch of `a if c else b`, a lambda or a comprehension. None otherwise."""
    roots: list[ast.expr | None] = []
    if isinstance(stmt, (ast.If, ast.While, ast.Assert)):
        roots = [stmt.test]
    elif isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign)):
        roots = [stmt.value]
    for root in roots:
        found = _always(root, unpatched) if root is not None else None
        if found is not None:
            return found
    return None


def _always(expr: ast.expr, unpatched: frozenset[str]) -> ast.Call | None:
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in unpatched \
            and is_torch_cuda(expr.func.value):
        return expr
    if isinstance(expr, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        return None
    children: list[ast.AST]
    if isinstance(expr, ast.BoolOp):
        children = [expr.values[0]]
    elif isinstance(expr, ast.IfExp):
        children = [expr.test]
    elif isinstance(expr, ast.Compare):  # a chained comparison stops at its first false link
        children = [expr.left, expr.comparators[0]]
    else:
        children = list(ast.iter_child_nodes(expr))
    for child in children:
        if isinstance(child, ast.expr):
            found = _always(child, unpatched)
            if found is not None:
                return found
        elif isinstance(child, ast.keyword):
            found = _always(child.value, unpatched)
            if found is not None:
                return found
    return None
