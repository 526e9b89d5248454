"""The text of a pull request `kpatch propose` opens: its title, the patch messages without kpatch's trailers, what
it depends on, and the evidence the project has (the nightly's op contract, the upstream's tests), cut to GitHub's
limit."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

from kpatch.config import Upstream
from kpatch.files import REPORT_FILE, read_input
from kpatch.output.ui import count
from kpatch.project.workspace import Workspace
from kpatch.stack import Patch
from kpatch.stack.mbox import read_text

BODY_LIMIT = 65536  # GitHub's limit on a pull request's body, in characters
_KPATCH_TRAILER = re.compile(r"^(Upstream-Status|Upstream-PR|Requires):", re.IGNORECASE)


def message_body(patch: Patch) -> str:
    """The patch's commit message after its subject, kpatch's own trailers left out."""
    lines = read_text(patch.path).split("\n")
    start = lines.index("") + 1 if "" in lines else len(lines)
    out: list[str] = []
    for line in lines[start:]:
        if line == "---" or line.startswith("diff --git "):
            break
        if not _KPATCH_TRAILER.match(line):
            out.append(line)
    return "\n".join(out).strip()


def pr_text(ws: Workspace, upstream: Upstream, patches: Sequence[Patch], needs: Mapping[str, str],
            head: str) -> tuple[str, str]:
    """The title and body: the patch messages, what it depends on, the evidence the project has."""
    first = patches[0]
    title = first.subject if len(patches) == 1 else \
        f"{first.subject} (+{count(len(patches) - 1, 'patch', 'patches')})"
    parts: list[str] = []
    if len(patches) == 1:
        parts += [message_body(first)] if message_body(first) else []  # the title says it all otherwise
    else:
        for patch in patches:
            parts.append(f"### {patch.subject}\n\n{message_body(patch)}".rstrip())
    if needs:
        lines = ["## Depends on", ""]
        for ref, pr in needs.items():
            lines.append(f"- needs {pr}, which this PR calls into (`{ref}`): merge that one first")
        parts.append("\n".join(lines))
    parts.append("\n".join(["## Evidence", "", *evidence(ws, upstream.name)]))
    parts.append(f"<sub>Proposed with kpatch propose from the `{upstream.name}` patch stack "
                 f"({count(len(patches), 'patch', 'patches')} on {upstream.base}), branch `{head}`.</sub>")
    body = "\n\n".join(parts) + "\n"
    if len(body) > BODY_LIMIT:
        cut = "\n\n… (cut to GitHub's 65,536-character limit: the whole messages are in the commits)\n"
        body = body[:BODY_LIMIT - len(cut)] + cut
    return title, body


def evidence(ws: Workspace, name: str) -> list[str]:
    """What the project has checked, from its reports: never more than what was run."""
    reports = ws.reports_dir
    return [_contract(reports / "nightly" / "report.json"), _tests(reports / f"{name}.xml"),
            "- Benchmarks: not run by kpatch"]


def _contract(path: Path) -> str:
    try:
        report = json.loads(read_input(path, REPORT_FILE, ValueError))
        lines = [str(line) for line in report.get("contract") or []]
        started = str(report.get("started", "?"))
    except OSError:
        return "- Op contract: not run (no nightly report)"
    except (ValueError, AttributeError):
        return f"- Op contract: not read ({path.name} is no nightly report kpatch reads)"
    if not lines:
        return f"- Op contract: not run (the nightly of {started} did not reach it)"
    shown = "\n".join(f"  - {line[:300]}" for line in lines[:20])
    more = f"\n  - … and {len(lines) - 20} more" if len(lines) > 20 else ""
    return f"- Op contract (kpatch nightly of {started}):\n{shown}{more}"


def _tests(path: Path) -> str:
    # imported where used: defusedxml only when a JUnit file is read
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import parse

    try:  # the upstream's tests wrote it: no DTD, no entity expansion
        root = parse(path, forbid_dtd=True).getroot()
    except (OSError, ET.ParseError, DefusedXmlException):
        return "- Tests: not run"
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = {key: sum(int(s.get(key, "0") or 0) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    failed = total["failures"] + total["errors"]
    passed = total["tests"] - failed - total["skipped"]
    return (f"- Tests (kpatch test, `reports/{path.name}`): {passed} passed, {failed} failed, "
            f"{total['skipped']} skipped")
