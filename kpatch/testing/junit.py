"""JUnit XML reports (as pytest's --junitxml writes them): test cases, counts, the slowest, and what changed."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from enum import Enum


class JUnitError(ValueError):
    """The file is not JUnit XML kpatch can read."""


class Verdict(Enum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"  # the test could not run to its end (setup or teardown broke, collection error)
    SKIPPED = "skipped"  # skipped or xfail

    @property
    def failing(self) -> bool:
        return self in (Verdict.FAILED, Verdict.ERROR)


@dataclass(frozen=True)
class Case:
    id: str  # "<classname>::<name>", e.g. tests.test_kimi::test_key_concat[2]
    verdict: Verdict
    seconds: float
    message: str  # the first line of the failure, error or skip message


@dataclass(frozen=True)
class Counts:
    passed: int
    failed: int
    errors: int
    skipped: int
    seconds: float


@dataclass(frozen=True)
class Report:
    cases: tuple[Case, ...]

    def counts(self) -> Counts:
        verdicts = [c.verdict for c in self.cases]
        return Counts(passed=verdicts.count(Verdict.PASSED), failed=verdicts.count(Verdict.FAILED),
                      errors=verdicts.count(Verdict.ERROR), skipped=verdicts.count(Verdict.SKIPPED),
                      seconds=round(sum(c.seconds for c in self.cases), 3))

    def failing(self) -> tuple[Case, ...]:
        return tuple(c for c in self.cases if c.verdict.failing)

    def slowest(self, count: int = 5) -> tuple[Case, ...]:
        return tuple(sorted(self.cases, key=lambda c: (-c.seconds, c.id))[:count])


@dataclass(frozen=True)
class Changes:
    """Against the previous report: tests that fail now but did not, and tests that pass now but failed."""

    newly_failing: tuple[str, ...]
    newly_passing: tuple[str, ...]


def parse(data: bytes) -> Report:
    """Every <testcase> of a <testsuites> or <testsuite> document."""
    # imported where used: defusedxml only when a JUnit file is read
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import fromstring

    try:  # written by the upstream's tests: no entity expansion, no external entities, no DTD tricks
        root = fromstring(data, forbid_dtd=True)
    except ET.ParseError as err:
        raise JUnitError(f"not XML ({err})") from None
    except DefusedXmlException as err:
        raise JUnitError(f"refused: {err}") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise JUnitError(f"root element is <{root.tag}>, not <testsuites> or <testsuite>")
    cases = []
    for element in root.iter("testcase"):
        name = element.get("name")
        if not name:
            raise JUnitError("a <testcase> has no name")
        classname = element.get("classname", "")
        try:
            seconds = float(element.get("time", "0") or 0)
        except ValueError:
            raise JUnitError(f"testcase {name}: time {element.get('time')!r} is not a number") from None
        verdict, message = _verdict(element)
        cases.append(Case(id=f"{classname}::{name}" if classname else name, verdict=verdict,
                          seconds=round(seconds, 3), message=message))
    return Report(cases=tuple(cases))


def _verdict(element: ET.Element) -> tuple[Verdict, str]:
    for tag, verdict in (("error", Verdict.ERROR), ("failure", Verdict.FAILED), ("skipped", Verdict.SKIPPED)):
        child = element.find(tag)
        if child is not None:
            text = child.get("message") or (child.text or "").strip() or tag
            return verdict, text.splitlines()[0][:200] if text.strip() else tag
    return Verdict.PASSED, ""


def compare(previous: Report, current: Report) -> Changes:
    """Newly failing: failing now, and passed, skipped or absent before. Newly passing: passes now, failed before."""
    before = {c.id: c.verdict for c in previous.cases}
    failing = sorted({c.id for c in current.cases if c.verdict.failing}
                     - {i for i, v in before.items() if v.failing})
    passing = sorted({c.id for c in current.cases if c.verdict is Verdict.PASSED
                      and before.get(c.id, Verdict.PASSED).failing})
    return Changes(newly_failing=tuple(failing), newly_passing=tuple(passing))
