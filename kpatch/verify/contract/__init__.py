"""The op contract between the kernels and the application, read statically from their two patched worktrees.

The kernels define op schemas and register kernels per dispatch key (C++); the application declares the same ops
in its own C++ bindings and calls them by name from Python. The report: ops the application calls that the
kernels do not serve on XPU (grouped by calling module), and schema differences for ops both sides define.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from kpatch.config import CudaOnly
from kpatch.verify.contract import binary, cmake, cpp, pycalls, schema
from kpatch.verify.contract.pycalls import CallSite
from kpatch.verify.contract.reach import Reach, Verdict
from kpatch.verify.contract.schema import Schema, SchemaDiff

# Keys whose kernel serves the application on XPU: the device key itself, a composite registered for every
# backend, or CPU: an XPU kernels package registers a CPU kernel only for ops that take host tensors on purpose
# (get_xpu_view_from_cpu_tensor, swap_blocks_batch's pointer lists), so that is the key such a call dispatches to.
XPU_KEYS = frozenset({"XPU", "CompositeExplicitAutograd", "CompositeImplicitAutograd",
                      "CompositeExplicitAutogradNonFunctional", "CPU"})
# The application's reference declarations are its CUDA build: the XPU kernels stand in for exactly that `_C`.
# Its CPU and ROCm builds declare some of the same names with their own schemas, so they are not read.
APP_OTHER_BACKENDS = ("csrc/cpu/", "csrc/rocm/")
_CPP_SUFFIXES = {".cpp", ".cc", ".cxx", ".cu", ".h", ".hpp", ".cuh"}


@dataclass(frozen=True)
class Site:
    """A file:line in one of the worktrees."""

    file: str
    line: int

    def __str__(self) -> str:  # line 0: a built binary, which has no lines
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class Call(Site):
    """A call site in the application's Python, with its evidence."""

    function: str = ""  # the enclosing definitions ("Class.method"); "" at module level
    why: str = field(default="", compare=False)  # how XPU reaches it (a path of uses), or why it never does


@dataclass(frozen=True)
class Defined:
    namespace: str
    op: str
    schema: Schema
    site: Site


@dataclass(frozen=True)
class Side:
    """What one worktree defines and registers, per (namespace, op)."""

    defined: dict[tuple[str, str], Defined]
    keys: dict[tuple[str, str], tuple[str, ...]]  # dispatch keys with a kernel
    problems: tuple[str, ...]  # "file:line: ..." for schemas that do not parse, unresolved library names
    other_backends: frozenset[tuple[str, str]] = frozenset()  # declared only by another backend's build


class Gap(Enum):
    """Why a called op is not served on XPU."""

    UNDEFINED = "not defined by the kernels"
    NO_XPU_KERNEL = "defined, but no kernel for XPU"


@dataclass(frozen=True)
class MissingOp:
    namespace: str
    op: str
    gap: Gap
    keys: tuple[str, ...]  # the keys the kernels do register it for (NO_XPU_KERNEL)
    sites: tuple[Call, ...]  # the application's call sites in one module


@dataclass(frozen=True)
class ModuleGaps:
    """The ops one application module calls that the kernels do not serve on XPU."""

    module: str
    ops: tuple[MissingOp, ...]


@dataclass(frozen=True)
class Mismatch:
    namespace: str
    op: str
    declared: Site  # the application's C++ declaration
    registered: Site  # the kernels' definition
    want: str  # canonical schema texts
    got: str
    diffs: tuple[SchemaDiff, ...]
    breaking: bool  # False when every call valid under `want` also binds to `got` (only added defaults)


@dataclass(frozen=True)
class UnboundCall:
    """A call on the XPU path whose arguments do not fit the schema the kernels register."""

    namespace: str
    op: str
    call: Call
    registered: Site
    reason: str


@dataclass(frozen=True)
class Finding:
    """One error of the report at one call site, with a fingerprint that survives moved lines."""

    op: str  # "ns.op"
    kind: str  # "undefined", "no-xpu-kernel" or "unbound"
    function: str  # "file::Class.method", the calling function
    site: Call
    detail: str

    @property
    def fingerprint(self) -> tuple[str, str, str]:
        return self.op, self.kind, self.function


@dataclass(frozen=True)
class NotReached:
    """A call that would be an error, dismissed: the application never runs it on XPU (site.why says why)."""

    namespace: str
    op: str
    kind: str  # "undefined", "no-xpu-kernel" or "unbound"
    site: Call


