"""Upstream URLs: which may be fetched (https, ssh, git, file and local paths; never an option or a `..`), what
identifies a repository (the normalised URL, which keys its mirror's folder), the variable that overrides an
upstream's URL, and the URL as a mirror's config may keep it (no credentials)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from urllib.parse import unquote

from kpatch.output.redact import redact_url

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_ALLOWED_SCHEMES = {"https", "ssh", "git", "file"}
_SCP_LIKE = re.compile(r"^[^/]+:")  # host:path, git's short form of an ssh URL (its path is the host's business)
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/]*@")


def is_url(url: str) -> bool:
    """Whether `url` has a scheme (`https://...`, `file://...`); a local path or `host:path` has none."""
    return _SCHEME.match(url) is not None


def stored_url(url: str) -> str:
    """`url` as a mirror's config may keep it: without userinfo (a token there would be written to disk)."""
    return _USERINFO.sub(r"\1", url)


def url_variable(name: str) -> str:
    """The environment variable that overrides upstream `name`'s URL (`-` and `.` written as `_`)."""
    return "KPATCH_URL_" + re.sub(r"[^A-Z0-9]", "_", name.upper())


def url_problem(url: str) -> str | None:
    """Why `url` may not be fetched (None when it may): https, ssh, git, file URLs and local paths only."""
    if not url.strip() or url != url.strip():
        return "an upstream URL may not be empty or start or end with spaces"
    if any(ord(c) < 32 or ord(c) == 127 for c in url):
        return "an upstream URL may not contain control characters"
    if url.startswith("-"):
        return f"{redact_url(url)!r} looks like a command-line option, not a URL"
    option_like = _option_like(url)
    if option_like:
        return option_like
    scheme = _SCHEME.match(url)
    if scheme:
        name = scheme.group(1).lower()
        if name not in _ALLOWED_SCHEMES:
            hint = " (use https://)" if name == "http" else ""
            return f"URL scheme {name!r} is not allowed{hint}: use https, ssh, git, file or a local path"
        return _dotdot(url, unquote(url[len(scheme.group(0)):])) if name == "file" else None
    if "::" in url.split("/", 1)[0]:
        return f"git remote helpers ({url.split('::', 1)[0]}::) are not allowed: use https, ssh, git, file or a path"
    return None if _SCP_LIKE.match(url) else _dotdot(url, url)


def _option_like(url: str) -> str | None:
    """A host or path that starts with '-' (`host:-x`, `ssh://-oProxyCommand=...`) is refused: git hands it on to
    ssh or to the server as an argument, where it reads as an option."""
    scheme = _SCHEME.match(url)
    if scheme:
        host = url[len(scheme.group(0)):].split("/", 1)[0].rsplit("@", 1)[-1]
        return f"{redact_url(url)!r}: its host {host!r} looks like a command-line option" if host.startswith("-") \
            else None
    if _SCP_LIKE.match(url):
        host, _, path = url.partition(":")
        for part, what in ((host.rsplit("@", 1)[-1], "host"), (path, "path")):
            if part.startswith("-"):
                return f"{redact_url(url)!r}: its {what} {part!r} looks like a command-line option, not a URL"
    return None


def normalized_url(url: str) -> str:
    """What identifies an upstream's repository: the URL without userinfo, a trailing `/` or `.git`, its scheme and
    host lower-cased; `host:path` written as `ssh://host/path`; a local path (or file:// URL) as the real path of
    the folder it names. Two spellings of one repository give one string; two repositories never do."""
    scheme = _SCHEME.match(url)
    if scheme and scheme.group(1).lower() == "file":
        url = unquote(url[len(scheme.group(0)):])
        scheme = None
    elif not scheme and _SCP_LIKE.match(url):
        host, _, path = url.partition(":")
        url = f"ssh://{host}/{path.lstrip('/')}"
        scheme = _SCHEME.match(url)
    if scheme is None:  # a folder here: `x` and `x.git` are two of them
        return os.path.realpath(Path(url).expanduser())
    host, slash, path = url[len(scheme.group(0)):].partition("/")
    text = f"{scheme.group(1).lower()}://{host.rsplit('@', 1)[-1].lower()}{slash}{path}".rstrip("/")
    return text.removesuffix(".git") if path.rstrip("/") not in ("", ".git") else text


def mirror_folder(url: str) -> str:
    """The folder name of the mirror of `url` in the cache's `mirrors/`: the repository's last path segment (for
    people) and a hash of its normalised URL (what keys it)."""
    key = normalized_url(url)
    last = key.rsplit("/", 1)[-1].removesuffix(".git")
    tail = re.sub(r"[^A-Za-z0-9._-]+", "-", last).strip(".-")[:40] or "repository"
    return f"{tail}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.git"


def _dotdot(url: str, path: str) -> str | None:
    """A file URL or local path with a `..` segment is refused: where it leads depends on the folder it is read
    from (and a symlink on the way), so the mirror would fetch from somewhere the URL does not say."""
    if ".." not in re.split(r"[/\\]", path):
        return None
    return f"{redact_url(url)!r} has a '..' segment: give the folder's absolute path without '..'"
