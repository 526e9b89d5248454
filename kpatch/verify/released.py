"""`kpatch verify --wheel KERNELS --wheel APP`: the op contract between two released halves (wheels, sdists,
folders, requirements, or distributions installed with `--python`), read statically: the kernels' registrations
from their extension modules (or their C++ when the half is source), the application's calls from its Python, and
the same contract and XPU reachability analysis `kpatch verify` runs on two patched worktrees."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kpatch import scratch
from kpatch.output.ui import UI
from kpatch.verify.contract import (
    ContractReport,
    Gap,
    Side,
    check_sides,
    extension_modules,
    pycalls,
    read_app,
    read_binaries,
    read_kernels,
)
from kpatch.verify.gate import first_problem
from kpatch.verify.model import Check, Status, failed, passed
from kpatch.verify.release import Release, open_release
from kpatch.verify.run import ContractResult, Symptom, VerifyResult

INSTALLED = ("installed", "wheel")  # halves whose registrations are only in built binaries


@dataclass(frozen=True)
class Halves:
    kernels: Release
    app: Release


def verify_released(ui: UI, kernels: str, app: str, *, python: str | None, cache: Path) -> VerifyResult:
    """The contract of a released pair; the halves are unpacked into a temporary folder, removed after."""
    with scratch.folder("verify") as tmp:
        ui.note(f"opening {kernels}")
        k = open_release(kernels, Path(tmp) / "kernels", python=python, cache=cache)
        ui.note(f"opening {app}")
        a = open_release(app, Path(tmp) / "app", python=python, cache=cache)
        ui.note(f"reading the op contract {k.label()} -> {a.label()}")
        return check_released(k, a)


def read_registrations(half: Release, *, kernels: bool) -> Side:
    """A half's registrations: from its extension modules when it is built (a wheel, an environment, a folder
    holding modules), from its C++ when it is source (an sdist, a source tree)."""
    if half.kind in INSTALLED or (half.kind == "folder" and extension_modules(half.root, half.packages)):
        return read_binaries(half.root, half.packages)
    return read_kernels(half.root) if kernels else read_app(half.root)


def check_released(kernels: Release, app: Release) -> VerifyResult:
    """The checks and the contract of one released pair (both halves already opened)."""
    k_side = read_registrations(kernels, kernels=True)
    a_side = read_registrations(app, kernels=False)
    checks = [_opened(kernels, k_side, "registers"), _opened(app, a_side, "declares")]
    report = check_sides(k_side, a_side, app.root, (), app.packages)
    seen = symptoms(report, app)
    subject = f"{kernels.label()} -> {app.label()}"
    if not k_side.defined and not k_side.problems:
        checks.append(failed("contract", subject, f"{kernels.label()} registers no op (no extension module "
                             "with a TORCH_LIBRARY block, no C++ source with one): nothing to serve vLLM's calls",
                             "give the kernels' wheel, sdist or folder first, then the application's"))
    elif not report.ok:
        checks.append(failed("contract", subject, first_problem(report), "a kernels release that registers these "
                             "ops for XPU with the application's schemas (or an application release that does not "
                             "call them on XPU)"))
    elif report.keys_unread:
        checks.append(Check("contract", subject, Status.WARN, f"every op {app.name or 'the application'} calls on "
                            f"the XPU path is defined with its declared schema, but for {len(report.keys_unread)} "
                            "of them the binary does not say which dispatch keys register them (an impl inside a "
                            "TORCH_LIBRARY block): that they run on XPU is not checked",
                            "kpatch verify --installed on a machine with an XPU asks the live dispatcher"))
    else:
        checks.append(passed("contract", subject, f"every op {app.name or 'the application'} calls on the XPU "
                             "path is served with its declared schema"))
    return VerifyResult(lock=None, checks=tuple(checks),
                        contracts=(ContractResult(kernels.label(), app.label(), report, seen),), provenance=None)


def _opened(half: Release, side: Side, verb: str) -> Check:
    digest = f", sha256 {half.sha256[:16]}…" if half.sha256 else ""
    namespaces = sorted({ns for ns, _ in side.defined})
    where = f" in {', '.join(namespaces)}" if namespaces else ""
    place = f" ({half.root})" if half.kind in ("folder", "installed") else ""  # an archive's folder is temporary
    return passed("release", half.label(), f"{verb} {len(side.defined)} op schema(s){where}{digest}{place}")


def symptoms(report: ContractReport, app: Release) -> tuple[Symptom, ...]:
    """What a user would see, one line per reached call of an op the kernels lack, do not serve on XPU, or
    declare so that the call cannot bind: the exception torch raises there."""
    out: list[Symptom] = []
    for module in report.missing:
        for op in module.ops:
            site = op.sites[0]
            if op.gap is Gap.UNDEFINED:
                error = f"AttributeError: '_OpNamespace' '{op.namespace}' object has no attribute '{op.op}'"
            else:
                error = (f"NotImplementedError: Could not run '{op.namespace}::{op.op}' with arguments from the "
                         "'XPU' backend")
            out.append(Symptom(f"{op.namespace}.{op.op}", str(site), site.function, error))
    for u in report.unbound:
        out.append(Symptom(f"{u.namespace}.{u.op}", str(u.call), u.call.function,
                           f"RuntimeError: {u.namespace}::{u.op}() {u.reason} (the kernels' schema)"))
    breaking = {(m.namespace, m.op): m for m in report.mismatches if m.breaking}
    if breaking:
        sites, _ = pycalls.call_sites(app.root, frozenset(ns for ns, _ in breaking), app.packages)
        for s in sites:
            m = breaking.get((s.namespace, s.op))
            if m is not None and not s.probe and not s.off_xpu:
                out.append(Symptom(f"{s.namespace}.{s.op}", f"{s.file}:{s.line}", s.function,
                                   f"RuntimeError from the dispatcher: the kernels register {m.got}, the "
                                   f"application declares {m.want}"))
    return tuple(out)
