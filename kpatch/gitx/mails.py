"""What `git am` reads out of a mail: the message and author that `git mailsplit` + `git mailinfo` take out of a
`git format-patch` text, read by git itself, or, for a plain mail, in process exactly as mailinfo reads it.

A plain mail is one whose headers are ASCII, unencoded and unambiguous (no RFC 2047 word, an author name and
address of the simple kind, nothing but format-patch's own headers), and whose message holds nothing mailinfo
treats specially (an in-body header, a line that starts a mail, a scissors mark, a CR, a NUL). For such a mail
mailinfo's whole work is: unfold the headers, take the author's name and address, strip off the subject's front
what it strips and collapse its spaces, take the body up to the first line that starts a patch. Every other mail
goes to git, so the reading is git's either way (`tests/git/test_mails.py` holds the two side by side). A stack
of 150 commits cost 150 mailinfo processes.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kpatch import scratch
from kpatch.gitx.runner import run

if TYPE_CHECKING:
    from kpatch.gitx.repo import Repository


@dataclass(frozen=True)
class MailReading:
    """What `git am` would take out of one mbox text: how many mails, the message, and the author."""

    mails: int
    message: str  # subject + blank line + body, as the commit would get it
    author: str
    has_diff: bool


def read_mail(repo: Repository, data: bytes) -> MailReading:
    """Split and read `data` exactly as `git am -3 --keep-cr --keep-non-patch` will (mailsplit + mailinfo)."""
    return read_mails(repo, [data])[0]


def read_mails(_repo: Repository, texts: Sequence[bytes]) -> list[MailReading]:
    """`read_mail` of many mbox texts: the plain ones in process; for the rest one mailsplit for all of them and
    the mailinfo calls side by side."""
    readings = [plain_reading(data) for data in texts]
    rest = [index for index, reading in enumerate(readings) if reading is None]
    for index, reading in zip(rest, _git_readings([texts[i] for i in rest]), strict=True):
        readings[index] = reading
    return [reading for reading in readings if reading is not None]


def _git_readings(texts: Sequence[bytes]) -> list[MailReading]:
    """What git's own mailsplit and mailinfo read out of each text."""
    if not texts:
        return []
    with scratch.folder("mail") as where:
        if not all(data.strip() for data in texts):  # an empty commit's text: mailsplit would fail on it alone
            return [_read_split(where, data) for data in texts]
        (where / "mbox").write_bytes(b"".join(texts))
        (where / "split").mkdir()
        count = int(run(["mailsplit", "--keep-cr", f"-o{where / 'split'}", "--", str(where / "mbox")],
                        where).text.strip() or 0)
        if count != len(texts):  # some text is not exactly one mail: read each alone to tell which
            return [_read_split(where, data) for data in texts]
        mails = [where / "split" / f"{n:04d}" for n in range(1, count + 1)]
        if len(mails) == 1:
            return [_mailinfo(where, mails[0], 1)]
        from concurrent.futures import ThreadPoolExecutor  # only here: most commands never read mails

        with ThreadPoolExecutor(max_workers=min(4, len(mails))) as pool:  # each waits on its own git process
            return list(pool.map(lambda mail: _mailinfo(where, mail, 1), mails))


def _read_split(parent: Path, data: bytes) -> MailReading:
    """mailsplit + mailinfo of one text on its own."""
    if not data.strip():  # what format-patch writes for an empty commit; mailsplit calls it an error
        return MailReading(mails=0, message="", author="", has_diff=False)
    with tempfile.TemporaryDirectory(prefix="one-", dir=parent) as folder:
        where = Path(folder)
        (where / "mbox").write_bytes(data)
        (where / "split").mkdir()
        count = int(run(["mailsplit", "--keep-cr", f"-o{where / 'split'}", "--", str(where / "mbox")],
                        where).text.strip() or 0)
        first = where / "split" / "0001"
        if count < 1 or not first.exists():
            return MailReading(mails=count, message="", author="", has_diff=False)
        return _mailinfo(where, first, count)


def _mailinfo(where: Path, mail: Path, mails: int) -> MailReading:
    """What `git mailinfo -b -u` (am --keep-non-patch) takes out of one split mail."""
    msg, patch = mail.with_suffix(".msg"), mail.with_suffix(".patch")
    info = run(["mailinfo", "-b", "-u", str(msg), str(patch)], where, stdin=mail.read_bytes()).text
    fields = dict(line.split(": ", 1) for line in info.splitlines() if ": " in line)
    body = msg.read_text(encoding="utf-8", errors="replace")
    return _reading(mails, fields.get("Subject", ""), body, f"{fields.get('Author', '')} <{fields.get('Email', '')}>",
                    patch.stat().st_size > 0)


def _reading(mails: int, subject: str, body: str, author: str, has_diff: bool) -> MailReading:
    return MailReading(mails=mails, message=subject + ("\n\n" + body if body.strip() else ""), author=author,
                       has_diff=has_diff)


# --- a plain mail, read in process ------------------------------------------------------------------------------

_FIRST = re.compile(rb"From [0-9a-f]{40} Mon Sep 17 00:00:00 2001\n")  # format-patch's first line
# format-patch's headers, exactly as it writes them for a plain mail; any other header (or another form) goes to git.
_HEADER = re.compile(rb"(From|Date|Subject|MIME-Version|Content-Type|Content-Transfer-Encoding): (.*)")
_FIXED = {b"MIME-Version": b"1.0", b"Content-Type": b"text/plain; charset=UTF-8", b"Content-Transfer-Encoding": b"8bit"}
# An author name with nothing for mailinfo to unquote, decode, collapse or refuse (3 to 60 characters: outside
# those, mailinfo takes the address for the name), and an address it takes whole.
_WORD = rb"[A-Za-z0-9_'.-]+"
_ADDRESS = rb"[A-Za-z0-9_.+-]+@[A-Za-z0-9_.-]+"
# Or a name that is itself an address (`"djm@openbsd.org" <djm@openbsd.org>`: format-patch quotes a name holding an
# '@'): mailinfo unquotes it, takes the address around the first '@' (the name's) and, the rest ("<...>") being no
# name it keeps, that address for the name too.
_FROM = re.compile(rb'(?:"(?P<quoted>' + _WORD + rb"(?: " + _WORD + rb')*)"|(?P<bare>' + _WORD + rb"(?: " + _WORD +
                   rb')*)|"(?P<address>' + _ADDRESS + rb')") <(?P<email>' + _ADDRESS + rb")>")
