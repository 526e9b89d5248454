"""Verify the pair: against its lock, the op contract between the worktrees, and (installed) the live environment."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from kpatch.engine.plan import load_all_series
from kpatch.errors import LockError, VerifyFailed
from kpatch.output.ui import UI
from kpatch.project.workspace import Workspace
from kpatch.verify import baseline, pair
from kpatch.verify import diagnose as diag
from kpatch.verify import installed as inst
from kpatch.verify.contract import ContractReport, Side, check_sides, read_app, read_kernels
from kpatch.verify.gate import applied, contract_pairs, first_problem
from kpatch.verify.model import Check, Status, failed, passed
from kpatch.wheels import lock as lockfile
from kpatch.wheels import notes
from kpatch.wheels.lock import Lock
from kpatch.wheels.release import Published


@dataclass(frozen=True)
class Symptom:
    """What a user would see at one call site the contract fails on: the exception torch raises there."""

    op: str  # "ns.op"
    site: str  # "file:line" in the application
    function: str  # the calling function
    error: str  # "AttributeError: '_OpNamespace' '_C' object has no attribute '...'"


@dataclass(frozen=True)
class ContractResult:
    kernels: str
    app: str
    report: ContractReport | None  # None: a worktree was not applied, so the contract was not read
    seen: tuple[Symptom, ...] = ()  # verify --wheel: what a user would see at each failing call


@dataclass(frozen=True)
class VerifyResult:
    lock: Path | None  # the lock checked (None: there was none)
    checks: tuple[Check, ...]
    contracts: tuple[ContractResult, ...]
    provenance: inst.Provenance | None  # with --installed and a lock

    @property
    def ok(self) -> bool:
        return all(c.status is not Status.FAIL for c in self.checks)


def verify(ws: Workspace, ui: UI, *, lock_path: Path | None, installed: bool,
           update_baseline: str | None = None) -> VerifyResult:
    """`update_baseline`: a reason; record today's contract findings as accepted (verify-baseline.toml) first."""
    path = lock_path or ws.dist_dir / lockfile.LOCK_NAME
    if lock_path is not None and not path.is_file():
        raise LockError(f"no lock at {path}")
    checks: list[Check] = []
    lock = None
    if path.is_file():
        ui.note(f"checking {path} and its wheels")
        lock = lockfile.read(path)
        checks += _lock_checks(ws, lock, path)
    else:
        checks.append(Check("lock", str(path), Status.SKIP, "no lock: the built pair was not checked",
                            "kpatch build-wheels"))
    contracts, declared = _contracts(ws, ui, checks, update_baseline)
    provenance = None
    if installed:
        provenance = _installed(ws, ui, lock, path, declared, checks)
    if all(c.status is Status.SKIP for c in checks):  # a verify that checked nothing has not passed
        checks.append(failed("verify", "nothing checked", "no lock and no applied worktrees: nothing was verified",
                             "kpatch apply, then kpatch build-wheels"))
    return VerifyResult(lock=path if lock else None, checks=tuple(checks), contracts=tuple(contracts),
                        provenance=provenance)


def _lock_checks(ws: Workspace, lock: Lock, path: Path) -> list[Check]:
    checks = pair.check_files(lock, path.parent)
    wheels, unreadable = pair.read_locked(lock, path.parent)
    checks += unreadable
    checks += pair.check_pins(lock, ws.stack, wheels)
    checks += pair.check_torch(lock, wheels)
    series = load_all_series(ws.stack)
    for up in lock.upstreams:
        if up.name in series and series[up.name].stack_hash() != up.stack_hash:
            checks.append(Check("lock", up.name, Status.WARN, f"built from another {up.name} stack than "
                                f"{ws.stack.upstreams[0].patches.parent} holds now (lock {up.stack_hash[:12]}, "
                                f"patches {series[up.name].stack_hash()[:12]})", "kpatch build-wheels"))
    return checks


def _contracts(ws: Workspace, ui: UI, checks: list[Check], update_baseline: str | None = None
               ) -> tuple[list[ContractResult], dict[str, Side]]:
    """The static contract of each (kernels, app) pair whose worktrees are applied; the apps' declarations.
    Findings the baseline accepts are not errors (see kpatch.verify.baseline)."""
    results, declared = [], {}
    raw: dict[str, ContractReport] = {}
    for kernels, app in contract_pairs(ws):
        subject = f"{kernels} -> {app}"
        if not (applied(ws, kernels) and applied(ws, app)):
            checks.append(Check("contract", subject, Status.SKIP, "the worktrees are not applied, so the op "
                                "contract was not read", "kpatch apply"))
            results.append(ContractResult(kernels, app, None))
            continue
        ui.note(f"reading the op contract {subject}")
        declared[app] = read_app(ws.worktree(app))
        raw[subject] = check_sides(read_kernels(ws.worktree(kernels)), declared[app], ws.worktree(app),
                                   ws.stack.cuda_only)
        results.append(ContractResult(kernels, app, raw[subject]))
    path = baseline.path_of(ws.stack)
    ops = baseline.stack_ops(ws.stack)
    if update_baseline is not None:
        recorded, left_out = baseline.update(path, raw, update_baseline, ops)
        own = f"; left out {len(left_out)} of ops the stacks add or call (never accepted)" if left_out else ""
        checks.append(passed("contract", str(path), f"recorded {len(recorded)} accepted finding(s){own}"))
    accepted = baseline.read(path)
    for i, result in enumerate(results):
        if result.report is None:
            continue
        subject = f"{result.kernels} -> {result.app}"
        report = baseline.apply(result.report, subject, accepted, ops)
        results[i] = ContractResult(result.kernels, result.app, report)
        for warning in report.stale:
            checks.append(Check("contract", subject, Status.WARN, f"[verify] cuda-only {warning}",
                                "remove the entry from kpatch.toml"))
        known = f"; {len(report.accepted)} accepted finding(s) in {ws.stack.baseline}" if report.accepted else ""
        if report.ok:
            served = f"{len(report.cuda_only)} listed cuda-only" if report.cuda_only else "none listed cuda-only"
            checks.append(passed("contract", subject, f"every op {result.app} calls on the XPU path is served with "
                                 f"its declared schema ({served}{known})"))
        else:
            checks.append(failed("contract", subject, first_problem(report) + known, "fix the stacks (a kernels "
                                 "patch that registers the op for XPU with vLLM's schema), list an op CUDA-only on "
                                 "purpose in kpatch.toml [verify] cuda-only, or accept today's findings: kpatch "
                                 "verify --update-baseline REASON"))
    gone = baseline.stale(raw, accepted)
    if gone:
        checks.append(Check("contract", str(path), Status.WARN, f"{len(gone)} accepted finding(s) no longer "
                            f"reported, e.g. {gone[0].op} in {gone[0].function}",
                            "kpatch verify --update-baseline REASON (drops them)"))
    return results, declared


