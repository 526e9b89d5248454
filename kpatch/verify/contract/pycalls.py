"""Where an application's Python reaches torch ops by name: `torch.ops.<ns>.<op>` (and aliases), file:line."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

# Every form the scanner understands spells one of these; parsing all of vLLM's files would take 20 s.
_MAY_NAME_OPS = re.compile(rb"torch\.ops|import\s+torch\s+as\s|from\s+torch\s+import[^\n]*\bops\b")
_NOT_SHIPPED = {"tests", "test", "benchmarks", "examples", "docs", "tools", "build"}


@dataclass(frozen=True)
class CallSite:
    """One place that names an op: a call or attribute use, or a `hasattr`/`getattr(..., default)` probe."""

    namespace: str
    op: str
    file: str  # relative to the worktree, posix
    line: int
    module: str  # dotted module of the file, e.g. "vllm.models.kimi_k3.nvidia.ops.fused_mla_key_concat_kv_cache"
    probe: bool  # the code asks whether the op exists first: absence is handled, not an error
    off_xpu: bool  # inside a branch that a platform check keeps off XPU (see _off_xpu)
    positional: int | None = None  # a direct call: how many positional arguments (None: not a call, or *args)
    keywords: tuple[str, ...] = ()  # a direct call's keyword argument names
    function: str = ""  # the enclosing definitions, dotted ("Class.method"); "" at module level


def package_files(root: Path, packages: tuple[str, ...] | None = None) -> list[Path]:
    """The Python files of the packages a wheel ships: `packages` under root, or else every top-level folder
    with an __init__.py except tests and the like."""
    if packages is None:
        folders = [p for p in root.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
                   and p.name not in _NOT_SHIPPED]
    else:
        folders = [root / name for name in packages if (root / name).is_dir()]
    files: list[Path] = []
    for folder in sorted(folders):
        files += sorted(folder.rglob("*.py"))
    return files


def call_sites(root: Path, namespaces: frozenset[str] | None = None, packages: tuple[str, ...] | None = None,
               ) -> tuple[list[CallSite], list[str]]:
    """Every op named in the packages under `root` (only `namespaces` when given); also files ast cannot parse."""
    sites: list[CallSite] = []
    broken: list[str] = []
    for path in package_files(root, packages):
        rel = path.relative_to(root).as_posix()
        data = path.read_bytes()
        if not _MAY_NAME_OPS.search(data):
            continue
        try:
            tree = ast.parse(data, filename=rel)
        except (SyntaxError, ValueError) as err:
            broken.append(f"{rel}: {err}")
            continue
        module = rel[:-3].replace("/", ".").removesuffix(".__init__")
        sites += [s for s in _Scanner(rel, module).scan(tree) if namespaces is None or s.namespace in namespaces]
    return sites, broken


class _Scanner(ast.NodeVisitor):
    def __init__(self, file: str, module: str) -> None:
        self.file, self.module = file, module
        self.torch: set[str] = set()  # names bound to the torch module
        self.ops: set[str] = set()  # names bound to torch.ops
        self.namespaces: dict[str, str] = {}  # names bound to torch.ops.<ns>
        self.sites: list[CallSite] = []
        self.off_xpu = 0
        self.calls: dict[int, tuple[int | None, tuple[str, ...]]] = {}  # id(op attribute) -> its call's arguments
        self.scope: list[str] = []  # the enclosing class and function names

    def scan(self, tree: ast.AST) -> list[CallSite]:
        for node in ast.walk(tree):  # aliases first, wherever they are bound
            if isinstance(node, ast.Import):
                self.torch |= {a.asname or a.name for a in node.names if a.name == "torch"}
            elif isinstance(node, ast.ImportFrom) and node.module == "torch.ops":
                self.namespaces |= {a.asname or a.name: a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module == "torch":
                self.ops |= {a.asname or a.name for a in node.names if a.name == "ops"}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                ns = self._namespace(node.value)
                if ns:
                    self.namespaces[node.targets[0].id] = ns
        self.visit(tree)
        return self.sites

    def _namespace(self, node: ast.expr) -> str | None:
        """`torch.ops._C` (or an alias of it) -> "_C"."""
        if isinstance(node, ast.Name):
            return self.namespaces.get(node.id)
        if isinstance(node, ast.Attribute):
            inner = node.value
            if isinstance(inner, ast.Name) and inner.id in self.ops:
                return node.attr
            if isinstance(inner, ast.Attribute) and inner.attr == "ops" and isinstance(inner.value, ast.Name) \
                    and inner.value.id in self.torch:
                return node.attr
        return None

    def visit_Module(self, node: ast.Module) -> None:
        self._block(node.body)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for child in (*node.decorator_list, node.args, *([node.returns] if node.returns else [])):
            self.visit(child)
        self.scope.append(node.name)
        self._block(node.body)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for child in (*node.decorator_list, *node.bases, *node.keywords):
            self.visit(child)
        self.scope.append(node.name)
        self._block(node.body)
        self.scope.pop()

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        body_off, else_off = _off_xpu(node.test)
        self._block(node.body, body_off)
        if not else_off and _elif_off_xpu(node):
            inner = node.orelse[0]
            assert isinstance(inner, ast.If)
            self.visit(inner.test)
            self._block(inner.body, True)
            self._block(inner.orelse, False)
            return
        self._block(node.orelse, else_off)

    def _block(self, nodes: list[ast.stmt], off: bool = False) -> None:
        """Visit statements; after `if is_xpu(): ... return`, the rest of the block runs only off XPU."""
        self.off_xpu += off
        rest = 0
        for child in nodes:
            self.off_xpu += rest
            self.visit(child)
            self.off_xpu -= rest
            if isinstance(child, ast.If) and not child.orelse and _terminates(child.body) \
                    and _off_xpu(child.test)[1]:
                rest = 1
        self.off_xpu -= off

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("hasattr", "getattr") and len(node.args) >= 2:
            ns = self._namespace(node.args[0])
            name = node.args[1]
            if ns and isinstance(name, ast.Constant) and isinstance(name.value, str):
                self._add(ns, name.value, node.lineno, func.id == "hasattr" or len(node.args) == 3)
        elif isinstance(func, ast.Attribute):
            # torch.ops._C.op(...) or torch.ops._C.op.default(...): the op attribute is func or func.value
            target = func if self._namespace(func.value) else func.value
            starred = any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)
            self.calls[id(target)] = (None if starred else len(node.args),
                                      tuple(k.arg for k in node.keywords if k.arg is not None))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        ns = self._namespace(node.value)
        if ns and not (node.attr.startswith("__") and node.attr.endswith("__")):
            positional, keywords = self.calls.get(id(node), (None, ()))
            self._add(ns, node.attr, node.lineno, False, positional, keywords)
        self.generic_visit(node)

    def _add(self, ns: str, op: str, line: int, probe: bool, positional: int | None = None,
             keywords: tuple[str, ...] = ()) -> None:
        self.sites.append(CallSite(ns, op, self.file, line, self.module, probe, self.off_xpu > 0, positional,
                                   keywords, ".".join(self.scope)))


def _terminates(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


_NON_XPU = {"is_cuda", "is_rocm", "is_cpu", "is_tpu", "is_cuda_alike", "is_out_of_tree", "has_device_capability",
            "is_device_capability", "is_device_capability_family"}


def _off_xpu(test: ast.expr) -> tuple[bool, bool]:
    """(the if-body is off XPU, the else-branch is off XPU) for a platform check vLLM-style code makes.

    `if current_platform.is_xpu(): ... else: <off>`; `if current_platform.is_cuda(): <off>`; `not` swaps them.
    Anything else (and/or mixtures) is treated as reachable: the report must not hide a call by guessing.
    """
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        body, other = _off_xpu(test.operand)
        return other, body
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_off_xpu(v)[0] for v in test.values), False
    if isinstance(test, ast.Call):
        name = test.func.attr if isinstance(test.func, ast.Attribute) else getattr(test.func, "id", "")
        if name == "is_xpu":
            return False, True
        if name in _NON_XPU:
            return True, False
    return False, False


def _elif_off_xpu(node: ast.If) -> bool:
    """`if A and is_xpu(): ... elif A: <off>`: the elif repeats the other conditions, so it runs only off XPU."""
    test = node.test
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)):
        return False
    if len(node.orelse) != 1 or not isinstance(node.orelse[0], ast.If):
        return False
    xpu = [v for v in test.values if _off_xpu(v) == (False, True)]
    rest = {ast.dump(v) for v in test.values if _off_xpu(v) != (False, True)}
    inner = node.orelse[0].test
    inner_values = inner.values if isinstance(inner, ast.BoolOp) and isinstance(inner.op, ast.And) else [inner]
    return bool(xpu) and rest <= {ast.dump(v) for v in inner_values}
