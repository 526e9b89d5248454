"""verify's search for `x.attr = ...` outside a class (`_set_elsewhere`) finds, from each `. attr` on, the owner
word of every assignment the pattern that starts at the owner's word finds at any position (each dot on its own:
a match never hides the next), on any text."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kpatch.verify.contract.reach.values import _owners, _word_before

ATTR = b"flag"
FROM_THE_WORD = re.compile(rb"(\w+)\s*\.\s*" + re.escape(ATTR) + rb"\s*(?::[^=\n]*)?=(?!=)")
FROM_THE_DOT = re.compile(rb"\.\s*" + re.escape(ATTR) + rb"\s*(?::[^=\n]*)?=(?!=)")
EVERY_WORD = re.compile(rb"(?=(\w+)\s*\.\s*" + re.escape(ATTR) + rb"\s*(?::[^=\n]*)?=(?!=))")
WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
PIECES = [b"self", b"cls", b"x", b"_a1", b".", b" ", b"\n", b"\t", b"flag", b"flags", b"=", b"==", b":", b"int",
          b"(", b")", b"#", b"\xc3\xa9"]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30))
@example([b".", b"flag", b":", b" ", b"x", b".", b"flag", b"="])  # a dot with no word, then one with a word
def test_the_owners_found_from_the_dot_are_the_owners_the_word_pattern_finds(pieces: list[bytes]) -> None:
    data = b"".join(pieces)
    # the word pattern tried at the start of every word, not only after its last match
    expected = [m.group(1) for m in EVERY_WORD.finditer(data) if m.start() == 0 or data[m.start() - 1] not in WORD]
    found = list(_owners(data, FROM_THE_DOT))
    assert found == expected, data
    assert set(found) >= {m.group(1) for m in FROM_THE_WORD.finditer(data)}, data  # what the first pattern found


def test_an_assignment_after_a_one_line_if_on_a_call_keeps_its_owner() -> None:
    # the match from the first dot runs to the `=` (`: obj.flag ` read as an annotation) and has no owner word:
    # the assignment after it is still found, as the word pattern finds it
    for data in (b"if make().flag: obj.flag = 1\n", b"if items[0].flag: obj.flag = 1\n"):
        assert list(_owners(data, FROM_THE_DOT)) == [b"obj"], data


def test_an_assignment_after_a_one_line_if_on_self_is_found() -> None:
    # `: other.flag ` after `if self.flag` reads as an annotation; the pattern before d22b640 stopped there
    assert list(_owners(b"if self.flag: other.flag = 1\n", FROM_THE_DOT)) == [b"self", b"other"]


def test_an_assignment_through_a_call_or_a_subscript_has_no_owner_word() -> None:
    data = b"make().flag = 1\nitems[0].flag = 2\nobj . flag: bool = 3\n"
    assert [_word_before(data, m.start()) for m in FROM_THE_DOT.finditer(data)] == [None, None, b"obj"]
