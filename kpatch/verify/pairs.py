"""The released pairs: `kpatch verify --wheel`'s contract over released application versions x the kernels
version each pins (its requirements file) and the newest kernels on the index; which pairs serve a model on XPU,
and which ops each lacks. scripts/released_pairs.py writes the table into docs/verify.md; the nightly
(`--released-pairs`) says in its report whether the newest released pair carries the fix yet."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from kpatch import scratch
from kpatch.errors import KpatchError, UsageError
from kpatch.files import REQUIREMENTS_FILE, read_input
from kpatch.forge import offline_reason
from kpatch.verify.contract import findings
from kpatch.verify.release import Release, index_files, open_release
from kpatch.verify.released import check_released


@dataclass(frozen=True)
class Row:
    app: str  # "vllm 0.33.0"
    kernels: str  # "vllm_xpu_kernels 0.1.15.4"
    pinned: bool  # the app's requirements name exactly this kernels version
    serves_model: bool  # no finding at a call site under the model's package
    model_lacks: tuple[str, ...]  # ops the model calls on XPU that the kernels lack or declare differently
    lacks: int  # every op the app reaches on XPU that the kernels lack (not defined, or no XPU kernel)
    differ: int  # ops whose registered schema breaks the app's declaration or calls
    keys_unread: int  # called ops whose dispatch keys the binary does not say


@dataclass(frozen=True)
class Released:
    """What to check: the two distributions, where the app pins the kernels, and the model's package."""

    app: str = "vllm"
    kernels: str = "vllm_xpu_kernels"
    requirements: str = "requirements/xpu.txt"
    model: str = "vllm/models/kimi_k3/"  # a path prefix in the app
    model_name: str = "Kimi-K3"


def pinned_kernels(root: Path, kernels: str, requirements: str) -> str | None:
    """The kernels version the app's requirements file pins exactly (None: none, or not exactly)."""
    path = root / requirements
    if not os.path.lexists(path):
        return None
    text = read_input(path, REQUIREMENTS_FILE, UsageError).decode("utf-8", errors="replace")
    for line in text.splitlines():
        text = line.split("#", 1)[0].strip()
        if not text or text.startswith("-"):
            continue
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        specs = list(req.specifier)
        if canonicalize_name(req.name) == canonicalize_name(kernels) and len(specs) == 1 \
                and specs[0].operator == "==":
            return specs[0].version
    return None


def versions(project: str, index: str, *, sdist: bool) -> list[Version]:
    """The project's released versions on the index (with an sdist, or with a wheel), newest first."""
    out: set[Version] = set()
    for f in index_files(project, index):
        try:
            if sdist and f.filename.endswith((".tar.gz", ".zip")):
                out.add(parse_sdist_filename(f.filename)[1])
            elif not sdist and f.filename.endswith(".whl"):
                out.add(parse_wheel_filename(f.filename)[1])
        except (ValueError, InvalidVersion):
            continue
    return sorted((v for v in out if not v.is_prerelease), reverse=True)


def row(half_a: Release, half_k: Release, pinned: bool, model: str) -> Row:
    result = check_released(half_k, half_a)
    report = result.contracts[0].report
    assert report is not None  # check_released always reads the contract
    found = findings(report)
    in_model = sorted({f.op.split(".", 1)[1] for f in found if f.site.file.startswith(model)}
                      | {s.op.split(".", 1)[1] for s in result.contracts[0].seen if s.site.startswith(model)})
    return Row(f"{half_a.name} {half_a.version}", f"{half_k.name} {half_k.version}", pinned, not in_model,
               tuple(in_model), len({f.op for f in found if f.kind != "unbound"}),
               len({f"{m.namespace}.{m.op}" for m in report.mismatches if m.breaking}
                   | {f.op for f in found if f.kind == "unbound"}),
               len(report.keys_unread))


def rows(what: Released, app_versions: list[str], index: str, cache: Path,
         progress: Callable[[str], None] = lambda _line: None) -> list[Row]:
    """Each app version x the kernels it pins and the newest kernels on the index (KpatchError: the index, a
    download or a file fails; exit 4 or 2)."""
    newest = versions(what.kernels, index, sdist=False)
    if not app_versions or not newest:
        raise UsageError(f"{index}: no released {what.app if not app_versions else what.kernels} found")
    out = []
    with scratch.folder("pairs") as tmp:
        kernels: dict[str, Release] = {}  # each kernels release unpacked once
        for version in app_versions:
            progress(f"opening {what.app}=={version}")
            app = open_release(f"{what.app}=={version}", Path(tmp) / "app", cache=cache, index=index)
            pin = pinned_kernels(app.root, what.kernels, what.requirements)
            for kv in dict.fromkeys([*([pin] if pin else []), str(newest[0])]):
                if kv not in kernels:
                    progress(f"opening {what.kernels}=={kv}")
                    kernels[kv] = open_release(f"{what.kernels}=={kv}", Path(tmp) / "kernels", cache=cache,
                                               index=index)
                progress(f"checking {what.app} {version} x {what.kernels} {kv}")
                out.append(row(app, kernels[kv], kv == pin, what.model))
    return out


def table(found: list[Row], model_name: str, command: str) -> str:
    lines = [f"Made by `{command}` (each pair read with `kpatch verify --wheel`).", "",
             f"| vLLM | kernels | pinned by vLLM | serves {model_name} on XPU | {model_name} ops lacking or differing "
             "| ops vLLM reaches that the kernels lack | schemas that differ | dispatch keys unread |",
             "|---|---|---|---|---|---|---|---|"]
    for r in found:
        ops = ", ".join(f"`{op}`" for op in r.model_lacks) or "none"
        lines.append(f"| {r.app} | {r.kernels} | {'yes' if r.pinned else 'no (newest)'} | "
                     f"{'yes' if r.serves_model else '**no**'} | {ops} | {r.lacks} | {r.differ} | {r.keys_unread} |")
    return "\n".join(lines) + "\n"


def night_notes(what: Released, index: str, cache: Path) -> tuple[str, ...]:
    """The nightly's lines on the newest released pairs: whether each carries the fix (serves the model on XPU),
    and when one does, that the stack's patches should now be found merged. Never raises: an index that cannot
    be asked (KPATCH_OFFLINE, no network, a bad file) gives one line saying the check was skipped and why."""
    offline = offline_reason()
    if offline:
        return (f"released pairs: not checked ({offline}: the package index {index} is not asked)",)
    try:
        newest = versions(what.app, index, sdist=True)
        found = rows(what, [str(newest[0])] if newest else [], index, cache)
    except KpatchError as err:
        return (f"released pairs: not checked (the package index {index} could not be used: {err})",)
    lines = []
    for r in found:
        pair = f"{r.app} x {r.kernels} ({'pinned' if r.pinned else 'the newest kernels'})"
        if r.serves_model:
            lines.append(f"released pairs: {pair} carries the fix: every {what.model_name} op ({what.model}) is "
                         "served on XPU with the application's schemas; the stack's patches should now be found "
                         "merged upstream and dropped at the next rebase")
        else:
            lines.append(f"released pairs: {pair} does not carry the fix yet: {what.model_name} lacks "
                         f"{len(r.model_lacks)} op(s) on XPU ({', '.join(r.model_lacks)})")
    return tuple(lines)