@dataclass(frozen=True)
class ContractReport:
    namespaces: tuple[str, ...]  # the libraries the kernels serve: only calls into these are checked
    missing: tuple[ModuleGaps, ...]  # errors: called, not served on XPU, not listed cuda-only
    mismatches: tuple[Mismatch, ...]
    unbound: tuple[UnboundCall, ...]  # errors: calls on the XPU path that do not bind to the kernels' schema
    cuda_only: tuple[str, ...]  # listed ops the application calls that are indeed not served ("ns.op")
    other_backends: tuple[str, ...]  # called ops only the application's CPU/ROCm builds declare, not reached on XPU
    stale: tuple[str, ...]  # warnings: listed ops now served on XPU, or no longer called
    off_xpu_calls: int  # call sites inside a branch a platform check keeps off XPU (not counted as calls)
    probes: int  # hasattr/getattr(..., default) sites: the caller handles absence
    problems: tuple[str, ...]  # errors: unreadable schemas
    not_reached: tuple[NotReached, ...] = ()  # calls of unserved ops (or unbound calls) XPU never runs, and why
    accepted: tuple[Finding, ...] = ()  # findings a person accepted (the verify baseline): not errors
    # called ops the kernels define whose dispatch keys their binary does not say: not errors, never passed
    keys_unread: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unbound or self.problems or any(m.breaking for m in self.mismatches))


def findings(report: ContractReport) -> list[Finding]:
    """The missing ops and unbound calls of a report, one per call site."""
    out = []
    for module in report.missing:
        for op in module.ops:
            kind = "undefined" if op.gap is Gap.UNDEFINED else "no-xpu-kernel"
            out += [Finding(f"{op.namespace}.{op.op}", kind, f"{s.file}::{s.function}", s, op.gap.value)
                    for s in op.sites]
    out += [Finding(f"{u.namespace}.{u.op}", "unbound", f"{u.call.file}::{u.call.function}", u.call, u.reason)
            for u in report.unbound]
    return out


def accept(report: ContractReport, accepted: Callable[[Finding], bool]) -> ContractReport:
    """The report with the findings `accepted` takes out of its errors (kept in report.accepted)."""
    taken = [f for f in findings(report) if accepted(f)]
    if not taken:
        return report
    sites = {(f.op, f.kind, f.site) for f in taken}
    missing = []
    for module in report.missing:
        ops = []
        for op in module.ops:
            kind = "undefined" if op.gap is Gap.UNDEFINED else "no-xpu-kernel"
            left = tuple(s for s in op.sites if (f"{op.namespace}.{op.op}", kind, s) not in sites)
            if left:
                ops.append(dataclasses.replace(op, sites=left))
        if ops:
            missing.append(ModuleGaps(module.module, tuple(ops)))
    unbound = tuple(u for u in report.unbound if (f"{u.namespace}.{u.op}", "unbound", u.call) not in sites)
    return dataclasses.replace(report, missing=tuple(missing), unbound=unbound,
                               accepted=(*report.accepted, *taken))


def read_kernels(root: Path) -> Side:
    """The schemas the kernels define and the dispatch keys they register, from every C++ file under root."""
    return _read_side(root, cmake.extension_targets(root), skip=())


def read_app(root: Path) -> Side:
    """The schemas the application declares in its own C++ bindings (its CUDA build)."""
    return _read_side(root, cmake.extension_targets(root), skip=APP_OTHER_BACKENDS)


def _read_side(root: Path, targets: dict[str, tuple[str, ...]], skip: tuple[str, ...]) -> Side:
    found: list[tuple[str, cpp.Registrations]] = []
    problems: list[str] = []
    other: set[tuple[str, str]] = set()
    for path in _cpp_files(root):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        if "TORCH_LIBRARY" not in text:
            continue
        regs = cpp.registrations(text, rel, targets.get(rel, ()))
        if rel.startswith(skip):
            other |= {(d.namespace, cpp.op_name(d.schema)) for d in regs.definitions}
            continue
        problems += [f"{where}: library named by TORCH_EXTENSION_NAME, but no CMake extension target lists {rel}"
                     for where in regs.unresolved]
        found.append((rel, regs))
    return _side(found, problems, other)


def read_binaries(root: Path, packages: tuple[str, ...] | None = None) -> Side:
    """The schemas and dispatch keys the built extension modules under `root` register (a wheel's, or an
    installed environment's `packages`), read from their symbols and strings (kpatch.verify.contract.binary)."""
    found: list[tuple[str, cpp.Registrations]] = []
    problems: list[str] = []
    for path in extension_modules(root, packages):
        rel = path.relative_to(root).as_posix()
        try:
            module = binary.read(path.read_bytes(), rel)
        except (binary.NotElf, struct.error) as err:
            problems.append(f"{rel}: cannot be read as an extension module ({err}): its op registrations are unknown")
            continue
        problems += module.problems
        found.append((rel, module.registrations))
    return _side(found, problems, set())


