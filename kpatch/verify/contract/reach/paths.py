"""The call-path search: a call is reached on XPU when its function (or method, class, module) is, through the
uses of each up to MAX_DEPTH; a custom-op registration goes on through its `torch.ops.vllm` name."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from kpatch.verify.contract.reach import arguments, backends, nones, tables
from kpatch.verify.contract.reach.dispatch import FORWARDS, PLATFORMS_ON_XPU, platform_entry
from kpatch.verify.contract.reach.selection import CALLED_BY_TORCH, Selection
from kpatch.verify.contract.reach.source import Module, Scope, inside, is_torch_ops_vllm, text
from kpatch.verify.contract.reach.verdict import CYCLE, MAX_DEPTH, REACHED_UNKNOWN, Verdict


class Reach(Selection):
    """The XPU reachability of call sites in one application tree (parsed lazily, memoized)."""

    def __init__(self, root: Path, files: list[Path], defined: Callable[[str, str], bool]) -> None:
        super().__init__(root, files, defined)
        self._memo: dict[object, Verdict] = {}
        self._active: set[object] = set()
        self._stack: list[object] = []
        self._tainted: set[object] = set()
        self.unbound_on_xpu: dict[int, str] = {}  # id(a use) -> why the name it uses is not bound on XPU
        self._tables = tables.Tables(self)
        # per class: its uses, each with the methods a subclass using it defines (none when it calls super())
        self._subclass_uses: dict[tuple[str, str], list[tuple[Module, ast.AST, frozenset[str]]]] = {}

    def _memoized(self, key: object, compute: Callable[[], Verdict]) -> Verdict:
        """compute() once per key. A key asked for again while it is being computed (a cycle of callers or
        imports) is not reached through that cycle; results that leaned on such an assumption are not kept."""
        if key in self._memo:
            return self._memo[key]
        if key in self._active:
            self._tainted.update(self._stack[self._stack.index(key) + 1:])
            return CYCLE
        self._active.add(key)
        self._stack.append(key)
        try:
            verdict = compute()
        finally:
            self._stack.pop()
            self._active.discard(key)
        if key in self._tainted:
            self._tainted.discard(key)
        else:
            self._memo[key] = verdict
        return verdict

    def _too_deep(self) -> Verdict:
        """Reached, as far as the model can tell; what is being computed now depends on where it started from."""
        self._tainted.update(self._stack)
        return REACHED_UNKNOWN

    # ---- the entry point ------------------------------------------------------------------------------------

    def site(self, rel: str, line: int, op: str) -> Verdict:
        """Whether the use of op at rel:line is reached on XPU."""
        mod = self.module(rel)
        if mod is None:
            return REACHED_UNKNOWN
        node = next((n for n in mod.attributes.get(op, []) if n.lineno == line), None)
        if node is None:
            return REACHED_UNKNOWN
        return self.node(mod, node, 0)

    def node(self, mod: Module, node: ast.AST, depth: int) -> Verdict:
        guard = self.guard(mod, node)
        if guard:
            return Verdict(False, guard)
        cls, func = mod.unit(node)
        if cls is None and func is not None:
            tests = [(t, want) for t, want in arguments.branches(mod, node, func) if self.value(mod, t, depth) is None]
            if tests:
                return self._by_arguments(mod, func, tests, depth)
        return self.unit(mod, cls, func, depth)

    def _by_arguments(self, mod: Module, func: Scope, tests: list[tuple[ast.expr, bool]], depth: int) -> Verdict:
        """A node that runs only for some arguments of its function: reached through the calls that can pass
        them (a call whose constants, or the defaults, decide the branch the other way does not reach it)."""
        verdict = self.unit(mod, None, func, depth)
        if not verdict.reached:
            return verdict
        kept: list[tuple[Module, ast.AST]] = []
        reasons = []
        for other, ref in self.references(mod, func.name, skip=func):
            call = other.parents.get(ref)
            bound = arguments.bind(func, call) if isinstance(call, ast.Call) and call.func is ref else None
            against = next(((t, want) for t, want in tests if bound is not None
                            and arguments.decide(t, bound) is (not want)), None)
            if against is None:
                kept.append((other, ref))
            else:
                reasons.append(f"{other.where(ref)} (there `{text(against[0])}` is {str(not against[1]).lower()})")
        if not reasons:
            return verdict
        if kept:
            return self._all_refs(func.name, kept, depth) or verdict
        test, want = tests[0]
        more = f"; +{len(reasons) - 1} more" if len(reasons) > 1 else ""
        return Verdict(False, f"{mod.where(test)}: only if `{text(test)}` is {str(want).lower()}, which no call of "
                              f"{func.name} passes: {reasons[0]}{more}")

    def parameter_none(self, mod: Module, func: Scope, name: str, depth: int) -> str:
        """Every call of func (a top-level function, or a class's __init__ through the class) passes None for
        `name` on XPU (see nones.parameter_none); "" when a use of func is not a call the model can bind."""
        owner = mod.enclosing(func)
        cls = owner if isinstance(owner, ast.ClassDef) and mod.enclosing(owner) is None else None
        if cls is not None and func.name != "__init__":
            return nones.keyword_none(self, self, mod, func, name, lambda m, n, d: self.node(m, n, d).reached, depth)
        if owner is not None and cls is None:
            return ""
        top: ast.AST = cls if cls is not None else func
        named = cls.name if cls is not None else func.name
        calls: list[tuple[Module, ast.Call]] = []
        for other, ref in self.references(mod, named, skip=top):
            call = other.parents.get(ref)
            if not isinstance(call, ast.Call) or call.func is not ref:
                return ""  # passed on as a value (a factory, a partial): its calls are not read
            calls.append((other, call))
        return nones.parameter_none(self, func, name, calls, cls is not None, depth)

    # ---- units: functions, methods, classes, modules --------------------------------------------------------

    def unit(self, mod: Module, cls: ast.ClassDef | None, func: Scope | None, depth: int) -> Verdict:
        if cls is None and func is None:
            return self.module_reached(mod, depth)
        key = (mod.rel, cls.name if cls else "", func.name if func else "", depth == 0)  # see _function
        return self._memoized(key, lambda: self._unit(mod, cls, func, depth))

    def _unit(self, mod: Module, cls: ast.ClassDef | None, func: Scope | None, depth: int) -> Verdict:
        if depth > MAX_DEPTH:
            return self._too_deep()
        top = cls if cls is not None else func
        assert top is not None
        guard = self.guard(mod, top)  # a definition under `if current_platform.is_rocm():`
        if guard:
            return Verdict(False, guard)
        module = self.module_reached(mod, depth)
        if not module.reached:
            return module
        if cls is not None:
            return self._method(mod, cls, func, depth)
        assert func is not None
        return self._function(mod, func, depth)

    def _method(self, mod: Module, cls: ast.ClassDef, func: Scope | None, depth: int) -> Verdict:
        supported = self.method(mod, cls, "_supports_current_device")
        if supported and self.returns(supported[0], supported[1], depth) is False:
            return Verdict(False, f"{supported[0].where(supported[1])}: {cls.name}._supports_current_device() "
                                  "is false on XPU")
        platform = backends.other_platform(self, mod, cls, PLATFORMS_ON_XPU)
        if platform and func is not None and not self._named_through_class(mod, cls, func.name):
            return Verdict(False, f"{platform}: {cls.name}.{func.name} is another platform's; on XPU current_platform "
                                  "is XPU's class, and no code calls it through this one")
        if func is not None and func.name in FORWARDS and any(c.name == "CustomOp" for _, c in self.mro(mod, cls)):
            verdict = self._custom_op(mod, cls, func.name)
            if verdict is not None:
                return verdict
        if func is not None:
            override = self._xpu_override(mod, cls, func.name)
            if override:
                return Verdict(False, override)
        used = self.class_reached(mod, cls, depth)
        if not used.reached:
            return used
        if func is not None:
            narrowed = self._past_overrides(mod, cls, func, depth)
            if narrowed is not None:
                return narrowed
        if func is not None and not func.name.startswith("__") and func.name != "forward" \
                and not any(self.uses_attribute(rel, func.name) for rel in self.mentions(func.name) if rel != mod.rel) \
                and not self.in_quotes(func.name):
            refs: list[tuple[Module, ast.AST]] = [
                (m, n) for rel in self.mentions(func.name) if (m := self.module(rel)) is not None
                for n in m.attributes.get(func.name, []) if not inside(m, n, func)]
            if refs and all(m is mod and isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                            and n.value.id in ("self", "cls") for m, n in refs):
                return self._all_refs(f"{cls.name}.{func.name}", refs, depth) or REACHED_UNKNOWN  # only self calls it
        uses = self._uses_by_name(func) if func is not None and not func.name.startswith("__") \
            and func.name not in CALLED_BY_TORCH else None
        if uses and func is not None:
            return self._all_refs(f"{cls.name}.{func.name}", self._own_first(mod, cls, uses), depth) or REACHED_UNKNOWN
        return REACHED_UNKNOWN

    def _past_overrides(self, mod: Module, cls: ast.ClassDef, func: Scope, depth: int) -> Verdict | None:
        """A method is not run through a class built on its class that defines a method of the same name in its
        own body and calls nothing through `super()`: the subclass's instances run the override. So when some uses
        of cls are such subclasses, the method is reached only through the others (and through calls of it by
        name); not reached when none of those is. None: no such subclass, no other use, or the class is named in
        quotes (loaded by rules the model does not read)."""
        if f"{mod.name}.{cls.name}" in self.quoted():
            return None
        key = (mod.rel, cls.name)
        if key not in self._subclass_uses:
            uses = []
            for other, ref in self.references(mod, cls.name, skip=cls):
                sub = other.parents.get(ref)
                defines: frozenset[str] = frozenset()
                if isinstance(sub, ast.ClassDef) and ref in sub.bases \
                        and not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "super"
                                    for n in ast.walk(sub)):
                    defines = frozenset(n.name for n in sub.body
                                        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
                uses.append((other, ref, defines))
            self._subclass_uses[key] = uses
        kept: list[tuple[Module, ast.AST]] = []
        overrides: list[str] = []
        for other, ref, defines in self._subclass_uses[key]:
            sub = other.parents.get(ref)
            if func.name in defines and isinstance(sub, ast.ClassDef):
                overrides.append(f"{other.where(sub)} {sub.name}")
            else:
                kept.append((other, ref))
        if not overrides or not kept:
            return None
        verdict = self._all_refs(f"class {cls.name}", kept, depth)
        if verdict is None or verdict.reached:
            return None
        return Verdict(False, f"{cls.name}.{func.name} is overridden, without super(), by {overrides[0]} (a use of "
                              f"{cls.name} that runs the override); {verdict.why}")

    def _own_first(self, mod: Module, cls: ast.ClassDef, uses: list[tuple[Module, ast.AST]]
                   ) -> list[tuple[Module, ast.AST]]:
        """A method's uses by name, those surely of this method first: `self.name` or `cls.name` in a class built on
        cls, then any in cls's module, then the rest (a same-named method of an unrelated class, in another module,
        as two models' `Attention` classes are). Every use is still followed; the order only decides which reached
        use the path names."""
        def rank(item: tuple[Module, ast.AST]) -> int:
            other, node = item
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in ("self", "cls"):
                owner, _ = other.unit(node)
                if owner is not None and any(c is cls for _, c in self.mro(other, owner)):
                    return 0
            return 1 if other is mod else 2
        return sorted(uses, key=rank)

    def class_reached(self, mod: Module, cls: ast.ClassDef, depth: int) -> Verdict:
        return self._memoized(("class", mod.rel, cls.name), lambda: self._class(mod, cls, depth))

    def _class(self, mod: Module, cls: ast.ClassDef, depth: int) -> Verdict:
        refs: list[tuple[Module, ast.AST]] = []
        unselected = ""
        if f"{mod.name}.{cls.name}" in self.quoted():
            unselected, refs = self._unselected_backend(f"{mod.name}.{cls.name}")
            if not unselected:
                quoted = self._path_strings(mod, cls)
                if quoted is None:
                    return REACHED_UNKNOWN  # named in a string (a registry): chosen by rules the model does not read
                refs = quoted
        verdict = self._all_refs(f"class {cls.name}", [*refs, *self.references(mod, cls.name, skip=cls)], depth)
        if verdict is None:
            # named only by a string (a registry), or not at all: not derived
            return Verdict(False, unselected) if unselected else REACHED_UNKNOWN
        return Verdict(False, f"{unselected}; {verdict.why}") if unselected and not verdict.reached else verdict

    def _path_strings(self, mod: Module, cls: ast.ClassDef) -> list[tuple[Module, ast.AST]] | None:
        """The strings that name cls by its path (`"pkg.mod.Class"`, `"pkg.mod:Class"`), each a whole string
        constant in code, as a platform's `get_device_communicator_cls` returns its class's path: the class is
        loaded by name only where one of them is used. None when the path is written any other way (a comment, a
        longer name, an f-string), or the class's name alone is in quotes (`getattr(module, "Class")`)."""
        if self.in_quotes(cls.name):
            return None
        paths = {f"{mod.name}.{cls.name}", f"{mod.name}:{cls.name}"}
        written = re.compile(b"|".join(re.escape(p.encode()) for p in paths))
        out: list[tuple[Module, ast.AST]] = []
        for rel in self.mentions(cls.name):
            count = len(written.findall(self.data[rel]))
            if not count:
                continue
            other = self.module(rel)
            if other is None:
                return None
            found = [n for n in ast.walk(other.tree) if isinstance(n, ast.Constant) and n.value in paths
                     and not isinstance(other.parents.get(n), ast.Expr)]
            if len(found) != count:
                return None
            out += [(other, n) for n in found]
        return out or None

    def _function(self, mod: Module, func: Scope, depth: int) -> Verdict:
        verdict = self._all_refs(func.name, self.references(mod, func.name, skip=func), depth)
        if verdict is None:
            # Dead code: the calling function itself is never used, though its module is imported. A function
            # deeper up, or one in a module nothing imports, may be an entry point (a script, a plugin's API).
            if depth > 0 or self._unresolved_uses(mod, func.name) \
                    or not any(rel != mod.rel for rel, _ in self.importers(mod.name)):
                return REACHED_UNKNOWN
            return Verdict(False, f"{mod.where(func)}: nothing in the application uses {func.name} (its module "
                                  "is imported for other names)")
        return verdict

    def _unresolved_uses(self, mod: Module, name: str) -> bool:
        return any(self.uses_attribute(rel, name) for rel in self.mentions(name) if rel != mod.rel)

    def _all_refs(self, what: str, refs: Iterable[tuple[Module, ast.AST]], depth: int) -> Verdict | None:
        """Not reached when no use is (None: there are none), reached at the first use that is."""
        reasons = []
        for other, ref in refs:
            verdict = self._reference(other, ref, depth + 1)
            if verdict.reached:
                path = f"{other.where(ref)}: {what} used here" + (f"; {verdict.why}" if verdict.why else "")
                return Verdict(True, path)
            reasons.append(f"{other.where(ref)} ({verdict.why})")
        if not reasons:
            return None
        more = f"; +{len(reasons) - 1} more, none reached" if len(reasons) > 1 else ""
        return Verdict(False, f"{what} is used only where XPU does not run: {reasons[0]}{more}")

    def _reference(self, mod: Module, ref: ast.AST, depth: int) -> Verdict:
        """A use of a function or class: `op_func=` of a custom-op registration goes on through its op name."""
        if id(ref) in self.unbound_on_xpu:
            return Verdict(False, self.unbound_on_xpu[id(ref)])
        other_platform = platform_entry(mod, ref)
        if other_platform:
            return Verdict(False, f"{mod.where(ref)}: listed only under {other_platform} in a table keyed by "
                                  "platform, which XPU looks up under PlatformEnum.XPU")
        tested = self._tables.membership_only(mod, ref)
        if tested:
            return Verdict(False, tested)
        parent = mod.parents.get(ref)
        if isinstance(parent, ast.keyword) and parent.arg == "op_func":
            call = mod.parents.get(parent)
            name = next((k.value.value for k in getattr(call, "keywords", []) if k.arg == "op_name"
                         and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)), None)
            guard = self.guard(mod, ref)
            if guard:
                return Verdict(False, guard)
            if name:
                uses: list[tuple[Module, ast.AST]] = [
                    (m, n) for rel in self.mentions(name) if b"vllm" in self.data[rel]
                    and self.uses_attribute(rel, name) and (m := self.module(rel)) is not None
                    for n in m.attributes.get(name, []) if is_torch_ops_vllm(n.value)]
                if not uses:
                    return Verdict(False, f"{mod.where(ref)}: registered as torch.ops.vllm.{name}, which nothing "
                                          "calls")
                return self._all_refs(f"torch.ops.vllm.{name}", uses, depth) or REACHED_UNKNOWN
        return self.node(mod, ref, depth)

    def references(self, mod: Module, name: str, skip: ast.AST) -> Iterator[tuple[Module, ast.AST]]:
        """Uses of the top-level `name` defined in mod, anywhere: the name where it is bound to that definition,
        `x.name` where x is that module; not inside the definition itself, annotations or isinstance checks; and
        its import into a module a registry names in quotes with the name (`("pkg", "Model")`).
        A use whose binding (the import) never runs on XPU is noted in self.unbound_on_xpu."""
        parts = mod.name.split(".")
        importers = {rel for i in range(2, len(parts) + 1) for rel, _ in self.importers(".".join(parts[:i]))}
        for rel in self.mentions(name):
            if rel != mod.rel and rel not in importers:
                continue  # a file that does not import mod (or its package) cannot use its `name`
            other = self.module(rel)
            if other is None:
                continue
            direct = [node for source, attr, node in other.imports.get(name, []) if self._same(source, attr, mod, name)]
            local = rel == mod.rel or bool(direct)
            aliases = {alias: [node for source, attr, node in bound if self._is_module(source, attr, mod)]
                       for alias, bound in other.imports.items()}
            aliases = {alias: nodes for alias, nodes in aliases.items() if nodes}
            uses: list[ast.expr] = [*(other.names.get(name, []) if local else []), *other.attributes.get(name, [])]
            for node in uses:
                if isinstance(node, ast.Name):
                    binding = direct if rel != mod.rel else []
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                        and node.value.id in aliases:
                    binding = aliases[node.value.id]
                else:
                    continue
                if inside(other, node, skip) or self._passive(other, node):
                    continue
                guards = [self.guard(other, b) for b in binding]
                if binding and all(guards):
                    self.unbound_on_xpu[id(node)] = f"bound by an import that XPU does not run: {guards[0]}"
                yield other, node
            if direct and rel != mod.rel and other.name in self.quoted() and self.registered(other.name, name):
                yield from ((other, node) for node in direct)  # re-exported where a registry looks it up by name

    def _same(self, source: str, attr: str | None, mod: Module, name: str) -> bool:
        return attr == name and (source == mod.name or self._reexports(source, mod, name))

    def _reexports(self, source: str, mod: Module, name: str) -> bool:
        other = self.module_named(source)
        return other is not None and any(s == mod.name and a == name for s, a, _ in other.imports.get(name, []))

    @staticmethod
    def _is_module(source: str, attr: str | None, mod: Module) -> bool:
        return (source if attr is None else f"{source}.{attr}") == mod.name

    @staticmethod
    def _passive(mod: Module, node: ast.AST) -> bool:
        """A use that runs nothing: an annotation, an isinstance/issubclass check, an except clause, __all__."""
        child, parent = node, mod.parents.get(node)
        while parent is not None:
            if isinstance(parent, ast.arg) or (isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef))
                                               and child is parent.returns) \
                    or (isinstance(parent, ast.AnnAssign) and child is parent.annotation):
                return True
            if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) \
                    and parent.func.id in ("isinstance", "issubclass") and child is not parent.func:
                return True
            if isinstance(parent, ast.ExceptHandler) and child is parent.type:
                return True
            if isinstance(parent, ast.keyword) and parent.arg == "fake_impl":
                return True
            if isinstance(parent, ast.stmt):
                return False
            child, parent = parent, mod.parents.get(parent)
        return False

    def module_reached(self, mod: Module, depth: int) -> Verdict:
        return self._memoized(("module", mod.name), lambda: self._module(mod, depth))

    def _module(self, mod: Module, depth: int) -> Verdict:
        """A module is not reached when every import of it is not (a package's __init__ is left alone)."""
        if depth > MAX_DEPTH:
            return self._too_deep()
        if mod.rel.endswith("__init__.py"):
            return REACHED_UNKNOWN
        if mod.name in self.quoted():
            return REACHED_UNKNOWN  # imported by name (a registry, importlib)
        reasons = []
        for rel, indented in self.importers(mod.name):
            if rel == mod.rel:
                continue
            if not indented:  # a module-level import: reached when its module is
                importer = self.module_named(rel[:-3].replace("/", ".").removesuffix(".__init__"))
                if importer is None:
                    continue
                verdict = self.module_reached(importer, depth + 1)
                if verdict.reached:
                    return REACHED_UNKNOWN
                reasons.append(f"{rel} ({verdict.why})")
                continue
            other = self.module(rel)
            if other is None:
                continue
            for node in ast.walk(other.tree):
                if not self._imports(other, node, mod.name):
                    continue
                verdict = self.node(other, node, depth + 1)
                if verdict.reached:
                    return REACHED_UNKNOWN
                reasons.append(f"{other.where(node)} ({verdict.why})")
        if not reasons:
            return REACHED_UNKNOWN
        more = f"; +{len(reasons) - 1} more, none reached" if len(reasons) > 1 else ""
        return Verdict(False, f"module {mod.name} is imported only where XPU does not run: {reasons[0]}{more}")

    @staticmethod
    def _imports(mod: Module, node: ast.AST, name: str) -> bool:
        if isinstance(node, ast.Import):
            return any(a.name == name or a.name.startswith(name + ".") for a in node.names)
        if isinstance(node, ast.ImportFrom):
            base = mod.absolute(node)
            return base == name or base.startswith(name + ".") or any(f"{base}.{a.name}" == name for a in node.names)
        return False
