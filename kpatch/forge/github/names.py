"""GitHub's name rules for owners, repositories and `owner/repo#N`: the one check, cheap to import."""

from __future__ import annotations

import re
from dataclasses import dataclass

# GitHub's name rules: an owner is 1-39 letters, digits, `-` (not first or last) or `_` (Enterprise managed users);
# a repository is 1-100 letters, digits, `.`, `_`, `-`, but never `.` or `..` (a segment that climbs the API URL).
OWNER_PATTERN = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,37}[A-Za-z0-9_])?"
NAME_PATTERN = r"(?!\.{1,2}(?![A-Za-z0-9_.-]))[A-Za-z0-9_.-]{1,100}"
PR_PATTERN = rf"(?P<owner>{OWNER_PATTERN})/(?P<name>{NAME_PATTERN})#(?P<number>[1-9][0-9]{{0,9}})"
_REPOSITORY = re.compile(rf"(?P<owner>{OWNER_PATTERN})/(?P<name>{NAME_PATTERN})")


@dataclass(frozen=True)
class Repository:
    """`owner/name`, checked against GitHub's name rules."""

    owner: str
    name: str

    def __str__(self) -> str:
        return f"{self.owner}/{self.name}"


def parse_repository(text: str) -> Repository | None:
    """`owner/name` as a Repository, or None when it breaks GitHub's name rules."""
    match = _REPOSITORY.fullmatch(text)
    return Repository(match["owner"], match["name"]) if match else None
