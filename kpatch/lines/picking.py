"""Which patches a backport carries: the PATCH arguments read against the source line's stacks, and whether the
target line has each one already (the same patch-id, or a `Backport-Of:` naming it) or a `Lines:` trailer keeps it
off the target."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kpatch.config import Stack
from kpatch.errors import UsageError
from kpatch.gitx import Repository, file_patch_ids
from kpatch.stack import Patch, Series


@dataclass(frozen=True)
class Wanted:
    """One patch of the source line a backport was asked for."""

    upstream: str
    patch: Patch

    @property
    def label(self) -> str:
        return f"{self.upstream}/{self.patch.name}"


def wanted(stack: Stack, series: Mapping[str, Series], specs: Sequence[str]) -> list[Wanted]:
    """The patches the arguments name, in the order given: `UPSTREAM/FILE.patch`, a patch file's path, or a file
    name only one of the line's stacks holds. A name none holds is a usage error naming the line's stacks."""
    found: list[Wanted] = []
    for spec in specs:
        item = _one(stack, series, spec)
        if any(w.upstream == item.upstream and w.patch.name == item.patch.name for w in found):
            raise UsageError(f"{spec}: named twice")
        found.append(item)
    return found


def _one(stack: Stack, series: Mapping[str, Series], spec: str) -> Wanted:
    upstream, sep, name = spec.rpartition("/")
    if sep and upstream in series:
        match = next((p for p in series[upstream].patches if p.name == name), None)
        if match is not None:
            return Wanted(upstream=upstream, patch=match)
    path = Path(spec).resolve()
    for owner, stack_series in series.items():
        match = next((p for p in stack_series.patches if p.path.resolve() == path), None)
        if match is not None:
            return Wanted(upstream=owner, patch=match)
    named = [Wanted(upstream=o, patch=p) for o, s in series.items() for p in s.patches if p.name == Path(spec).name]
    if len(named) == 1:
        return named[0]
    where = ", ".join(str(s.folder.relative_to(stack.root)) for s in series.values())
    why = "more than one stack holds it: give UPSTREAM/FILE" if named else f"no stack of line {stack.line} holds it"
    raise UsageError(f"{spec}: {why} (the line's stacks: {where})")


def already_there(tree: Repository, item: Wanted, target: Series, source_line: str, target_line: str) -> str | None:
    """Why `item` is not backported onto `target` (None: it is to be): it is there (patch-id, Backport-Of), or its
    `Lines:` trailer leaves the target line out."""
    if item.patch.lines and target_line not in item.patch.lines:
        return f"not for line {target_line} (Lines: {', '.join(item.patch.lines)})"
    mark = f"{source_line}:{item.patch.name}"
    named = next((p for p in target.patches if mark in p.backport_of), None)
    if named is not None:
        return f"already on line {target_line} as {named.name} (Backport-Of: {mark})"
    back = {value.partition(":")[2] for value in item.patch.backport_of if value.startswith(f"{target_line}:")}
    origin = next((p for p in target.patches if p.name in back), None)
    if origin is not None:
        return f"already on line {target_line}: it is a backport of {origin.name}"
    if not target.patches:
        return None
    ids = file_patch_ids(tree, [item.patch.path, *(p.path for p in target.patches)])
    same = next((p for p, pid in zip(target.patches, ids[1:], strict=True) if ids[0] is not None and pid == ids[0]),
                None)
    return f"already on line {target_line} as {same.name} (same patch-id)" if same is not None else None
