"""Hostile input, round three (issue 37), the weak items: what an upstream writes is printed escaped, a kill leaves
no patch text in temp folders, user-named files are read with a bound, journal copies are never followed, and
full disks, odd cache folders and odd test file names get one clear line.

kpatch runs as its own process here (tests/support/cli.py) wherever a user would run it.
"""

from __future__ import annotations

from pathlib import Path

from kpatch.errors import ExitCode
from kpatch.examples.upstreams import commit
from tests.support.cli import kpatch
from tests.support.rebase_repos import FILES, RebaseProject, replace_line

# --- terminal escapes in upstream text ----------------------------------------------------------------------------

EVIL_SUBJECT = "Rewrite d \x1b]0;pwned\x07 then \x1b[2J\x9b31m\u202egnp.exe"
EVIL_AUTHOR = "Eve \x1b[31mRed"


def test_an_upstream_subject_and_author_with_terminal_escapes_are_printed_escaped_off_a_terminal(
        rp: RebaseProject) -> None:
    """The culprit of a conflict is printed with its subject and author: raw, they retitled the window and
    cleared the screen of whoever read the rebase's output (or the CI log it went to)."""
    commit(rp.kernels, {"d.txt": replace_line(FILES["d"], 20, "d line 20 rewritten")}, EVIL_SUBJECT, 900,
           author=(EVIL_AUTHOR, "eve@example.org"))
    for args in (["rebase"], ["report"], ["status"], ["rebase", "--abort"]):
        ran = kpatch(rp.root, *args)
        for control in ("\x1b", "\x07", "\x9b", "\u202e"):
            assert control not in ran.output, (args, ran.output)
        if args == ["rebase"]:
            assert ran.exit_code == ExitCode.CONFLICT, ran.output
            assert 'Rewrite d \\x1b]0;pwned\\x07 then \\x1b[2J\\x9b31m\\u202egnp.exe"' in ran.stdout
            assert "Eve \\x1b[31mRed <eve@example.org>" in ran.stdout
