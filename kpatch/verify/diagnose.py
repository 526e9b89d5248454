"""`verify --installed` as a diagnosis: ask the live dispatcher, in a child Python, whether every op the installed
application calls has a kernel for XPU, and whether its registered schema is the application's declaration."""

from __future__ import annotations

import importlib.machinery
import json
import os
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from kpatch import procs, scratch
from kpatch.config import CudaOnly
from kpatch.verify import probe
from kpatch.verify.contract import Side, pycalls, schema
from kpatch.verify.contract.pycalls import CallSite
from kpatch.verify.installed import packages_of
from kpatch.verify.model import Check, failed, passed

TIMEOUT = 600  # importing torch and a big extension on a slow disk takes a minute; a hang must still end


@dataclass(frozen=True)
class OpState:
    """What the dispatcher knows about one op."""

    defined: bool
    keys: tuple[str, ...] = ()  # dispatch keys with a kernel registered directly
    xpu: bool = False  # a kernel for the XPU key itself
    computed: bool = False  # the XPU entry of the dispatch table is filled (a composite kernel counts)
    schema: str | None = None  # as torch prints it


@dataclass(frozen=True)
class Answer:
    """What the child reported."""

    torch: str
    imports: dict[str, str | None]  # module -> None (imported) or the error
    ops: dict[str, OpState]  # "ns::op" -> its state
    namespaces: tuple[str, ...]  # namespaces the kernels' modules added ops to


def extension_modules(dist: metadata.Distribution) -> list[str]:
    """The kernels' op libraries to import: compiled extensions, and modules named like one (`_C`, `_moe_C`)."""
    suffixes = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)
    out = []
    for file in dist.files or ():
        name = str(file)
        if "/" not in name or name.startswith(("__pycache__", "..")) or ".dist-info/" in name:
            continue
        stem = next((name[:-len(s)] for s in suffixes if name.endswith(s)), None)
        if stem is None and name.endswith(".py") and name.rsplit("/", 1)[-1][:-3].endswith("_C"):
            stem = name[:-3]
        if stem is not None:
            out.append(stem.replace("/", "."))
    return sorted(set(out))


def run_probe(modules: list[str], ops: list[str], python: str = sys.executable) -> Answer:
    """Run the probe in a child with this process's import path; a crash (say, an ABI-mismatched extension
    that segfaults on import) becomes a KpatchError-free Answer with the error as the import result.

    Nothing of the working folder is importable there (a `torch.py` in the project or a worktree must not run):
    the probe is started as a file with -P, in an empty folder of its own, without the working folder on its path.
    It sees what upstream builds see of kpatch's environment (`procs.upstream_env`): no credential.
    """
    # torch and the extensions are upstream code: the allowlisted environment (no token, no cloud key), and HOME
    env = procs.upstream_env(os.environ, {"PYTHONPATH": os.pathsep.join(import_path(sys.path, str(Path.cwd())))})
    if "HOME" in os.environ:
        env.setdefault("HOME", os.environ["HOME"])
    request = json.dumps({"modules": modules, "ops": ops, "key": "XPU"})
    with scratch.folder("probe") as empty:
        done = procs.run([python, "-P", str(Path(probe.__file__).resolve())], stdin=request, cwd=Path(empty),
                         env=env, timeout=TIMEOUT, merge=False)
    if done.timed_out:
        return Answer("?", {m: f"the probe did not finish in {TIMEOUT} s" for m in modules}, {}, ())
    if done.status != 0:
        tail = (done.errors.strip().splitlines() or [f"exit {done.status}"])[-1]
        why = f"the probe exited {done.status} ({tail})"
        return Answer("?", {m: why for m in modules} or {"torch": why}, {}, ())
    data = json.loads(done.output)
    states = {name: OpState(defined=v["defined"], keys=tuple(v["keys"]), xpu=v["xpu"], computed=v["computed"],
                            schema=v["schema"]) for name, v in data["ops"].items()}
    return Answer(data["torch"], data["imports"], states, tuple(data["namespaces"]))


def import_path(path: list[str], cwd: str) -> list[str]:
    """This process's import path for the child, less the working folder and anything relative to it."""
    here = os.path.realpath(cwd)
    return [p for p in path if Path(p).is_absolute() and os.path.realpath(p) != here]


