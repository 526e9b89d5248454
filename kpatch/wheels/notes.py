"""The body of a release's notes, from what kpatch knows: each upstream's base and built commit, each patch with
its Upstream-Status and Upstream-PR trailers, the verify and test summary, and what the pair cannot do (the row
of the project's README table that says so)."""

from __future__ import annotations

from pathlib import Path

from kpatch.config.model import Stack
from kpatch.engine.plan import load_all_series
from kpatch.wheels.lock import Lock

CANNOT = "what the pair cannot do"


def body(stack: Stack, lock: Lock, checked: tuple[str, ...]) -> str:
    """Markdown: upstreams, patches, the checks (`checked`: one line each, made by the caller), limits."""
    lines = ["## Upstreams", ""]
    for up in lock.upstreams:
        package = next((w.package for w in lock.wheels if w.upstream == up.name), up.name)
        lines.append(f"- {up.name} ({package}): {up.url} base {up.base[:12]}, built from {up.commit[:12]}"
                     f" (torch {up.torch or 'none'})")
    lines += ["", "## Patches", ""]
    series = load_all_series(stack)
    for up in lock.upstreams:
        patches = series[up.name].patches if up.name in series else ()
        lines.append(f"### {up.name} ({len(patches)} patch{'es' if len(patches) != 1 else ''})")
        lines.append("")
        for patch in patches:
            status = patch.status.value if patch.status else "no Upstream-Status"
            prs = f", Upstream-PR {', '.join(patch.prs)}" if patch.prs else ""
            lines.append(f"- {patch.subject} ({status}{prs})")
        lines.append("")
    lines += ["## Checked", "", *(f"- {line}" for line in checked), ""]
    limits = cannot_do(stack.root / "README.md")
    if limits:
        lines += ["## What the pair cannot do", "", limits, ""]
    return "\n".join(lines)


def cannot_do(readme: Path) -> str | None:
    """The second cell of the README's `| what the pair cannot do ... |` table row, if the project has one."""
    try:
        text = readme.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].lower().startswith(CANNOT):
            return cells[1]
    return None
