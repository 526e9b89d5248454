"""Attention backends on XPU: the XPU platform class's `get_attn_backend_cls` picks the backend vLLM runs, by
returning a class path (`AttentionBackendEnum.NAME.get_path()`, or the path in quotes). A backend class that an
enum of class paths names only as the value of a member that selector never returns, and whose member no code
reached on XPU names (a comparison with it aside), is loaded only by other platforms' selectors: not on XPU.

Each answer comes with its line; anything not read this way (a path in quotes elsewhere than as such a member, a
selector that names a member standing for no literal path) leaves the backend reached."""

from __future__ import annotations

import ast
import re

from kpatch.verify.contract.reach.index import Index
from kpatch.verify.contract.reach.source import Module, text

PLATFORM_METHOD = "get_attn_backend_cls"
_CLASS_PATH = re.compile(r"^[A-Za-z_]\w*(?:\.\w+)+\.[A-Z]\w*$")


def xpu_selector(index: Index) -> tuple[Module, ast.FunctionDef] | None:
    """The XPU platform class's `get_attn_backend_cls`, where the application picks an attention backend on XPU."""
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
                    return mod, method
    return None


def _is_xpu_platform(cls: ast.ClassDef) -> bool:
    return any(isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None
               and text(n.value) == "PlatformEnum.XPU" for n in cls.body)


def selected_paths(index: Index, mod: Module, method: ast.FunctionDef) -> set[str] | None:
    """The class paths of the backends the selector can return: enum members it names (resolved to the class path
    each stands for) and class paths in quotes. None when a member it names stands for no literal class path."""
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
    return paths


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


def enum_members(index: Index, qualified: str) -> list[tuple[Module, ast.Assign, str]] | None:
    """Where a class path in quotes (`"pkg.mod.Class"` or `"pkg.mod:Class"`) is written, as the members of enums of
    class paths that stand for it: (module, the member's assignment, its name). None when it is written anywhere
    else (a registry, an import by name), or not found as a whole literal."""
    module, _, name = qualified.rpartition(".")
    forms = {qualified, f"{module}:{name}"}
    found: list[tuple[Module, ast.Assign, str]] = []
    for rel in index.mentions(name):
        mod = index.module(rel)
        if mod is None:
            continue
        for node in ast.walk(mod.tree):
            if not (isinstance(node, ast.Constant) and node.value in forms):
                continue
            assign = mod.parents.get(node)
            enum = mod.parents.get(assign) if assign is not None else None
            if not (isinstance(assign, ast.Assign) and assign.value is node and len(assign.targets) == 1
                    and isinstance(assign.targets[0], ast.Name) and isinstance(enum, ast.ClassDef)
                    and _member(enum, assign.targets[0].id)):
                return None
            found.append((mod, assign, assign.targets[0].id))
    return found or None


def member_uses(index: Index, member: str) -> list[tuple[Module, ast.Attribute]]:
    """The uses of `<Enum>.member` that may load its backend: every one but a comparison with it
    (`selected == Enum.MEMBER`, `backend in (Enum.A, Enum.B)`)."""
    out = []
    for rel in index.mentions(member):
        mod = index.module(rel)
        if mod is None:
            continue
        for node in mod.attributes.get(member, []):
            parent = mod.parents.get(node)
            if isinstance(parent, (ast.Tuple, ast.List, ast.Set)):
                parent = mod.parents.get(parent)
            if not isinstance(parent, ast.Compare):
                out.append((mod, node))
    return out


def other_platform(index: Index, mod: Module, cls: ast.ClassDef, on_xpu: frozenset[str]) -> str:
    """`vllm/platforms/cuda.py:227: PlatformEnum.CUDA` when cls (or a base) is the platform class of a platform other
    than XPU's (its body assigns that PlatformEnum member) and no XPU platform class is built on it: on XPU
    `current_platform` is XPU's own class, so such a class's methods run only where code names the class itself.
    "" otherwise."""
    for rel in index.mentions("PlatformEnum"):
        other = index.module(rel) if b"PlatformEnum.XPU" in index.data[rel] else None
        if other is None:
            continue
        for c in other.defs.values():
            if isinstance(c, ast.ClassDef) and any(b is cls for _, b in index.mro(other, c)) \
                    and any(isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None
                            and text(n.value) == "PlatformEnum.XPU" for _, k in index.mro(other, c) for n in k.body):
                return ""  # an XPU platform class inherits it
    for m, c in index.mro(mod, cls):
        for node in c.body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) \
                    and value.value.id == "PlatformEnum":
                return "" if value.attr in on_xpu else f"{m.where(node)}: {text(value)}"
    return ""