# A first message line mailinfo may take for an in-body header (a superset of what it takes: case aside).
_IN_BODY = re.compile(rb"(?i)(>?from|subject|date|\[patch\])")
_SPACE = b" \t\n\v\f\r"  # C's isspace()
_SCISSORS = (b">8", b"8<", b">%", b"%<")  # what may make a scissors line, should mailinfo.scissors be set


def plain_reading(data: bytes) -> MailReading | None:
    """What git's mailsplit + `mailinfo -b -u` read out of `data` when it is one plain format-patch mail (see the
    module's docstring); None when it is not, and only git can tell."""
    first = _FIRST.match(data)
    end = data.find(b"\n\n")
    if first is None or end < 0 or not data.endswith(b"\n") or b"\nFrom " in data:
        return None
    headers = _headers(data[first.end():end + 1])
    if headers is None or {b"From", b"Date", b"Subject"} - headers.keys():
        return None
    if any(headers.get(name, value) != value for name, value in _FIXED.items()):
        return None
    author = _FROM.fullmatch(headers[b"From"])
    subject = _subject(headers[b"Subject"])
    if author is None or subject is None:
        return None
    name = author.group("quoted") or author.group("bare")
    email = author.group("email")
    if name is None:  # a name that is an address: mailinfo's name and address are both that one
        name = email = author.group("address")
    elif not 3 <= len(name) <= 60:
        return None
    body, has_diff = _body(data, end + 2)
    if body is None:
        return None
    return _reading(1, subject.decode("ascii"), body.decode("utf-8", "replace"),
                    f"{name.decode('ascii')} <{email.decode('ascii')}>", has_diff)


def _headers(block: bytes) -> dict[bytes, bytes] | None:
    """The headers of a plain mail (name -> value, folded lines joined as mailinfo joins them), or None."""
    if not block.isascii() or b"=?" in block or b"\r" in block or b"\0" in block:
        return None
    found: dict[bytes, bytes] = {}
    last = b""
    for line in block.split(b"\n")[:-1]:
        if line[:1] in (b" ", b"\t"):  # a folded line: mailinfo joins it with one space for its first character
            if not last:
                return None
            found[last] += (b" " + line[1:]).rstrip(_SPACE)
            continue
        match = _HEADER.fullmatch(line)
        if match is None or match.group(1) in found or not match.group(2).strip(_SPACE):
            return None  # an empty value: mailinfo would not take the header at all
        last = match.group(1)
        found[last] = match.group(2).rstrip(_SPACE)
    return found


def _subject(value: bytes) -> bytes | None:
    """mailinfo's subject: what `cleanup_subject` strips off the front with -b, trimmed, every run of spaces one
    space; None where its arithmetic would read past the subject (a second [...] group) and only git can tell."""
    subject = bytearray(value)
    at = 0
    while at < len(subject):
        char = bytes(subject[at:at + 1])
        if char in (b"r", b"R"):
            if len(subject) <= at + 3:
                break
            if bytes(subject[at + 1:at + 3]) in (b"e:", b"E:"):
                del subject[at:at + 3]
                continue
            break
        if char in (b" ", b"\t", b":"):
            del subject[at:at + 1]
            continue
        if char == b"[":
            close = subject.find(b"]", at)
            if close < 0:
                break
            remove = close + at + 1  # git's own arithmetic: the group's length only when it starts at 0
            if at + remove > len(subject):
                return None
            if remove >= 7 and b"PATCH" in subject[at:at + remove]:
                del subject[at:at + remove]
            else:
                at += remove
                if subject[at:at + 1] and subject[at] in _SPACE:
                    at += 1
            continue
        break
    return re.sub(rb"[ \t\n\v\f\r]+", b" ", bytes(subject).strip(_SPACE))


def _body(data: bytes, start: int) -> tuple[bytes | None, bool]:
    """The message lines mailinfo keeps (from the first that is not blank to the one before the first line that
    starts a patch) and whether such a line came; None when a line of the message needs git to read it."""
    body: list[bytes] = []
    at = start
    while at < len(data):
        cut = data.find(b"\n", at) + 1
        line = data[at:cut]
        at = cut
        if not body and not line.strip(b"\n"):
            continue  # blank lines before the message: mailinfo skips them
        if not body and _IN_BODY.match(line):
            return None, False
        if _patchbreak(line):
            return b"".join(body), True
        if b"\r" in line or b"\0" in line or any(mark in line for mark in _SCISSORS):
            return None, False
        body.append(line)
    return b"".join(body), False


def _patchbreak(line: bytes) -> bool:
    """mailinfo's `patchbreak`: a line that starts the patch (`diff -`, `Index: `, `--- name`, `---` and spaces)."""
    if line.startswith((b"diff -", b"Index: ")):
        return True
    if len(line) < 4 or not line.startswith(b"---"):
        return False
    if line[3:4] == b" " and (len(line) == 4 or line[4] not in _SPACE):  # C reads the NUL after a last line
        return True
    return not line[3:].strip(_SPACE) and line.endswith(b"\n")