def extension_modules(root: Path, packages: tuple[str, ...] | None = None) -> list[Path]:
    """The importable extension modules (`_C.abi3.so`, `x.cpython-312-x86_64-linux-gnu.so`) under root's packages,
    not the shared libraries they load (`lib*.so`)."""
    folders = [root / p for p in packages] if packages is not None else [root]
    out = []
    for folder in folders:
        if folder.is_dir():
            out += sorted(p for p in folder.rglob("*.so") if not p.name.startswith("lib") and p.is_file())
    return out


def _side(found: list[tuple[str, cpp.Registrations]], problems: list[str], other: set[tuple[str, str]]) -> Side:
    defined: dict[tuple[str, str], Defined] = {}
    keys: dict[tuple[str, str], list[str]] = {}
    for rel, regs in found:
        for d in regs.definitions:
            try:
                parsed = schema.parse(d.schema)
            except schema.SchemaSyntaxError as err:
                problems.append(f"{d.file}:{d.line}: schema does not parse: {err}")
                continue
            defined.setdefault((d.namespace, parsed.name), Defined(d.namespace, parsed.name, parsed, Site(rel, d.line)))
        for impl in regs.implementations:
            keys.setdefault((impl.namespace, impl.op.split(".", 1)[0]), []).append(impl.key)
    return Side(defined=defined, keys={k: tuple(dict.fromkeys(v)) for k, v in keys.items()},
                problems=tuple(problems), other_backends=frozenset(other - set(defined)))


def _cpp_files(root: Path) -> Iterable[Path]:
    """C++ sources and headers under root, without hidden folders (.git), build output or vendored code."""
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d not in ("build", "third_party"))
        for name in sorted(files):
            if Path(name).suffix in _CPP_SUFFIXES:
                yield Path(folder) / name


def check(kernels_root: Path, app_root: Path, cuda_only: tuple[CudaOnly, ...] = ()) -> ContractReport:
    """The whole contract between two patched worktrees."""
    return check_sides(read_kernels(kernels_root), read_app(app_root), app_root, cuda_only)


def check_sides(kernels: Side, app: Side, app_root: Path, cuda_only: tuple[CudaOnly, ...] = (),
                packages: tuple[str, ...] | None = None) -> ContractReport:
    """The contract from both sides' registrations (already read) and the application's Python under `app_root`
    (only its `packages` when given, as in an environment's site-packages)."""
    namespaces = frozenset(ns for ns, _ in (*kernels.defined, *kernels.keys))
    sites, broken = pycalls.call_sites(app_root, namespaces, packages)
    model = Reach(app_root, pycalls.package_files(app_root, packages),
                  lambda ns, op: (ns, op) in kernels.defined or (ns, op) in kernels.keys)
    return compare(kernels, app, sites, cuda_only, namespaces,
                   problems=tuple(f"{b} (cannot be read: its op calls are unknown)" for b in broken),
                   reach=lambda s: model.site(s.file, s.line, s.op))


def serves_xpu(kernels: Side, namespace: str, op: str) -> bool:
    return any(k in XPU_KEYS for k in kernels.keys.get((namespace, op), ()))


def keys_unread(kernels: Side, namespace: str, op: str) -> bool:
    """The kernels define the op, but for which dispatch keys is not in their binary (binary.UNKNOWN_KEY)."""
    return binary.UNKNOWN_KEY in kernels.keys.get((namespace, op), ())


