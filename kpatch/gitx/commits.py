"""Commits written in a chain, each on the one before, as `git commit-tree` writes them, in one git process.

A chain of N commits made by `git commit-tree` is N processes one after the other (each needs its parent's SHA).
The commit objects are plain text whose SHA is the hash of that text, so kpatch writes them itself: it builds
each object as commit-tree would, hashes it to get the next one's parent, and hands them all to one
`git hash-object -t commit -w --stdin-paths`, which checks each object and says its SHA. Where kpatch cannot
be sure its text is commit-tree's (an identity git would clean up, a date not in git's raw form, text git's UTF-8
check would rewrite) or where git answers another SHA, the chain is made by commit-tree one by one, as before.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kpatch import scratch
from kpatch.gitx.repo import Repository

RAW_DATE = re.compile(r"^[0-9]+ [+-][0-9]{4}$")
_CRUD = frozenset(chr(c) for c in range(33)) | frozenset(".,:;<>\"\\'")  # git's ident.c crud(), '.' as older gits


@dataclass(frozen=True)
class Ident:
    """A name, an email and a date in git's raw form ("1700000000 +0200")."""

    name: str
    email: str
    date: str


@dataclass(frozen=True)
class NewCommit:
    tree: str
    author: Ident
    committer: Ident
    message: bytes


def chain(repo: Repository, parent: str, commits: Sequence[NewCommit]) -> str:
    """Write `commits`, the first on `parent` and each next on the one before; the last one's SHA (`parent` when
    there are none). The same objects `git commit-tree --no-gpg-sign` writes for each."""
    if not commits:
        return parent
    if len(parent) in (40, 64) and all(_sure(c) for c in commits):
        algorithm = hashlib.sha1 if len(parent) == 40 else hashlib.sha256
        texts, shas, above = [], [], parent
        for commit in commits:
            text = _text(commit, above)
            above = algorithm(b"commit %d\0" % len(text) + text).hexdigest()
            texts.append(text)
            shas.append(above)
        if algorithm is hashlib.sha1 and _unpack(repo, texts, shas):
            return above
        if _hash_objects(repo, texts) == shas:
            return above
    above = parent
    for commit in commits:
        env = {"GIT_AUTHOR_NAME": commit.author.name, "GIT_AUTHOR_EMAIL": commit.author.email,
               "GIT_AUTHOR_DATE": f"@{commit.author.date}", "GIT_COMMITTER_NAME": commit.committer.name,
               "GIT_COMMITTER_EMAIL": commit.committer.email, "GIT_COMMITTER_DATE": f"@{commit.committer.date}"}
        above = repo.out(["commit-tree", "--no-gpg-sign", commit.tree, "-p", above, "-F", "-"], stdin=commit.message,
                         env=env)
    return above


def _text(commit: NewCommit, parent: str) -> bytes:
    def ident(who: Ident) -> str:
        return f"{who.name} <{who.email}> {who.date}"

    head = (f"tree {commit.tree}\nparent {parent}\nauthor {ident(commit.author)}\n"
            f"committer {ident(commit.committer)}\n\n")
    return head.encode("utf-8") + commit.message


def _sure(commit: NewCommit) -> bool:
    """Whether commit-tree writes this commit's identities, dates and message as given (else it is asked)."""
    for who in (commit.author, commit.committer):
        for part in (who.name, who.email):
            if not part or part[0] in _CRUD or part[-1] in _CRUD or any(c in part for c in "<>\n") \
                    or not plain_utf8(part):
                return False
        if not RAW_DATE.match(who.date):
            return False
    try:
        return plain_utf8(commit.message.decode("utf-8"))
    except UnicodeDecodeError:  # git would rewrite it as Latin-1
        return False


def plain_utf8(text: str) -> bool:
    """Text git's commit UTF-8 check keeps as it is: no surrogates (bytes that were not UTF-8) and none of the
    code points it refuses (U+FDD0..U+FDEF, U+xxFFFE, U+xxFFFF)."""
    return text.isascii() or not any(0xD800 <= ord(c) <= 0xDFFF or 0xFDD0 <= ord(c) <= 0xFDEF or
                                     (ord(c) & 0xFFFE) == 0xFFFE for c in text if ord(c) > 0x7F)


def _unpack(repo: Repository, texts: list[bytes], shas: list[str]) -> bool:
    """Write each text as a commit object through one `git unpack-objects --strict`, from a pack made here (no
    file per object: creating a file costs more than git's whole work here); whether git took them all and holds
    the last one's SHA (a commit of `shas`, each object's own hash, names the ones before it)."""
    import struct
    import zlib

    pack = [b"PACK", struct.pack(">II", 2, len(texts))]
    for text in texts:
        size = len(text)
        header = bytearray([(1 << 4) | (size & 0x0F)])  # type 1: a commit; the size's low 4 bits
        size >>= 4
        while size:
            header[-1] |= 0x80
            header.append(size & 0x7F)
            size >>= 7
        pack += [bytes(header), zlib.compress(text)]
    data = b"".join(pack)
    trailer = hashlib.sha1(data, usedforsecurity=False).digest()  # a pack's own checksum
    done = repo.run(["unpack-objects", "-q", "--strict"], stdin=data + trailer, check=False)
    if done.status != 0:
        return False
    found = repo.run(["cat-file", "--batch-check=%(objectname) %(objecttype)"], stdin=f"{shas[-1]}\n".encode(),
                     check=False)
    return found.status == 0 and found.text == f"{shas[-1]} commit"


def _hash_objects(repo: Repository, texts: list[bytes]) -> list[str]:
    """Write each text as a commit object in one git process; the SHAs git gives them."""
    with scratch.folder("commits") as folder:
        paths = []
        for index, text in enumerate(texts):
            path = Path(folder) / f"{index}"
            path.write_bytes(text)
            paths.append(str(path))
        done = repo.run(["hash-object", "-t", "commit", "-w", "--stdin-paths"],
                        stdin="".join(f"{p}\n" for p in paths).encode(), check=False)
    return done.text.split() if done.status == 0 else []
