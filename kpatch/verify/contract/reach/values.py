"""Guards and values on XPU: the branches, early returns and boolean operators around a node, and the truth of
a test when the platform alone decides it (platform predicates, tensor-device flags, device names, capability,
hasattr probes of ops the kernels do not define, flags and predicate functions derived from them)."""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from kpatch.verify.contract.reach import configs, dtypes, flow, nones, torch_cuda
from kpatch.verify.contract.reach.index import Index
from kpatch.verify.contract.reach.source import Module, Scope, own_nodes, terminates, text
from kpatch.verify.contract.reach.verdict import MAX_DEPTH, Value

# Platform predicates that are false on XPU; `is_xpu` is the one that is true.
NON_XPU = frozenset({"is_cuda", "is_rocm", "is_cpu", "is_tpu", "is_cuda_alike", "is_out_of_tree",
                     "has_device_capability", "is_device_capability", "is_device_capability_family"})
_NON_XPU_PREFIXES = ("on_gfx",)  # ROCm architecture checks
_ORDER = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
          ast.Eq: operator.eq, ast.NotEq: operator.ne}
_DEVICE_NAMES = {"xpu": True, "cuda": False, "rocm": False, "hip": False, "tpu": False, "cpu": False}


class Values(Index):
    """The truth of tests on XPU, and the guards that keep a node off it (memoized)."""

    def __init__(self, root: Path, files: list[Path], defined: Callable[[str, str], bool]) -> None:
        super().__init__(root, files, defined)
        self._values: dict[int, tuple[Value, int]] = {}  # id(function) -> what it returns on XPU, as _known
        self._guards: dict[tuple[int, int], tuple[str, int]] = {}  # (id(node), id(stop)) -> why, as _known
        # id(expression) -> its value on XPU, and the depth it was worked out at: an unknown found deeper (where
        # MAX_DEPTH cut the search short) is worked out again when asked from nearer the call site
        self._known: dict[int, tuple[Value, int]] = {}
        self._because: dict[int, str] = {}  # id(expression) -> why it has its value, when that takes a line
        self._unassigned: dict[int, str] = {}  # id(`self.attr`) -> an assignment of it XPU never runs, and why
        self._cache_dtypes: dtypes.CacheDtypes | None = None
        self._cache_dtypes_read = False
        self._config_defaults = configs.Defaults(self)
        self._torch_cuda_patched: frozenset[str] | None = None  # torch.cuda names the application replaces

    def torch_cuda_unpatched(self, names: frozenset[str]) -> frozenset[str]:
        """Those of `names` (torch.cuda functions) the application never replaces (see torch_cuda.patched)."""
        if self._torch_cuda_patched is None:
            self._torch_cuda_patched = torch_cuda.patched(self)
        return names - self._torch_cuda_patched

    # ---- guards ---------------------------------------------------------------------------------------------

    def guard(self, mod: Module, node: ast.AST, stop: ast.AST | None = None, depth: int = 0) -> str:
        """Why node never runs on XPU, from the branches and early returns around it (up to `stop`), or ""."""
        key = (id(node), id(stop))
        known = self._guards.get(key)
        if known is None or (not known[0] and known[1] > depth):
            self._guards[key] = ("", -1)  # while it is being worked out (a flag that guards its own assignment)
            self._guards[key] = (self._guard(mod, node, stop, depth), depth)
        return self._guards[key][0]

    def _guard(self, mod: Module, node: ast.AST, stop: ast.AST | None, depth: int) -> str:
        raises = self.torch_cuda_unpatched(torch_cuda.RAISES_ON_XPU) \
            if any(name in mod.attributes for name in torch_cuda.RAISES_ON_XPU) else frozenset()
        child = node
        parent = mod.parents.get(child)
        while parent is not None:
            if isinstance(parent, (ast.If, ast.IfExp)):
                in_body = child in parent.body if isinstance(parent, ast.If) else child is parent.body
                in_else = child in parent.orelse if isinstance(parent, ast.If) else child is parent.orelse
                if in_body or in_else:
                    value = self.value(mod, parent.test, depth)
                    if in_body and value is False:
                        return f"{mod.where(parent)}: only if `{text(parent.test)}`, false on XPU" \
                               + self._because_of(parent.test)
                    if in_else and value is True:
                        return f"{mod.where(parent)}: only if not `{text(parent.test)}`, true on XPU" \
                               + self._because_of(parent.test)
            elif isinstance(parent, ast.BoolOp) and child in parent.values:
                for earlier in parent.values[:parent.values.index(child)]:
                    value = self.value(mod, earlier, depth)
                    if value is (not isinstance(parent.op, ast.And)):
                        continue
                    if value is not None:
                        return f"{mod.where(earlier)}: after `{text(earlier)}`, {str(value).lower()} on XPU" \
                               + self._because_of(earlier)
            for field in ("body", "orelse", "finalbody"):
                stmts = getattr(parent, field, None)
                if isinstance(stmts, list) and child in stmts:
                    for sibling in stmts[:stmts.index(child)]:
                        raising = torch_cuda.raising_call(sibling, raises) if raises else None
                        if raising is not None:
                            return f"{mod.where(sibling)}: after `{text(raising)}`, which raises on XPU (torch is " \
                                   "built without CUDA there)"
                        if isinstance(sibling, ast.Assert) and self.value(mod, sibling.test, depth) is False:
                            return f"{mod.where(sibling)}: after `assert {text(sibling.test)}`, false on XPU" \
                                   + self._because_of(sibling.test)
                        if not isinstance(sibling, ast.If):
                            continue
                        value = self.value(mod, sibling.test, depth)
                        if value is True and terminates(sibling.body):
                            return f"{mod.where(sibling)}: returns first if `{text(sibling.test)}`, true on XPU" \
                                   + self._because_of(sibling.test)
                        if value is False and sibling.orelse and terminates(sibling.orelse):
                            return f"{mod.where(sibling)}: returns first unless `{text(sibling.test)}`, " \
                                   "false on XPU"
            if parent is stop:
                break
            child, parent = parent, mod.parents.get(parent)
        return ""

    def _because_of(self, test: ast.expr) -> str:
        found = next((self._because[id(n)] for n in ast.walk(test) if id(n) in self._because), "")
        return f" ({found})" if found else ""

    # ---- values on XPU --------------------------------------------------------------------------------------

    def value(self, mod: Module, expr: ast.expr, depth: int = 0) -> Value:
        """The truth of expr on XPU, when the platform alone decides it."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(expr, (ast.Name, ast.Attribute, ast.Call)):
            known = self._known.get(id(expr))
            if known is None or (known[0] is None and known[1] > depth):
                self._known[id(expr)] = (None, -1)  # not known while it is being worked out
                self._known[id(expr)] = (self._value(mod, expr, depth), depth)
            return self._known[id(expr)][0]
        return self._value(mod, expr, depth)

    def _value(self, mod: Module, expr: ast.expr, depth: int) -> Value:
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

    def _compare(self, mod: Module, expr: ast.Compare, depth: int) -> Value:
        op, left, right = expr.ops[0], expr.left, expr.comparators[0]
        if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant) and right.value is None:
            why = nones.none_on_xpu(self, mod, left, depth)
            if why:
                if why != "None":
                    self._because[id(expr)] = why
                return isinstance(op, ast.Is)
            return None
        cache = self.cache_dtype_test(expr)
        if cache is not None:
            return cache
        opted = configs.opt_in_test(self, self._config_defaults, mod, expr, depth)
        if opted is not None:
            self._because[id(expr)] = opted[1]
            return opted[0]
        if isinstance(op, (ast.Eq, ast.NotEq)):
            for a, b in ((left, right), (right, left)):
                if isinstance(b, ast.Constant) and b.value in _DEVICE_NAMES and self._is_device_name(a):
                    same = _DEVICE_NAMES[str(b.value)]
                    return same if isinstance(op, ast.Eq) else not same
            for a, b in ((left, right), (right, left)):
                if isinstance(b, ast.Constant) and isinstance(b.value, str):
                    equal = self._is_string(mod, a, b.value, depth)
                    if equal is not None:
                        return equal if isinstance(op, ast.Eq) else not equal
        if type(op) in _ORDER and isinstance(left, ast.Call) and isinstance(right, ast.Constant) \
                and isinstance(right.value, int) and not isinstance(right.value, bool):
            target = self.resolve_function(mod, left.func)
            number = nones.returns_number(self, target[0], target[1], depth + 1) if target else None
            if target is not None and number is not None:
                where, func = target
                self._because[id(expr)] = f"{where.where(func)}: {func.name} returns only {number} on XPU"
                return bool(_ORDER[type(op)](number, right.value))
        return None

    def _is_string(self, mod: Module, expr: ast.expr, string: str, depth: int) -> Value:
        """Whether expr is `string` on XPU, when it is a call, or a local or `self.` attribute assigned only from
        calls (and literals): a backend or kernel chosen by name (`backend = self.resolve_backend(...)`, then
        `if backend == "cooperative":`). True: always; False: never; None: not known."""
        sources = [(mod, expr)] if isinstance(expr, ast.Call) else self._assigned(mod, expr, depth + 1) \
            if isinstance(expr, ast.Name) else self._attribute_values(mod, expr) \
            if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) \
            and expr.value.id in ("self", "cls") else None
        if not sources:
            return None
        results: set[Value] = set()
        why = ""
        for m, value in sources:
            if isinstance(value, ast.Constant):
                results.add(value.value == string)
                continue
            target = self.resolve_function(m, value.func) if isinstance(value, ast.Call) else None
            if target is None:
                return None
            if flow.always_returns(self, target[0], target[1], string, depth + 1):
                results.add(True)
                why = why or f"{target[0].where(target[1])}: {target[1].name} returns only {string!r} on XPU"
            elif not flow.may_return(self, target[0], target[1], string, depth + 1):
                results.add(False)
                why = why or f"{target[0].where(target[1])}: {target[1].name} never returns {string!r} on XPU"
            else:
                return None
        if len(results) != 1:
            return None
        self._because[id(expr)] = why
        return results.pop()

    @staticmethod
    def _is_device_name(expr: ast.expr) -> bool:
        """`x.device.type`, `current_platform.device_type`, `device_type`: the name of the device code runs on."""
        name = expr.attr if isinstance(expr, ast.Attribute) else expr.id if isinstance(expr, ast.Name) else ""
        return name in ("device_type", "device_name") or (name == "type" and isinstance(expr, ast.Attribute)
                                                         and isinstance(expr.value, ast.Attribute)
                                                         and expr.value.attr == "device")

    def _call(self, mod: Module, expr: ast.Call, depth: int) -> Value:
        func = expr.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name == "is_xpu":
            return True
        if name == "bool" and isinstance(func, ast.Name) and len(expr.args) == 1 and not expr.keywords:
            return self.value(mod, expr.args[0], depth)
        if name in NON_XPU or name.startswith(_NON_XPU_PREFIXES):
            return False
        if isinstance(func, ast.Attribute) and torch_cuda.is_torch_cuda(func.value) \
                and name in self.torch_cuda_unpatched(torch_cuda.FALSE_ON_XPU):
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

    def returns(self, mod: Module, func: Scope, depth: int) -> Value:
        """What func returns on XPU, when every return it reaches there agrees."""
        known = self._values.get(id(func))
        if known is not None and (known[0] is not None or known[1] <= depth):
            return known[0]
        self._values[id(func)] = (None, -1)  # recursion: not known
        seen: set[Value] = set()
        for node in own_nodes(func):
            if isinstance(node, ast.Return) and not self.guard(mod, node, func, depth):
                local = flow.truth_at(self, mod, func, node, node.value.id, depth) \
                    if isinstance(node.value, ast.Name) else None
                seen.add(False if node.value is None else local if local is not None
                         else self.value(mod, node.value, depth))
            elif isinstance(node, (ast.Yield, ast.YieldFrom)):
                seen.add(None)
        if not terminates(func.body):
            seen.add(False)  # falling off the end returns None
        result = seen.pop() if len(seen) == 1 else None
        self._values[id(func)] = (result, depth)
        return result

    def parameter_none(self, mod: Module, func: Scope, name: str, depth: int) -> str:  # noqa: ARG002
        """Why parameter `name` of func is None on XPU, from every call of func ("": not known here; the call-path
        search knows the calls)."""
        return ""

    def cache_dtype_test(self, expr: ast.Compare) -> Value:
        """The truth of a KV-cache dtype test on XPU: false for a dtype no XPU attention backend takes (None: not
        such a test, or a dtype XPU takes)."""
        if not self._cache_dtypes_read:
            self._cache_dtypes, self._cache_dtypes_read = dtypes.xpu_cache_dtypes(self), True
        if self._cache_dtypes is None:
            return None
        decided = self._cache_dtypes.decide(expr)
        if decided is None:
            return None
        self._because[id(expr)] = decided[1]
        return decided[0]

    def assigned(self, mod: Module, name: ast.Name, depth: int) -> list[tuple[Module, ast.expr]]:
        return self._assigned(mod, name, depth)

    def attribute_values(self, mod: Module, expr: ast.Attribute) -> list[tuple[Module, ast.expr]] | None:
        return self._attribute_values(mod, expr)

    def _assigned(self, mod: Module, name: ast.Name, depth: int) -> list[tuple[Module, ast.expr]]:
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

    def _name_flag(self, mod: Module, name: ast.Name, depth: int) -> Value:
        values = self._assigned(mod, name, depth + 1)
        results = {self.value(m, v, depth + 1) for m, v in values}
        self._carry_because(name, values)
        return results.pop() if len(results) == 1 else None

    def _attribute_flag(self, mod: Module, expr: ast.Attribute, depth: int) -> Value:
        """`self.flag`: the value every assignment in the class gives it (`self.flag = ...` in its methods)."""
        values = self._attribute_values(mod, expr)
        if values is None:
            return None
        results = {self.value(m, v, depth + 1) for m, v in values}
        self._carry_because(expr, values)
        if len(results) == 1 and id(expr) in self._unassigned:
            self._because.setdefault(id(expr), f"the other assignment of self.{expr.attr}, at "
                                               f"{self._unassigned[id(expr)]}")
        return results.pop() if len(results) == 1 else None

    def _carry_because(self, expr: ast.expr, values: list[tuple[Module, ast.expr]]) -> None:
        """A flag's value keeps the line that explains the value it was assigned (an opt-in config test)."""
        found = next((self._because[id(n)] for _, v in values for n in ast.walk(v) if id(n) in self._because), "")
        if found:
            self._because.setdefault(id(expr), found)

    def _attribute_values(self, mod: Module, expr: ast.Attribute) -> list[tuple[Module, ast.expr]] | None:
        """The values the class around expr assigns to `self.<attr>` (or its class attribute, or registers as a
        buffer of that name); None when other code may set it, or an assignment is not a plain one (a tuple
        target, +=)."""
        cls, _ = mod.unit(expr)
        if cls is None or self._set_elsewhere(mod, cls, expr.attr):
            return None
        values: list[tuple[Module, ast.expr]] = []
        for node in ast.walk(cls):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Attribute) and t.attr == expr.attr and isinstance(t.value, ast.Name) \
                            and t.value.id in ("self", "cls"):
                        if len(targets) != 1:
                            return None
                        skipped = self.guard(mod, node)  # an assignment XPU never runs gives nothing there
                        if skipped:
                            self._unassigned.setdefault(id(expr), f"{mod.where(node)} never runs on XPU ({skipped})")
                        else:
                            values.append((mod, node.value))
                    elif isinstance(t, ast.Name) and t.id == expr.attr and mod.parents.get(node) is cls:
                        values.append((mod, node.value))
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Attribute) \
                    and node.target.attr == expr.attr:
                return None
        values += [(mod, value) for value in nones.register_buffer_values(cls, expr.attr)]
        return values

    def _set_elsewhere(self, mod: Module, cls: ast.ClassDef, attr: str) -> bool:
        """Whether code outside cls may set `.attr` on its objects: `x.attr = ...` anywhere, or `self.attr = ...`
        in a file that names cls (a subclass may set it)."""
        # `WORD . attr =` (or `: T =`), found from the `. attr` on: a pattern that starts at a word tries every
        # letter of a file (0.2 s a call on vLLM's modules), one that starts at the dot only the dots
        assign = re.compile(rb"\.\s*" + re.escape(attr.encode()) + rb"\s*(?::[^=\n]*)?=(?!=)")
        for rel in self.mentions(attr):
            data = self.data[rel]
            for owner in _owners(data, assign):
                if owner not in (b"self", b"cls"):
                    return True
                if rel != mod.rel and cls.name.encode() in data:
                    return True
        return False


def _owners(data: bytes, assign: re.Pattern[bytes]) -> Iterator[bytes]:
    """The word owning each `WORD . attr =` that `assign` (from the `. attr` on) finds in `data`. Each `. attr` is
    tried on its own: a match never takes up the text up to its `=`, where another may start (`if f().attr: obj.attr
    = 1` has no owner word before its first dot; `if self.attr: other.attr = 1` reads as `self.attr` annotated
    `other.attr`, and `other` owns the second). A match with no word before its dot (`f().attr`) owns nothing."""
    position = 0
    while (m := assign.search(data, position)) is not None:
        owner = _word_before(data, m.start())
        if owner is not None:
            yield owner
        position = m.start() + 1


_SPACE = frozenset(b" \t\n\r\f\v")  # what \s matches in a bytes pattern
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")  # and \w


def _word_before(data: bytes, end: int) -> bytes | None:
    """The word (\\w+) that ends, after any white space, right before `end`; None when there is none."""
    stop = end
    while stop > 0 and data[stop - 1] in _SPACE:
        stop -= 1
    start = stop
    while start > 0 and data[start - 1] in _WORD:
        start -= 1
    return data[start:stop] if start < stop else None
