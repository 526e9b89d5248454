"""verify's search for `x.attr = ...` outside a class (`_set_elsewhere`) finds, from the `. attr` on, the same
assignments and owners as the pattern that starts at the owner's word, on any text."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from kpatch.verify.contract.reach.values import _word_before

ATTR = b"flag"
FROM_THE_WORD = re.compile(rb"(\w+)\s*\.\s*" + re.escape(ATTR) + rb"\s*(?::[^=\n]*)?=(?!=)")
FROM_THE_DOT = re.compile(rb"\.\s*" + re.escape(ATTR) + rb"\s*(?::[^=\n]*)?=(?!=)")
PIECES = [b"self", b"cls", b"x", b"_a1", b".", b" ", b"\n", b"\t", b"flag", b"flags", b"=", b"==", b":", b"int",
          b"(", b")", b"#", b"\xc3\xa9"]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30))
def test_the_owners_found_from_the_dot_are_the_owners_the_word_pattern_finds(pieces: list[bytes]) -> None:
    data = b"".join(pieces)
    expected = [m.group(1) for m in FROM_THE_WORD.finditer(data)]
    found = [w for m in FROM_THE_DOT.finditer(data) if (w := _word_before(data, m.start())) is not None]
    assert found == expected, data


def test_an_assignment_through_a_call_or_a_subscript_has_no_owner_word() -> None:
    data = b"make().flag = 1\nitems[0].flag = 2\nobj . flag: bool = 3\n"
    assert [_word_before(data, m.start()) for m in FROM_THE_DOT.finditer(data)] == [None, None, b"obj"]
