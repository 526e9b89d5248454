"""What the XPU platform selects: the attention backend its selector returns, its own platform class (not another
platform's), and so which methods can run at all: a method whose every call by name is off XPU is not reached."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

from kpatch.verify.contract.reach import backends
from kpatch.verify.contract.reach.dispatch import Dispatch
from kpatch.verify.contract.reach.source import Module, Scope, inside

MAX_NAME_USES = 16  # a method called by name in more places is left reached: its callers are too many to follow
# methods torch calls by name, unseen in the application's text (a module's forward, an autograd Function's backward)
CALLED_BY_TORCH = frozenset({"forward", "backward", "setup_context", "jvp", "vjp", "extra_repr"})


class Selection(Dispatch):
    """The uses that decide whether a backend class or a method can run on XPU (the call-path search follows them)."""

    def __init__(self, root: Path, files: list[Path], defined: Callable[[str, str], bool]) -> None:
        super().__init__(root, files, defined)
        # XPU's attention backend selector and the class paths it returns, once read
        self._selection: tuple[tuple[Module, ast.FunctionDef] | None, set[str] | None] | None = None

    def _unselected_backend(self, qualified: str) -> tuple[str, list[tuple[Module, ast.AST]]]:
        """Why the backend class at `qualified`, named in quotes only by enum members, is not what XPU's backend
        selector returns, and the uses of those members that may load it anyway; "" when it may be selected."""
        if self._selection is None:
            selector = backends.xpu_selector(self)
            self._selection = selector, backends.selected_paths(self, *selector) if selector is not None else None
        selector, paths = self._selection
        members = backends.enum_members(self, qualified)
        if selector is None or paths is None or members is None or qualified in paths:
            return "", []
        uses: list[tuple[Module, ast.AST]] = [u for _, _, name in members for u in backends.member_uses(self, name)]
        where, name = members[0][0].where(members[0][1]), members[0][2]
        return f"{where}: {name}, an attention backend {selector[0].where(selector[1])} {selector[1].name} (the XPU " \
               f"platform's choice) never returns", uses

    def _named_through_class(self, mod: Module, cls: ast.ClassDef, name: str) -> bool:
        """Whether any file calls `Cls.name` through cls or a class of its module built on it: in its code, or in a
        string it may use (a qualified name resolved at run time); not in a comment or a docstring (a string
        written as a statement of its own), which run nothing. A file that does not parse counts."""
        names = [c.name for c in mod.defs.values() if isinstance(c, ast.ClassDef)
                 and any(b is cls for _, b in self.mro(mod, c))]
        pattern = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in names) + rb")\s*\.\s*"
                             + re.escape(name.encode()) + rb"\b")
        for rel in self.mentions(name):
            if not pattern.search(self.data[rel]):
                continue
            other = self.module(rel)
            if other is None:
                return True
            if any(isinstance(use.value, ast.Name) and use.value.id in names for use in other.attributes.get(name, [])):
                return True
            if any(isinstance(n, ast.Constant) and isinstance(n.value, str)
                   and not isinstance(other.parents.get(n), ast.Expr)
                   and pattern.search(n.value.encode(errors="replace")) for n in ast.walk(other.tree)):
                return True
        return False

    def in_quotes(self, name: str) -> bool:
        """Whether some file writes name in quotes (`getattr(obj, "name")` may call a method of that name)."""
        quoted = re.compile(rb"[\"']" + re.escape(name.encode()) + rb"[\"']")
        return any(quoted.search(self.data[rel]) for rel in self.mentions(name))

    def _uses_by_name(self, func: Scope) -> list[tuple[Module, ast.AST]] | None:
        """Every `x.name` in the application for a method's name (through any object: the model does not know the
        types), not counting the method's own body; None when there are more than MAX_NAME_USES, or the name is
        also written in quotes (`getattr(obj, "name")`), or is a top-level name of some file."""
        rels = self.mentions(func.name)
        if len(rels) > MAX_NAME_USES or self.in_quotes(func.name):
            return None
        uses: list[tuple[Module, ast.AST]] = []
        for rel in rels:
            other = self.module(rel)
            if other is None or func.name in other.defs or func.name in other.imports:
                return None
            uses += [(other, n) for n in other.attributes.get(func.name, []) if not inside(other, n, func)]
            if len(uses) > MAX_NAME_USES:
                return None
        return uses
