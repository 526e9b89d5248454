"""The application's files: parsed lazily, indexed by word, quoted dotted names and imports; names resolved to
their definitions (functions, classes, methods through bases)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

from kpatch.verify.contract.reach.source import Module, Scope

_QUOTED_MODULE = re.compile(rb"[\"']([A-Za-z_]\w*(?:\.\w+)+)(?::(\w+))?[\"']")  # "a.b.c", "a.b:C"
_WORD = re.compile(rb"[A-Za-z_]\w*")
_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)|import[ \t]+([^\n]+))",
                     re.MULTILINE)



class Index:
    """The source of one application tree, parsed lazily."""

    def __init__(self, root: Path, files: list[Path], defined: Callable[[str, str], bool]) -> None:
        self.root = root
        self.defined = defined  # whether the kernels define ns.op (so `hasattr(torch.ops.ns, "op")` is true)
        self.data: dict[str, bytes] = {}
        self.by_module: dict[str, str] = {}
        for path in files:
            rel = path.relative_to(root).as_posix()
            self.data[rel] = path.read_bytes()
            self.by_module[rel[:-3].replace("/", ".").removesuffix(".__init__")] = rel
        self._modules: dict[str, Module | None] = {}
        self._importers: dict[str, set[tuple[str, bool]]] | None = None
        self._words: dict[bytes, list[str]] | None = None
        self._quoted: set[str] | None = None  # every dotted prefix of a dotted name in quotes anywhere

    # ---- files ----------------------------------------------------------------------------------------------

    def module(self, rel: str) -> Module | None:
        if rel not in self._modules:
            try:
                tree = ast.parse(self.data[rel], filename=rel)
            except (SyntaxError, ValueError):
                self._modules[rel] = None
            else:
                self._modules[rel] = Module(rel, rel[:-3].replace("/", ".").removesuffix(".__init__"), tree)
        return self._modules[rel]

    def mentions(self, word: str) -> list[str]:
        """The files whose text has word as a whole word (an identifier, or a part of a dotted name)."""
        if self._words is None:
            self._words = {}
            for rel, data in self.data.items():
                for token in set(_WORD.findall(data)):
                    self._words.setdefault(token, []).append(rel)
        return self._words.get(word.encode(), []) if word.isidentifier() else \
            [rel for rel, data in self.data.items() if word.encode() in data]

    def quoted(self) -> set[str]:
        """Dotted names written in quotes (and each of their prefixes): modules or classes imported by name, as
        a registry does ("pkg.mod.Class", "pkg.mod:Class")."""
        if self._quoted is None:
            self._quoted = set()
            for data in self.data.values():
                for dotted, attr in _QUOTED_MODULE.findall(data):
                    parts = dotted.decode().split(".") + ([attr.decode()] if attr else [])
                    self._quoted.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))
        return self._quoted

    def registered(self, module: str, name: str) -> bool:
        """Whether a file other than the module's own names both in quotes, as a registry names what it imports
        (`"Model": ("pkg.models", "Model")`)."""
        own = self.by_module.get(module)
        quoted_name = re.compile(rb"[\"']" + re.escape(name.encode()) + rb"[\"']")
        quoted_module = re.compile(rb"[\"']" + re.escape(module.encode()) + rb"[\"']")
        return any(quoted_name.search(self.data[rel]) and quoted_module.search(self.data[rel])
                   for rel in self.mentions(name) if rel != own)

    def uses_attribute(self, rel: str, name: str) -> bool:
        """Whether the text of rel has `.name` (without parsing it)."""
        return re.search(rb"\.\s*" + re.escape(name.encode()) + rb"\b", self.data[rel]) is not None

    def importers(self, name: str) -> list[tuple[str, bool]]:
        """(file, whether the import is indented) for every import statement naming module `name` (or a
        submodule, or `from pkg import leaf`), from a textual index of every file's imports: parsing all of them
        would take many seconds, and an unindented import runs whenever its module does."""
        if self._importers is None:
            index: dict[str, set[tuple[str, bool]]] = {}
            for rel, data in self.data.items():
                package = rel[:-3].replace("/", ".").removesuffix(".__init__").split(".")
                package = package if rel.endswith("__init__.py") else package[:-1]
                for m in _IMPORT.finditer(data):
                    indented = m.group(0)[:1] in (b" ", b"\t")
                    if m.group(3) is not None:
                        for part in m.group(3).decode(errors="replace").split("#")[0].split(","):
                            index.setdefault(part.strip().split(" ")[0], set()).add((rel, indented))
                        continue
                    base = m.group(1).decode(errors="replace")
                    dots = len(base) - len(base.lstrip("."))
                    if dots:
                        base = ".".join(package[:len(package) - dots + 1] + ([base[dots:]] if base[dots:] else []))
                    index.setdefault(base, set()).add((rel, indented))
                    for word in re.findall(r"\w+", m.group(2).decode(errors="replace").split("#")[0]):
                        index.setdefault(f"{base}.{word}", set()).add((rel, indented))
            self._importers = {}
            for module, files in index.items():  # under the module and each of its packages
                parts = module.split(".")
                for i in range(1, len(parts) + 1):
                    self._importers.setdefault(".".join(parts[:i]), set()).update(files)
        return sorted(self._importers.get(name, set()), key=lambda f: (f[1], f[0]))  # unindented imports first

    # ---- resolution -----------------------------------------------------------------------------------------

    def module_named(self, name: str) -> Module | None:
        rel = self.by_module.get(name)
        return self.module(rel) if rel else None

    def resolve(self, mod: Module, name: str, depth: int = 0
                ) -> tuple[Module, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] | None:
        """A top-level function or class named `name` in mod, defined there or imported."""
        if name in mod.defs:
            return mod, mod.defs[name]
        for source, attr, _ in mod.imports.get(name, []):
            if attr is None or depth > 3:
                continue
            other = self.module_named(source)
            if other is not None:
                found = self.resolve(other, attr, depth + 1)
                if found:
                    return found
        return None

    def resolve_function(self, mod: Module, func: ast.expr) -> tuple[Module, Scope] | None:
        found: tuple[Module, ast.AST] | None = None
        if isinstance(func, ast.Name):
            found = self.resolve(mod, func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id in ("self", "cls"):
                cls, _ = mod.unit(func)
                found = self.method(mod, cls, func.attr) if cls is not None else None
            else:
                for source, attr, _ in mod.imports.get(func.value.id, []):
                    other = self.module_named(source if attr is None else f"{source}.{attr}")
                    if other is not None and func.attr in other.defs:
                        found = other, other.defs[func.attr]
                        break
                else:
                    owner = self.resolve(mod, func.value.id)
                    if owner and isinstance(owner[1], ast.ClassDef):
                        found = self.method(owner[0], owner[1], func.attr)
        if found and isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
            return found[0], found[1]
        return None

    def bases(self, mod: Module, cls: ast.ClassDef) -> list[tuple[Module, ast.ClassDef]]:
        out = []
        for base in cls.bases:
            name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
            found = self.resolve(mod, name) if name else None
            if found and isinstance(found[1], ast.ClassDef) and found[1] is not cls:
                out.append((found[0], found[1]))
        return out

    def mro(self, mod: Module, cls: ast.ClassDef) -> list[tuple[Module, ast.ClassDef]]:
        out: list[tuple[Module, ast.ClassDef]] = []
        stack, seen = [(mod, cls)], set()
        while stack and len(out) < 30:
            m, c = stack.pop(0)
            if id(c) in seen:
                continue
            seen.add(id(c))
            out.append((m, c))
            stack.extend(self.bases(m, c))
        return out

    def method(self, mod: Module, cls: ast.ClassDef, name: str) -> tuple[Module, Scope] | None:
        for m, c in self.mro(mod, cls):
            for node in c.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                    return m, node
        return None