def installed_calls(app: metadata.Distribution) -> list[CallSite]:
    """The op call sites in the installed application's packages."""
    root = Path(str(app.locate_file("")))
    sites, _ = pycalls.call_sites(root, packages=packages_of(app))
    return sites


def diagnose(kernels: metadata.Distribution, app: metadata.Distribution, declared: Side | None,
             cuda_only: tuple[CudaOnly, ...], kernels_wheel: str) -> list[Check]:
    """One check per imported module and per op the application calls on the XPU path."""
    calls = [s for s in installed_calls(app) if not s.probe and not s.off_xpu
             and not any(c.matches(s.namespace, s.op, s.module) for c in cuda_only)]
    wanted = sorted({f"{s.namespace}::{s.op}" for s in calls})
    modules = extension_modules(kernels)
    install = f"pip install --force-reinstall --no-deps {kernels_wheel}"
    name = str(kernels.metadata["Name"])
    if not modules:
        return [failed("dispatcher", name, "the installed distribution has no op library to import (no compiled "
                       "extension, no *_C module)", install)]
    answer = run_probe(modules, wanted)
    out: list[Check] = []
    for module, error in sorted(answer.imports.items()):
        out.append(passed("dispatcher", module, f"imported with torch {answer.torch}") if error is None else
                   failed("dispatcher", module, f"import failed: {error}", f"{install} (built against the "
                          "installed torch), or install the torch it was built against"))
    namespaces = set(answer.namespaces)
    if not namespaces and all(error is None for error in answer.imports.values()):
        out.append(failed("dispatcher", name, f"importing {', '.join(modules)} registered no ops", install))
    for qualname in wanted:
        namespace, op = qualname.split("::", 1)
        if namespace not in namespaces or (declared and (namespace, op) in declared.other_backends):
            continue  # a library the kernels do not serve, or an op of another backend's build
        where = [s for s in calls if (s.namespace, s.op) == (namespace, op)]
        out.append(_op_check(qualname, answer.ops.get(qualname, OpState(False)), where, declared, install))
    return out


def _op_check(qualname: str, found: OpState, where: list[CallSite], declared: Side | None,
              install: str) -> Check:
    namespace, op = qualname.split("::", 1)
    site = f"{where[0].file}:{where[0].line}" + (f" (+{len(where) - 1} more)" if len(where) > 1 else "")
    if not found.defined or found.schema is None:
        return failed("dispatcher", qualname, f"not registered; called from {site}: torch.ops.{namespace}.{op} "
                      "raises AttributeError", f"install a vllm-xpu-kernels that provides it: {install} "
                      "(built by 'kpatch build-wheels' with the kernels stack)")
    if not found.xpu and not found.computed and "CPU" not in found.keys:  # CPU: host-tensor ops (see contract)
        keys = ", ".join(found.keys) or "no key"
        return failed("dispatcher", qualname, f"registered for {keys} but has no kernel for XPU; called from "
                      f"{site}", "the kernels must register it with torch::kXPU (a kernels patch), then rebuild")
    registered = schema.parse(found.schema)
    problems = [f"{s.file}:{s.line} {why}" for s in where if s.positional is not None
                and (why := schema.binds(registered, s.positional, s.keywords))]
    want = declared.defined.get((namespace, op)) if declared else None
    diffs = [d for d in schema.compare(want.schema, registered) if d.breaking] if want else []
    if diffs or problems:
        against = f"the application's declaration {want.site}" if want else "its call sites"
        detail = "; ".join([d.detail for d in diffs] + problems)
        return failed("dispatcher", qualname, f"registered schema {registered.text()} differs from {against}: "
                      f"{detail}", "fix the kernels' registration to match the declaration (csrc/torch_bindings.cpp),"
                      f" rebuild and {install}")
    how = "XPU kernel" if found.xpu else "composite kernel (serves XPU)" if found.computed else \
        "CPU kernel (the op takes host tensors)"
    checked = f"schema matches the application's declaration {want.site}" if want else "its calls bind to its schema"
    return passed("dispatcher", qualname, f"{how}; {checked}")
