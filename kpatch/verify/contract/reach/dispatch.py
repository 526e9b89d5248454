"""vLLM's per-class dispatch on XPU: a CustomOp runs forward_xpu (by default forward_native), an XPU subclass
overrides a method, a backend says whether it supports the current device."""

from __future__ import annotations

import ast
import re

from kpatch.verify.contract.reach.source import Module
from kpatch.verify.contract.reach.values import Values
from kpatch.verify.contract.reach.verdict import Verdict

FORWARDS = ("forward_cuda", "forward_hip", "forward_cpu", "forward_tpu", "forward_oot")

PLATFORMS_ON_XPU = frozenset({"XPU", "OOT"})  # PlatformEnum keys an XPU run may look up (OOT: a plugin platform)


class Dispatch(Values):
    """The class-level choices of what XPU runs."""

    def _custom_op(self, mod: Module, cls: ast.ClassDef, name: str) -> Verdict | None:
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

    def _xpu_override(self, _mod: Module, cls: ast.ClassDef, name: str) -> str:
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


def platform_entry(mod: Module, ref: ast.AST) -> str:
    """`PlatformEnum.CPU` when ref is (in a list under) that key of a dict keyed by platform, for a platform other
    than XPU (`{PlatformEnum.CPU: [CPUKernel], PlatformEnum.XPU: [TritonKernel]}`): vLLM looks such tables up
    under the current platform. "" otherwise."""
    child, parent = ref, mod.parents.get(ref)
    while isinstance(parent, (ast.List, ast.Tuple, ast.Set)):
        child, parent = parent, mod.parents.get(parent)
    if not isinstance(parent, ast.Dict) or child not in parent.values:
        return ""
    key = parent.keys[parent.values.index(child)]
    enum = key.value if isinstance(key, ast.Attribute) else None
    enum_name = enum.id if isinstance(enum, ast.Name) else enum.attr if isinstance(enum, ast.Attribute) else ""
    if key is None or enum_name != "PlatformEnum" or not isinstance(key, ast.Attribute) or key.attr in PLATFORMS_ON_XPU:
        return ""
    return f"PlatformEnum.{key.attr}"
