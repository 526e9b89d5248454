"""Whether an op call in the application's Python is reached on XPU, read statically from its source.

vLLM picks code per platform in a handful of ways; each is modelled here, and each through its callers:
- a platform check (`current_platform.is_cuda()`, a capability check, `get_device_capability()`, which is None on
  XPU), a tensor-device guard (`x.is_cuda`), or `hasattr(torch.ops._C, "op")` for an op the kernels do not
  define, guarding the call, an early return before it, or a flag (local, `self.` attribute, module name) or a
  predicate function derived from them;
- a function whose every reference (call, `op_func=` of `direct_register_custom_op`, then `torch.ops.vllm.<name>`)
  is not reached; a module imported only where it is not reached (`if is_rocm(): from .amd import ...`);
- a class whose every reference is not reached (a quant method chosen after `if is_xpu(): return ...`);
- a backend class whose `_supports_current_device()` is false on XPU;
- a CustomOp's `forward_cuda` (or `_hip`, ...), when what XPU runs (`forward_xpu`, by default `forward_native`)
  does not call it;
- a method an XPU subclass (an `xpu` module, or `XPU` in its name) overrides without calling it.

Anything not derived this way is reached: the model dismisses a call only with a line of evidence, and says
which. Unknown values, references it cannot resolve and chains deeper than MAX_DEPTH count as reached.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_DEPTH = 6  # callers followed up from a call site before the model gives up (and calls it reached)
# Platform predicates that are false on XPU; `is_xpu` is the one that is true.
NON_XPU = frozenset({"is_cuda", "is_rocm", "is_cpu", "is_tpu", "is_cuda_alike", "is_out_of_tree",
                     "has_device_capability", "is_device_capability", "is_device_capability_family"})
_NON_XPU_PREFIXES = ("on_gfx",)  # ROCm architecture checks
_DEVICE_NAMES = {"xpu": True, "cuda": False, "rocm": False, "hip": False, "tpu": False, "cpu": False}
_FORWARDS = ("forward_cuda", "forward_hip", "forward_cpu", "forward_tpu", "forward_oot")

Value = bool | None  # on XPU: always true, always false, or not known
Scope = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Verdict:
    """Reached on XPU or not, and why: the guard or chain that keeps it off XPU, or the path that reaches it."""

    reached: bool
    why: str


REACHED_UNKNOWN = Verdict(True, "")
_QUOTED_MODULE = re.compile(rb"[\"']([A-Za-z_]\w*(?:\.\w+)+)(?::(\w+))?[\"']")  # "a.b.c", "a.b:C"
_WORD = re.compile(rb"[A-Za-z_]\w*")
_CYCLE = Verdict(False, "(a cycle of callers)")  # a call from itself does not reach it
_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)|import[ \t]+([^\n]+))",
                     re.MULTILINE)


class _Module:
    def __init__(self, rel: str, name: str, tree: ast.Module) -> None:
        self.rel, self.name, self.tree = rel, name, tree
        self.parents: dict[ast.AST, ast.AST] = {}
        self.names: dict[str, list[ast.Name]] = {}  # every use of a name, by name
        self.attributes: dict[str, list[ast.Attribute]] = {}  # every `x.attr`, by attr
        self.rebound: set[str] = set()  # names some function declares global (or nonlocal)
        self.imports: dict[str, list[tuple[str, str | None, ast.stmt]]] = {}  # name -> [(module, attr, import)]
        stack: list[ast.AST] = [tree]
        while stack:  # one pass over the tree (ast.walk and iter_child_nodes cost most of the time here)
            node = stack.pop()
            for field in node._fields:
                value = getattr(node, field, None)
                if isinstance(value, ast.AST):
                    self.parents[value] = node
                    stack.append(value)
                elif isinstance(value, list):
                    for child in value:
                        if isinstance(child, ast.AST):
                            self.parents[child] = node
                            stack.append(child)
            if isinstance(node, ast.Name):
                self.names.setdefault(node.id, []).append(node)
            elif isinstance(node, ast.Attribute):
                self.attributes.setdefault(node.attr, []).append(node)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                self.rebound.update(node.names)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    top = a.name.split(".")[0]
                    self.imports.setdefault(a.asname or top, []).append((a.name if a.asname else top, None, node))
            elif isinstance(node, ast.ImportFrom):
                base = self.absolute(node)
                for a in node.names:
                    self.imports.setdefault(a.asname or a.name, []).append((base, a.name, node))
        self.defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = {
            n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        for node in tree.body:  # defs under a top-level `if` (platform-selected definitions) count too
            if isinstance(node, (ast.If, ast.Try)):
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                            and self.enclosing(inner) is None:
                        self.defs.setdefault(inner.name, inner)

    def absolute(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        package = self.name.split(".") if self.rel.endswith("__init__.py") else self.name.split(".")[:-1]
        package = package[:len(package) - node.level + 1]
        return ".".join(package + ([node.module] if node.module else []))

    def function(self, node: ast.AST) -> Scope | None:
        """The function around node (through classes), or None at module level."""
        scope = self.enclosing(node)
        while isinstance(scope, ast.ClassDef):
            scope = self.enclosing(scope)
        return scope

    def enclosing(self, node: ast.AST) -> Scope | ast.ClassDef | None:
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            parent = self.parents.get(parent)
        return parent

    def unit(self, node: ast.AST) -> tuple[ast.ClassDef | None, Scope | None]:
        """The outermost function (or method of a top-level class) around node: what callers call."""
        chain: list[ast.AST] = []
        scope = self.enclosing(node)
        while scope is not None:
            chain.append(scope)
            scope = self.enclosing(scope)
        chain.reverse()
        if not chain:
            return None, None
        if isinstance(chain[0], ast.ClassDef):
            method = next((c for c in chain[1:2] if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
            return chain[0], method
        head = chain[0]
        assert isinstance(head, (ast.FunctionDef, ast.AsyncFunctionDef))
        return None, head

    def where(self, node: ast.AST) -> str:
        return f"{self.rel}:{getattr(node, 'lineno', 0)}"


def _text(node: ast.AST) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= 90 else text[:87] + "..."


def _terminates(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function or class body, without nested functions, classes or lambdas."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _is_torch_ops_vllm(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "vllm" and isinstance(node.value, ast.Attribute) \
        and node.value.attr == "ops"


class Reach:
    """The XPU reachability of call sites in one application tree (parsed lazily, memoized)."""

    def __init__(self, root: Path, files: list[Path], defined: Callable[[str, str], bool]) -> None:
        self.root = root
        self.defined = defined  # whether the kernels define ns.op (so `hasattr(torch.ops.ns, "op")` is true)
        self.data: dict[str, bytes] = {}
        self.by_module: dict[str, str] = {}
        for path in files:
            rel = path.relative_to(root).as_posix()
            self.data[rel] = path.read_bytes()
            self.by_module[rel[:-3].replace("/", ".").removesuffix(".__init__")] = rel
        self._modules: dict[str, _Module | None] = {}
        self._memo: dict[object, Verdict] = {}
        self._active: set[object] = set()
        self._stack: list[object] = []
        self._tainted: set[object] = set()
        self._importers: dict[str, set[tuple[str, bool]]] | None = None
        self._values: dict[int, Value] = {}
        self._words: dict[bytes, list[str]] | None = None
        self._guards: dict[tuple[int, int], str] = {}
        self._known: dict[int, Value] = {}  # id(expression) -> its value on XPU
        self._quoted: set[str] | None = None  # every dotted prefix of a dotted name in quotes anywhere
        self.unbound_on_xpu: dict[int, str] = {}  # id(a use) -> why the name it uses is not bound on XPU

    # ---- files ----------------------------------------------------------------------------------------------

    def module(self, rel: str) -> _Module | None:
        if rel not in self._modules:
            try:
                tree = ast.parse(self.data[rel], filename=rel)
            except (SyntaxError, ValueError):
                self._modules[rel] = None
            else:
                self._modules[rel] = _Module(rel, rel[:-3].replace("/", ".").removesuffix(".__init__"), tree)
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

    def uses_attribute(self, rel: str, name: str) -> bool:
        """Whether the text of rel has `.name` (without parsing it)."""
        return re.search(rb"\.\s*" + re.escape(name.encode()) + rb"\b", self.data[rel]) is not None

    def _memoized(self, key: object, compute: Callable[[], Verdict]) -> Verdict:
        """compute() once per key. A key asked for again while it is being computed (a cycle of callers or
        imports) is not reached through that cycle; results that leaned on such an assumption are not kept."""
        if key in self._memo:
            return self._memo[key]
        if key in self._active:
            self._tainted.update(self._stack[self._stack.index(key) + 1:])
            return _CYCLE
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

    def node(self, mod: _Module, node: ast.AST, depth: int) -> Verdict:
        guard = self.guard(mod, node)
        if guard:
            return Verdict(False, guard)
        cls, func = mod.unit(node)
        return self.unit(mod, cls, func, depth)

    # ---- guards ---------------------------------------------------------------------------------------------

    def guard(self, mod: _Module, node: ast.AST, stop: ast.AST | None = None, depth: int = 0) -> str:
        """Why node never runs on XPU, from the branches and early returns around it (up to `stop`), or ""."""
        key = (id(node), id(stop))
        if key not in self._guards:
            self._guards[key] = ""  # while it is being worked out (a flag that guards its own assignment)
            self._guards[key] = self._guard(mod, node, stop, depth)
        return self._guards[key]

    def _guard(self, mod: _Module, node: ast.AST, stop: ast.AST | None, depth: int) -> str:
        child = node
        parent = mod.parents.get(child)
        while parent is not None:
            if isinstance(parent, (ast.If, ast.IfExp)):
                in_body = child in parent.body if isinstance(parent, ast.If) else child is parent.body
                in_else = child in parent.orelse if isinstance(parent, ast.If) else child is parent.orelse
                if in_body or in_else:
                    value = self.value(mod, parent.test, depth)
                    if in_body and value is False:
                        return f"{mod.where(parent)}: only if `{_text(parent.test)}`, false on XPU"
                    if in_else and value is True:
                        return f"{mod.where(parent)}: only if not `{_text(parent.test)}`, true on XPU"
            elif isinstance(parent, ast.BoolOp) and child in parent.values:
                for earlier in parent.values[:parent.values.index(child)]:
                    value = self.value(mod, earlier, depth)
                    if value is (not isinstance(parent.op, ast.And)):
                        continue
                    if value is not None:
                        return f"{mod.where(earlier)}: after `{_text(earlier)}`, {str(value).lower()} on XPU"
            for field in ("body", "orelse", "finalbody"):
                stmts = getattr(parent, field, None)
                if isinstance(stmts, list) and child in stmts:
                    for sibling in stmts[:stmts.index(child)]:
                        if not isinstance(sibling, ast.If):
                            continue
                        value = self.value(mod, sibling.test, depth)
                        if value is True and _terminates(sibling.body):
                            return f"{mod.where(sibling)}: returns first if `{_text(sibling.test)}`, true on XPU"
                        if value is False and sibling.orelse and _terminates(sibling.orelse):
                            return f"{mod.where(sibling)}: returns first unless `{_text(sibling.test)}`, " \
                                   "false on XPU"
            if parent is stop:
                break
            child, parent = parent, mod.parents.get(parent)
        return ""

    # ---- values on XPU --------------------------------------------------------------------------------------

    def value(self, mod: _Module, expr: ast.expr, depth: int = 0) -> Value:
        """The truth of expr on XPU, when the platform alone decides it."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(expr, (ast.Name, ast.Attribute, ast.Call)):
            if id(expr) not in self._known:
                self._known[id(expr)] = None  # not known while it is being worked out
                self._known[id(expr)] = self._value(mod, expr, depth)
            return self._known[id(expr)]
        return self._value(mod, expr, depth)

    def _value(self, mod: _Module, expr: ast.expr, depth: int) -> Value:
        if isinstance(expr, ast.Constant):
            return bool(expr.value) if isinstance(expr.value, (bool, type(None))) else None
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            inner = self.value(mod, expr.operand, depth)
            return None if inner is None else not inner
        if isinstance(expr, ast.BoolOp):
            values = [self.value(mod, v, depth) for v in expr.values]
            stop = not isinstance(expr.op, ast.And)  # the value that decides an and (False) / an or (True)
            if stop in values:
                return stop
            return (not stop) if all(v is (not stop) for v in values) else None
        if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
            return self._compare(mod, expr, depth)
        if isinstance(expr, ast.Call):
            return self._call(mod, expr, depth)
        if isinstance(expr, ast.Attribute):
            if expr.attr in ("is_cuda", "is_xpu"):
                return expr.attr == "is_xpu"  # a tensor's own flag
            if isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls"):
                return self._attribute_flag(mod, expr, depth)
            return None
        if isinstance(expr, ast.Name):
            if expr.id == "TYPE_CHECKING":
                return False
            return self._name_flag(mod, expr, depth)
        return None

    def _compare(self, mod: _Module, expr: ast.Compare, depth: int) -> Value:
        op, left, right = expr.ops[0], expr.left, expr.comparators[0]
        if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant) and right.value is None:
            if self._none_on_xpu(mod, left, depth):
                return isinstance(op, ast.Is)
            return None
        if isinstance(op, (ast.Eq, ast.NotEq)):
            for a, b in ((left, right), (right, left)):
                if isinstance(b, ast.Constant) and b.value in _DEVICE_NAMES and self._is_device_name(a):
                    same = _DEVICE_NAMES[str(b.value)]
                    return same if isinstance(op, ast.Eq) else not same
        return None

    @staticmethod
    def _is_device_name(expr: ast.expr) -> bool:
        """`x.device.type`, `current_platform.device_type`, `device_type`: the name of the device code runs on."""
        name = expr.attr if isinstance(expr, ast.Attribute) else expr.id if isinstance(expr, ast.Name) else ""
        return name in ("device_type", "device_name") or (name == "type" and isinstance(expr, ast.Attribute)
                                                         and isinstance(expr.value, ast.Attribute)
                                                         and expr.value.attr == "device")

    def _none_on_xpu(self, mod: _Module, expr: ast.expr, depth: int) -> bool:
        """`current_platform.get_device_capability()` (None on XPU), directly or through a local name."""
        if depth > MAX_DEPTH:
            return False
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
                and expr.func.attr == "get_device_capability":
            return True
        if isinstance(expr, ast.Name):
            values = self._assigned(mod, expr, depth + 1)
            return bool(values) and all(self._none_on_xpu(m, v, depth + 1) for m, v in values)
        return False

    def _call(self, mod: _Module, expr: ast.Call, depth: int) -> Value:
        func = expr.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name == "is_xpu":
            return True
        if name in NON_XPU or name.startswith(_NON_XPU_PREFIXES):
            return False
        if name in ("hasattr", "getattr") and len(expr.args) >= 2:
            ns = expr.args[0]
            op = expr.args[1]
            if isinstance(ns, ast.Attribute) and isinstance(ns.value, ast.Attribute) and ns.value.attr == "ops" \
                    and isinstance(op, ast.Constant) and isinstance(op.value, str):
                if name == "hasattr":
                    return self.defined(ns.attr, op.value)
                if len(expr.args) == 3 and isinstance(expr.args[2], ast.Constant) and expr.args[2].value is None \
                        and not self.defined(ns.attr, op.value):
                    return False
            return None
        target = self.resolve_function(mod, func)
        if target is None:
            return None
        return self.returns(target[0], target[1], depth + 1)

    def returns(self, mod: _Module, func: Scope, depth: int) -> Value:
        """What func returns on XPU, when every return it reaches there agrees."""
        if id(func) in self._values:
            return self._values[id(func)]
        self._values[id(func)] = None  # recursion: not known
        seen: set[Value] = set()
        for node in _own_nodes(func):
            if isinstance(node, ast.Return) and not self.guard(mod, node, func, depth):
                seen.add(False if node.value is None else self.value(mod, node.value, depth))
            elif isinstance(node, (ast.Yield, ast.YieldFrom)):
                seen.add(None)
        if not _terminates(func.body):
            seen.add(False)  # falling off the end returns None
        result = seen.pop() if len(seen) == 1 else None
        self._values[id(func)] = result
        return result

    def _assigned(self, mod: _Module, name: ast.Name, depth: int) -> list[tuple[_Module, ast.expr]]:
        """The values assigned to a local (or else module-level) name, where those assignments run on XPU;
        [] when it is a parameter or bound some other way (a loop, a with, an import, +=)."""
        if name.id in mod.rebound:
            return []  # a `global` some function rebinds: its value depends on when it is read
        scope = mod.enclosing(name)
        while isinstance(scope, ast.ClassDef):
            scope = mod.enclosing(scope)
        if name.id in mod.imports:
            return []
        for where in ([scope] if scope is not None else []) + [None]:
            if where is not None and name.id in {
                    a.arg for a in (*where.args.args, *where.args.kwonlyargs, *where.args.posonlyargs)}:
                return []
            found = []
            for target in mod.names.get(name.id, []):
                if not isinstance(target.ctx, ast.Store) or mod.function(target) is not where:
                    continue
                node = mod.parents.get(target)
                if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None \
                        or (isinstance(node, ast.Assign) and node.targets != [target]):
                    return []  # a loop, a with, a tuple, +=, a walrus
                if not self.guard(mod, node, where, depth + 1):
                    found.append((mod, node.value))
            if found:
                return found
        return []

    def _name_flag(self, mod: _Module, name: ast.Name, depth: int) -> Value:
        values = self._assigned(mod, name, depth + 1)
        results = {self.value(m, v, depth + 1) for m, v in values}
        return results.pop() if len(results) == 1 else None

    def _attribute_flag(self, mod: _Module, expr: ast.Attribute, depth: int) -> Value:
        """`self.flag`: the value every assignment in the class gives it (`self.flag = ...` in its methods)."""
        cls, _ = mod.unit(expr)
        if cls is None or self._set_elsewhere(mod, cls, expr.attr):
            return None
        results: set[Value] = set()
        for node in ast.walk(cls):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Attribute) and t.attr == expr.attr and isinstance(t.value, ast.Name) \
                            and t.value.id in ("self", "cls"):
                        results.add(self.value(mod, node.value, depth + 1) if len(targets) == 1 else None)
                    elif isinstance(t, ast.Name) and t.id == expr.attr and mod.parents.get(node) is cls:
                        results.add(self.value(mod, node.value, depth + 1))
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Attribute) \
                    and node.target.attr == expr.attr:
                results.add(None)
        return results.pop() if len(results) == 1 else None

    def _set_elsewhere(self, mod: _Module, cls: ast.ClassDef, attr: str) -> bool:
        """Whether code outside cls may set `.attr` on its objects: `x.attr = ...` anywhere, or `self.attr = ...`
        in a file that names cls (a subclass may set it)."""
        other = re.compile(rb"(\w+)\s*\.\s*" + re.escape(attr.encode()) + rb"\s*(?::[^=\n]*)?=(?!=)")
        for rel in self.mentions(attr):
            for m in other.finditer(self.data[rel]):
                if m.group(1) not in (b"self", b"cls"):
                    return True
                if rel != mod.rel and cls.name.encode() in self.data[rel]:
                    return True
        return False

    # ---- resolution -----------------------------------------------------------------------------------------

    def module_named(self, name: str) -> _Module | None:
        rel = self.by_module.get(name)
        return self.module(rel) if rel else None

    def resolve(self, mod: _Module, name: str, depth: int = 0
                ) -> tuple[_Module, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] | None:
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

    def resolve_function(self, mod: _Module, func: ast.expr) -> tuple[_Module, Scope] | None:
        found: tuple[_Module, ast.AST] | None = None
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

    def bases(self, mod: _Module, cls: ast.ClassDef) -> list[tuple[_Module, ast.ClassDef]]:
        out = []
        for base in cls.bases:
            name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
            found = self.resolve(mod, name) if name else None
            if found and isinstance(found[1], ast.ClassDef) and found[1] is not cls:
                out.append((found[0], found[1]))
        return out

    def mro(self, mod: _Module, cls: ast.ClassDef) -> list[tuple[_Module, ast.ClassDef]]:
        out: list[tuple[_Module, ast.ClassDef]] = []
        stack, seen = [(mod, cls)], set()
        while stack and len(out) < 30:
            m, c = stack.pop(0)
            if id(c) in seen:
                continue
            seen.add(id(c))
            out.append((m, c))
            stack.extend(self.bases(m, c))
        return out

    def method(self, mod: _Module, cls: ast.ClassDef, name: str) -> tuple[_Module, Scope] | None:
        for m, c in self.mro(mod, cls):
            for node in c.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                    return m, node
        return None

    # ---- units: functions, methods, classes, modules --------------------------------------------------------

    def unit(self, mod: _Module, cls: ast.ClassDef | None, func: Scope | None, depth: int) -> Verdict:
        if cls is None and func is None:
            return self.module_reached(mod, depth)
        key = (mod.rel, cls.name if cls else "", func.name if func else "", depth == 0)  # see _function
        return self._memoized(key, lambda: self._unit(mod, cls, func, depth))

    def _unit(self, mod: _Module, cls: ast.ClassDef | None, func: Scope | None, depth: int) -> Verdict:
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

    def _method(self, mod: _Module, cls: ast.ClassDef, func: Scope | None, depth: int) -> Verdict:
        supported = self.method(mod, cls, "_supports_current_device")
        if supported and self.returns(supported[0], supported[1], depth) is False:
            return Verdict(False, f"{supported[0].where(supported[1])}: {cls.name}._supports_current_device() "
                                  "is false on XPU")
        if func is not None and func.name in _FORWARDS and any(c.name == "CustomOp" for _, c in self.mro(mod, cls)):
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
        if func is not None and not func.name.startswith("__") and func.name != "forward" \
                and not any(self.uses_attribute(rel, func.name) for rel in self.mentions(func.name) if rel != mod.rel):
            refs: list[tuple[_Module, ast.AST]] = [
                (m, n) for rel in self.mentions(func.name) if (m := self.module(rel)) is not None
                for n in m.attributes.get(func.name, []) if not self._inside(m, n, func)]
            if refs and all(m is mod and isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                            and n.value.id in ("self", "cls") for m, n in refs):
                return self._all_refs(f"{cls.name}.{func.name}", refs, depth) or REACHED_UNKNOWN  # only self calls it
        return REACHED_UNKNOWN

    def _custom_op(self, mod: _Module, cls: ast.ClassDef, name: str) -> Verdict | None:
        """A CustomOp runs forward_xpu on XPU (CustomOp's own: forward_native): is `name` called from there?"""
        runs = self.method(mod, cls, "forward_xpu")
        if runs is None:
            return None
        ran = [runs]
        if any(isinstance(n, ast.Attribute) and n.attr == "forward_native" for n in ast.walk(runs[1])):
            native = self.method(mod, cls, "forward_native")
            if native:
                ran.append(native)
        for m, f in ran:
            calls = [n for n in ast.walk(f) if isinstance(n, ast.Attribute) and n.attr == name]
            if calls:
                return Verdict(True, f"{m.where(calls[0])}: {cls.name}.{f.name} calls {name} on XPU")
        m, f = ran[0]
        return Verdict(False, f"{m.where(f)}: on XPU the CustomOp {cls.name} runs {f.name}, which does not call "
                              f"{name}")

    def _xpu_override(self, mod: _Module, cls: ast.ClassDef, name: str) -> str:
        """An XPU subclass (in an xpu module, or XPU in its name) that overrides `name` without calling it."""
        subclass = re.compile(rb"^\s*class\s+(\w+)\s*\([^)]*\b" + cls.name.encode() + rb"\b", re.MULTILINE)
        for rel in self.mentions(cls.name):
            xpu_module = "xpu" in rel.lower().replace(".py", "").replace("/", "_").split("_")
            found = [m.group(1) for m in subclass.finditer(self.data[rel])]
            if not any(xpu_module or b"XPU" in n or b"Xpu" in n for n in found):
                continue
            other = self.module(rel)
            if other is None:
                continue
            for sub in other.defs.values():
                if not isinstance(sub, ast.ClassDef) or not (xpu_module or "XPU" in sub.name or "Xpu" in sub.name):
                    continue
                if not any(c is cls for _, c in self.mro(other, sub)[1:]):
                    continue
                for node in sub.body:
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name \
                            and not any(isinstance(n, ast.Attribute) and n.attr == name for n in ast.walk(node)):
                        return f"{other.where(node)}: on XPU the subclass {sub.name} overrides {name}"
        return ""

    def class_reached(self, mod: _Module, cls: ast.ClassDef, depth: int) -> Verdict:
        return self._memoized(("class", mod.rel, cls.name), lambda: self._class(mod, cls, depth))

    def _class(self, mod: _Module, cls: ast.ClassDef, depth: int) -> Verdict:
        if f"{mod.name}.{cls.name}" in self.quoted():
            return REACHED_UNKNOWN  # named in a string (a registry): chosen by rules the model does not read
        verdict = self._all_refs(f"class {cls.name}", self.references(mod, cls.name, skip=cls), depth)
        if verdict is None:
            return REACHED_UNKNOWN  # named only by a string (a registry), or not at all: not derived
        return verdict

    def _function(self, mod: _Module, func: Scope, depth: int) -> Verdict:
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

    def _unresolved_uses(self, mod: _Module, name: str) -> bool:
        return any(self.uses_attribute(rel, name) for rel in self.mentions(name) if rel != mod.rel)

    def _all_refs(self, what: str, refs: Iterable[tuple[_Module, ast.AST]], depth: int) -> Verdict | None:
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

    def _reference(self, mod: _Module, ref: ast.AST, depth: int) -> Verdict:
        """A use of a function or class: `op_func=` of a custom-op registration goes on through its op name."""
        if id(ref) in self.unbound_on_xpu:
            return Verdict(False, self.unbound_on_xpu[id(ref)])
        parent = mod.parents.get(ref)
        if isinstance(parent, ast.keyword) and parent.arg == "op_func":
            call = mod.parents.get(parent)
            name = next((k.value.value for k in getattr(call, "keywords", []) if k.arg == "op_name"
                         and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)), None)
            guard = self.guard(mod, ref)
            if guard:
                return Verdict(False, guard)
            if name:
                uses: list[tuple[_Module, ast.AST]] = [
                    (m, n) for rel in self.mentions(name) if b"vllm" in self.data[rel]
                    and self.uses_attribute(rel, name) and (m := self.module(rel)) is not None
                    for n in m.attributes.get(name, []) if _is_torch_ops_vllm(n.value)]
                if not uses:
                    return Verdict(False, f"{mod.where(ref)}: registered as torch.ops.vllm.{name}, which nothing "
                                          "calls")
                return self._all_refs(f"torch.ops.vllm.{name}", uses, depth) or REACHED_UNKNOWN
        return self.node(mod, ref, depth)

    def references(self, mod: _Module, name: str, skip: ast.AST) -> Iterator[tuple[_Module, ast.AST]]:
        """Uses of the top-level `name` defined in mod, anywhere: the name where it is bound to that definition,
        `x.name` where x is that module; not inside the definition itself, annotations or isinstance checks.
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
                if self._inside(other, node, skip) or self._passive(other, node):
                    continue
                guards = [self.guard(other, b) for b in binding]
                if binding and all(guards):
                    self.unbound_on_xpu[id(node)] = f"bound by an import that XPU does not run: {guards[0]}"
                yield other, node

    def _same(self, source: str, attr: str | None, mod: _Module, name: str) -> bool:
        return attr == name and (source == mod.name or self._reexports(source, mod, name))

    def _reexports(self, source: str, mod: _Module, name: str) -> bool:
        other = self.module_named(source)
        return other is not None and any(s == mod.name and a == name for s, a, _ in other.imports.get(name, []))

    @staticmethod
    def _is_module(source: str, attr: str | None, mod: _Module) -> bool:
        return (source if attr is None else f"{source}.{attr}") == mod.name

    @staticmethod
    def _inside(mod: _Module, node: ast.AST, scope: ast.AST) -> bool:
        parent = mod.parents.get(node)
        while parent is not None:
            if parent is scope:
                return True
            parent = mod.parents.get(parent)
        return False

    @staticmethod
    def _passive(mod: _Module, node: ast.AST) -> bool:
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

    def module_reached(self, mod: _Module, depth: int) -> Verdict:
        return self._memoized(("module", mod.name), lambda: self._module(mod, depth))

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

    def _module(self, mod: _Module, depth: int) -> Verdict:
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
    def _imports(mod: _Module, node: ast.AST, name: str) -> bool:
        if isinstance(node, ast.Import):
            return any(a.name == name or a.name.startswith(name + ".") for a in node.names)
        if isinstance(node, ast.ImportFrom):
            base = mod.absolute(node)
            return base == name or base.startswith(name + ".") or any(f"{base}.{a.name}" == name for a in node.names)
        return False