def compare(kernels: Side, app: Side, sites: list[CallSite], cuda_only: tuple[CudaOnly, ...],
            namespaces: frozenset[str], problems: tuple[str, ...] = (),
            reach: Callable[[CallSite], Verdict] | None = None) -> ContractReport:
    """The report from both sides' registrations and the application's call sites; `reach` tells whether a
    call that would be an error is run on XPU at all (see kpatch.verify.contract.reach)."""
    calls = [s for s in sites if not s.probe and not s.off_xpu]
    called = {(s.namespace, s.op, s.module) for s in calls}
    listed: set[str] = set()
    other: set[str] = set()
    unread: set[str] = set()
    by_module: dict[str, dict[tuple[str, str], list[Call]]] = {}
    dismissed: list[NotReached] = []
    verdicts: dict[CallSite, Verdict] = {}

    def verdict(s: CallSite) -> Verdict:
        if s not in verdicts:
            verdicts[s] = reach(s) if reach else Verdict(True, "")
        return verdicts[s]

    for s in calls:
        if serves_xpu(kernels, s.namespace, s.op):
            continue
        if keys_unread(kernels, s.namespace, s.op):
            unread.add(f"{s.namespace}.{s.op}")
            continue
        if any(c.matches(s.namespace, s.op, s.module) for c in cuda_only):
            listed.add(f"{s.namespace}.{s.op}")
        elif (s.namespace, s.op) in app.other_backends and not verdict(s).reached:
            # Declared only by the application's CPU or ROCm build: not counted when XPU never runs the call. Where
            # an op is declared is no evidence of where it is called from (a backend a user picks from a registry
            # with no platform check, `--mamba-backend cpu`, runs a CPU build's op on XPU), so a call the model
            # cannot keep off XPU is a finding like any other.
            other.add(f"{s.namespace}.{s.op}")
        else:
            gap = _gap(kernels, s.namespace, s.op)
            v = verdict(s)
            site = Call(s.file, s.line, s.function, v.why)
            if v.reached:
                by_module.setdefault(s.module, {}).setdefault((s.namespace, s.op), []).append(site)
            else:
                dismissed.append(NotReached(s.namespace, s.op, gap, site))
    missing = tuple(ModuleGaps(module, tuple(
        MissingOp(ns, op, Gap.NO_XPU_KERNEL if _gap(kernels, ns, op) == "no-xpu-kernel" else Gap.UNDEFINED,
                  kernels.keys.get((ns, op), ()), tuple(where))
        for (ns, op), where in sorted(ops.items()))) for module, ops in sorted(by_module.items()))
    reachable = [s for s in calls if not any(c.module and c.matches(s.namespace, s.op, s.module) for c in cuda_only)]
    unbound: list[UnboundCall] = []
    for u, s in _unbound(kernels, reachable):
        v = verdict(s)
        call = Call(s.file, s.line, s.function, v.why)
        if v.reached:
            unbound.append(UnboundCall(u.namespace, u.op, call, u.registered, u.reason))
        else:
            dismissed.append(NotReached(s.namespace, s.op, "unbound", call))
    return ContractReport(
        namespaces=tuple(sorted(namespaces)), missing=missing, mismatches=_mismatches(kernels, app),
        unbound=tuple(unbound), cuda_only=tuple(sorted(listed)), other_backends=tuple(sorted(other)),
        stale=_stale(kernels, called, cuda_only), off_xpu_calls=sum(s.off_xpu for s in sites),
        probes=sum(s.probe for s in sites), problems=(*kernels.problems, *app.problems, *problems),
        not_reached=tuple(dismissed), keys_unread=tuple(sorted(unread)))


def _gap(kernels: Side, ns: str, op: str) -> str:
    return "no-xpu-kernel" if (ns, op) in kernels.keys or (ns, op) in kernels.defined else "undefined"


def _unbound(kernels: Side, calls: list[CallSite]) -> list[tuple[UnboundCall, CallSite]]:
    out = []
    for s in calls:
        registered = kernels.defined.get((s.namespace, s.op))
        if registered is None or s.positional is None:
            continue
        reason = schema.binds(registered.schema, s.positional, s.keywords)
        if reason:
            out.append((UnboundCall(s.namespace, s.op, Call(s.file, s.line, s.function), registered.site, reason),
                        s))
    return out


def _stale(kernels: Side, called: set[tuple[str, str, str]], cuda_only: tuple[CudaOnly, ...]) -> tuple[str, ...]:
    stale = []
    for entry in cuda_only:
        hits = [(ns, op) for ns, op, module in called if entry.matches(ns, op, module)]
        name = f"op {entry.op}" if entry.op else f"module {entry.module}"
        if not hits:
            stale.append(f"{name} (kpatch.toml:{entry.line}): nothing it names is called on the XPU path any more")
        elif all(serves_xpu(kernels, ns, op) for ns, op in hits):
            stale.append(f"{name} (kpatch.toml:{entry.line}): the kernels now serve every op it names on XPU")
    return tuple(stale)


def _mismatches(kernels: Side, app: Side) -> tuple[Mismatch, ...]:
    out = []
    for key, declared in sorted(app.defined.items()):
        registered = kernels.defined.get(key)
        if registered is None:
            continue
        diffs = schema.compare(declared.schema, registered.schema)
        if diffs:
            out.append(Mismatch(key[0], key[1], declared.site, registered.site, declared.schema.text(),
                                registered.schema.text(), tuple(diffs), schema.breaking(diffs)))
    return tuple(out)