def _installed(ws: Workspace, ui: UI, lock: Lock | None, path: Path, declared: dict[str, Side],
               checks: list[Check]) -> inst.Provenance | None:
    ui.note("checking the installed set")
    found: dict[str, metadata.Distribution] = {}
    wheel_files: dict[str, str] = {}
    provenance = None
    if lock is not None:
        version_checks, found = inst.check_versions(lock, path.parent)
        checks += version_checks
        for wheel in lock.wheels:
            wheel_files[wheel.upstream] = str(path.parent / wheel.filename)
            if wheel.upstream in found:
                checks.append(inst.check_record(wheel, found[wheel.upstream], path.parent))
        provenance = inst.provenance(lock, path, found)
        checks.append(Check("provenance", str(path), Status.PASS if provenance.lock else Status.WARN,
                            provenance.detail, "" if provenance.lock else f"pip install the wheels beside {path}"))
        checks.append(pair.check_environment_torch(lock, pair.read_locked(lock, path.parent)[0],
                                                   inst.installed_version("torch")))
    else:
        for up in ws.stack.upstreams:  # no lock: the distributions are named like their upstreams
            dist = inst.distribution(up.name)
            if dist is None:
                checks.append(failed("installed", up.name, "not installed (and no lock names its package)",
                                     "kpatch build-wheels, then pip install dist/*.whl"))
            else:
                found[up.name] = dist
    series = load_all_series(ws.stack)
    for name, dist in found.items():
        checks += inst.check_patches(series[name], dist)
    for kernels, app in contract_pairs(ws):
        if kernels in found and app in found:
            ui.note(f"asking the dispatcher about the ops {app} calls (in a child Python)")
            checks += diag.diagnose(found[kernels], found[app], declared.get(app), ws.stack.cuda_only,
                                    wheel_files.get(kernels, f"<{kernels} wheel>"))
    return provenance


def release_verified(ws: Workspace, ui: UI, lock: Path, publish: Callable[[str], Published]) -> Published:
    """`kpatch release`: verify the set against its lock (the op contract included) and publish it, with notes
    that carry the verify summary and the last test reports. A set that does not verify is refused (exit 1)
    naming the first failed check, and nothing is written."""
    if not lock.is_file():
        raise LockError(f"no lock at {lock}: build the set first (kpatch build-wheels)")
    result = verify(ws, ui, lock_path=lock, installed=False)
    bad = [c for c in result.checks if c.status is Status.FAIL]
    if bad:
        raise VerifyFailed(f"the set does not verify ({len(bad)} failed check(s), first {bad[0].area} "
                           f"{bad[0].subject}: {bad[0].detail}); nothing was released ('kpatch verify' shows all)")
    counts = {s: sum(c.status is s for c in result.checks) for s in Status}
    lines = [f"kpatch verify: {counts[Status.PASS]} passed, {counts[Status.WARN]} warned, "
             f"{counts[Status.SKIP]} skipped"]
    lines += [f"{c.area} {c.subject}: {c.detail}" for c in result.checks if c.area in ("contract", "pin", "torch")
              and c.status is Status.PASS]
    lines += [_test_summary(ws.reports_dir, up.name) for up in ws.stack.upstreams]
    return publish(notes.body(ws.stack, lockfile.read(lock), tuple(lines)))


def _test_summary(reports: Path, upstream: str) -> str:
    """One line of the last `kpatch test` report of `upstream` in reports/, for the release notes."""
    # imported where used: JUnit reading only when there are test results to sum up
    from kpatch.testing import junit

    report = reports / f"{upstream}.xml"
    try:
        n = junit.parse(report.read_bytes()).counts()
    except FileNotFoundError:
        return f"kpatch test {upstream}: no report in {reports}"
    except (OSError, junit.JUnitError) as err:
        return f"kpatch test {upstream}: {report} unreadable ({err})"
    return f"kpatch test {upstream}: {n.passed} passed, {n.failed} failed, {n.errors} errors, {n.skipped} skipped " \
           f"(last run, {report})"
