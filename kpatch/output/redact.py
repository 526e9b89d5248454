"""Credentials never leave kpatch: userinfo in URLs and tokens are blanked in every text it shows or writes."""

from __future__ import annotations

import re

# scheme://user[:password]@host  ->  scheme://***@host; up to the last '@' of the authority, so that a password
# with an unencoded '@' is hidden whole.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s'\"]+)@")
_SECRETS: set[str] = set()
MASK = "***"


def redact_url(url: str) -> str:
    """`url` without its userinfo (user names are hidden too: they often are tokens)."""
    return _USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", url)


def add_secret(value: str | None) -> None:
    """Blank `value` (a token) wherever it would appear in output, logs or files kpatch writes."""
    if value and len(value) >= 4:
        _SECRETS.add(value)


def redact_text(text: str) -> str:
    """`text` with every URL's userinfo and every registered secret blanked."""
    text = redact_url(text)
    for secret in _SECRETS:
        text = text.replace(secret, MASK)
    return text
