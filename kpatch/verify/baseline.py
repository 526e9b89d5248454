"""The verify baseline: op-contract findings a person has read and accepted, so verify fails only on new ones.

A finding is known by its fingerprint (the pair, the op, the kind of finding, the calling function; no line
numbers, so moving code does not reopen it). `kpatch verify --update-baseline REASON` records every finding of
today, keeping the reason of entries already there; ops the stacks themselves add or call are never recorded
nor accepted: a stack that adds an op must serve it.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from kpatch.config import Stack
from kpatch.errors import ConfigError
from kpatch.files import BASELINE_FILE, read_input
from kpatch.stack import load_series
from kpatch.verify.contract import ContractReport, Finding, accept, findings

VERSION = 1
HEADER = ("# kpatch verify's baseline: op-contract findings accepted on purpose, each with why. verify fails only on\n"
          "# findings not listed here. Written by `kpatch verify --update-baseline REASON`; edit a reason freely.\n")
_KEYS = ("pair", "op", "kind", "function", "reason")


@dataclass(frozen=True)
class Accepted:
    pair: str  # "kernels -> app"
    op: str
    kind: str
    function: str
    reason: str

    @property
    def fingerprint(self) -> tuple[str, str, str, str]:
        return self.pair, self.op, self.kind, self.function


def path_of(stack: Stack) -> Path:
    return stack.root / stack.baseline


def read(path: Path) -> tuple[Accepted, ...]:
    """The accepted findings in path (none when there is no file); a malformed file is a ConfigError."""
    if not os.path.lexists(path):
        return ()
    try:
        data = tomllib.loads(read_input(path, BASELINE_FILE, ConfigError).decode("utf-8"))
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not a readable verify baseline: {err}") from None
    if data.get("version") != VERSION or not isinstance(data.get("accepted", []), list):
        raise ConfigError(f"{path}: not a verify baseline of version {VERSION} (version = {VERSION}, "
                          "[[accepted]] tables)")
    out = []
    for i, entry in enumerate(data.get("accepted", []), 1):
        if not isinstance(entry, dict) or sorted(entry) != sorted(_KEYS) \
                or not all(isinstance(entry[k], str) and entry[k].strip() for k in _KEYS):
            raise ConfigError(f"{path}: accepted entry {i} must have exactly {', '.join(_KEYS)} (non-empty strings)")
        out.append(Accepted(**{k: entry[k] for k in _KEYS}))
    return tuple(out)


def write(path: Path, entries: list[Accepted]) -> None:
    entries = sorted(entries, key=lambda e: e.fingerprint)
    text = tomli_w.dumps({"version": VERSION, "accepted": [{k: getattr(e, k) for k in _KEYS} for e in entries]})
    path.write_text(HEADER + text, encoding="utf-8")


def stack_ops(stack: Stack) -> frozenset[str]:
    """Every name the stacks' patches add (an op they define, register or call is among them)."""
    words: set[str] = set()
    for upstream in stack.upstreams:
        for patch in load_series(upstream.name, upstream.patches).patches:
            for line in patch.path.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("+") and not line.startswith("+++"):
                    words.update(re.findall(r"[A-Za-z_]\w*", line))
    return frozenset(words)


def own(finding: Finding, ops: frozenset[str]) -> bool:
    """Whether the stacks add or call the finding's op (so it can never be accepted)."""
    return finding.op.rsplit(".", 1)[-1] in ops


def apply(report: ContractReport, pair: str, accepted: tuple[Accepted, ...], ops: frozenset[str]
          ) -> ContractReport:
    """The report with the findings the baseline accepts taken out of its errors."""
    known = {a.fingerprint for a in accepted}
    return accept(report, lambda f: (pair, *f.fingerprint) in known and not own(f, ops))


def stale(reports: dict[str, ContractReport], accepted: tuple[Accepted, ...]) -> list[Accepted]:
    """Accepted entries of the pairs read that no finding matches any more."""
    found = {(pair, *f.fingerprint) for pair, report in reports.items() for f in findings(report)}
    found |= {(pair, *f.fingerprint) for pair, report in reports.items() for f in report.accepted}
    return [a for a in accepted if a.pair in reports and a.fingerprint not in found]


def update(path: Path, reports: dict[str, ContractReport], reason: str, ops: frozenset[str]
           ) -> tuple[list[Accepted], list[Finding]]:
    """Record every finding of the pairs read (keeping the reasons already written; entries of pairs not read
    stay); returns what was recorded and the findings left out because the stacks add or call their op."""
    if not reason.strip():
        raise ConfigError("--update-baseline needs a reason (why these findings are accepted)")
    before = read(path)
    reasons = {a.fingerprint: a.reason for a in before}
    entries = {a.fingerprint: a for a in before if a.pair not in reports}
    left_out = []
    for pair, report in reports.items():
        for f in [*findings(report), *report.accepted]:
            if own(f, ops):
                left_out.append(f)
                continue
            key = (pair, *f.fingerprint)
            entries.setdefault(key, Accepted(pair, f.op, f.kind, f.function, reasons.get(key, reason.strip())))
    write(path, list(entries.values()))
    return list(entries.values()), left_out
