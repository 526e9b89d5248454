"""The JUnit XML an upstream's tests write is read without a DTD: entity expansion and external entities refused."""

from __future__ import annotations

import pytest

from kpatch.testing.junit import JUnitError, Verdict, parse

GOOD = (b'<testsuites><testsuite name="s"><testcase classname="tests.test_k" name="test_a" time="0.5"/>'
        b'<testcase classname="tests.test_k" name="test_b" time="1"><failure message="boom">x</failure></testcase>'
        b'</testsuite></testsuites>')
LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;">'
          b'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;">]><testsuite><testcase name="&lol3;"/></testsuite>')
EXTERNAL = (b'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            b'<testsuite><testcase name="&x;"/></testsuite>')


def test_a_pytest_junit_report_reads_as_its_cases() -> None:
    report = parse(GOOD)
    assert [(c.id, c.verdict) for c in report.cases] == [("tests.test_k::test_a", Verdict.PASSED),
                                                         ("tests.test_k::test_b", Verdict.FAILED)]


@pytest.mark.parametrize("data", [LAUGHS, EXTERNAL], ids=["entity-expansion", "external-entity"])
def test_a_junit_file_with_a_dtd_is_refused_not_expanded(data: bytes) -> None:
    with pytest.raises(JUnitError, match="refused"):
        parse(data)
