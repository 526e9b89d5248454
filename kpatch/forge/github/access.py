"""Where kpatch reports and as whom: GitHub name rules, the token that never shows, the PyGithub client."""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from kpatch.errors import UsageError
from kpatch.forge import offline_reason
from kpatch.forge.github.names import Repository, parse_repository

log = logging.getLogger("kpatch.forge.github")

DEFAULT_API = "https://api.github.com"
TIMEOUT = 10
class Token:
    """A GitHub token that never shows itself: repr, str and f-strings print `***`."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself: only for the Authorization header and git's auth header."""
        return self._value

    def redact(self, text: str) -> str:
        """`text` with the token (and its base64 forms as git sends it) replaced by `***`."""
        for secret in (self._value, _basic(self._value)):
            text = text.replace(secret, "***")
        return text

    def __repr__(self) -> str:
        return "Token(***)"

    __str__ = __repr__


def _basic(token: str) -> str:
    return base64.b64encode(f"x-access-token:{token}".encode()).decode()


class _Redact(logging.Filter):
    """Replaces every known token in a record before any handler sees it."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[Token] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if self.tokens:
            text = record.getMessage()
            for token in self.tokens:
                text = token.redact(text)
            record.msg, record.args = text, None
        return True


_REDACT = _Redact()
# A logger's filter sees only the records made on that very logger: kpatch's, and PyGithub's request log, which
# masks the Authorization header but prints response bodies as they come (a proxy may echo the header back).
for _name in ("kpatch.forge.github", "github.Requester", "github.GithubRetry", "urllib3.connectionpool"):
    logging.getLogger(_name).addFilter(_REDACT)


@dataclass(frozen=True)
class Target:
    """Where and as whom kpatch reports; `dry_run` says why nothing will be written, when nothing will."""

    repository: Repository | None
    api: str
    token: Token | None = field(repr=False)
    dry_run: str | None
    asks: bool  # GitHub is read (a repository, a token, not offline); it is written only when dry_run is None


def target(configured: Repository | None, environ: Mapping[str, str], *, dry_run: bool = False) -> Target:
    """The repository (kpatch.toml's [github], else GITHUB_REPOSITORY) and GITHUB_TOKEN; a bad value is an error."""
    repository = configured
    if repository is None and environ.get("GITHUB_REPOSITORY"):
        repository = parse_repository(environ["GITHUB_REPOSITORY"])
        if repository is None:
            raise UsageError(f"GITHUB_REPOSITORY must be owner/name, not {environ['GITHUB_REPOSITORY']!r}")
    secret = environ.get("GITHUB_TOKEN", "").strip()
    token = Token(secret) if secret else None
    if token and all(known.reveal() != secret for known in _REDACT.tokens):
        _REDACT.tokens.append(token)
    offline = offline_reason(environ)
    why = ("--dry-run" if dry_run else
           "no repository: set [github] repository in kpatch.toml or GITHUB_REPOSITORY" if repository is None else
           "no GITHUB_TOKEN" if token is None else offline)
    return Target(repository=repository, api=environ.get("KPATCH_GITHUB_API", DEFAULT_API), token=token, dry_run=why,
                  asks=repository is not None and token is not None and not offline)


@dataclass(frozen=True)
class PushTarget:
    """Where `git push` sends the nightly branch, and the environment that authenticates it (never in argv)."""

    url: str
    env: Mapping[str, str] = field(repr=False)


def push_target(tgt: Target) -> PushTarget | None:
    """The HTTPS remote of the repository and git config (via GIT_CONFIG_*) carrying the token as a header."""
    if tgt.repository is None:
        return None
    web = web_url(tgt.api)
    env: dict[str, str] = {}
    if tgt.token is not None:
        env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"http.{web}/.extraheader",
               "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {_basic(tgt.token.reveal())}"}
    return PushTarget(url=f"{web}/{tgt.repository}.git", env=env)


def web_url(api: str) -> str:
    """The web host of the API `api`: https://github.com, or a GitHub Enterprise host (https://HOST/api/v3)."""
    return "https://github.com" if api.rstrip("/") == DEFAULT_API else re.sub(r"/api/v3/?$", "", api.rstrip("/"))


def client(tgt: Target) -> Any:
    """A PyGithub client with its own retry and throttling off: kpatch retries, and counts, once."""
    # imported where used: PyGithub (~160 ms) only when GitHub is asked
    from github import Auth, Github

    auth = Auth.Token(tgt.token.reveal()) if tgt.token else None
    return Github(base_url=tgt.api, auth=auth, timeout=TIMEOUT, retry=None, per_page=100, lazy=True,
                  seconds_between_requests=None, seconds_between_writes=None)


def scrub(text: str, tgt: Target) -> str:
    """`text` with the target's token redacted."""
    return tgt.token.redact(text) if tgt.token else text


def forge_host(environ: Mapping[str, str]) -> str:
    """The host (and port) the token belongs to: github.com, or the GitHub Enterprise host of KPATCH_GITHUB_API."""
    api = environ.get("KPATCH_GITHUB_API", DEFAULT_API).rstrip("/")
    web = "https://github.com" if api == DEFAULT_API else re.sub(r"/api/v3$", "", api)
    return urlsplit(web).netloc.lower()


def push_env(url: str, environ: Mapping[str, str], *, dry_run: bool = False) -> dict[str, str]:
    """git config (GIT_CONFIG_*) that sends GITHUB_TOKEN as an auth header to `url` when it is an https URL of the
    forge the token belongs to (`forge_host`); nothing for another host, another URL (ssh, a path: the person's own
    git credentials do) or a dry run, which pushes nothing. The token never goes in a URL or argv."""
    secret = environ.get("GITHUB_TOKEN", "").strip()
    match = re.match(r"^(https://([^/@]+))/", url)
    if dry_run or not secret or match is None or match.group(2).lower() != forge_host(environ):
        return {}
    token = Token(secret)
    if all(known.reveal() != secret for known in _REDACT.tokens):
        _REDACT.tokens.append(token)
    return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"http.{match.group(1)}/.extraheader",
            "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {_basic(secret)}"}
