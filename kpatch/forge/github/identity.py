"""Who a GitHub token is and what it may do (for `kpatch doctor`), asked through PyGithub; the token never shows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kpatch.forge import offline_reason
from kpatch.forge.github.access import client, scrub, target

# What the nightly writes (a branch, a pull request, an issue with a label): a classic token needs one of these.
WRITE_SCOPES = ("repo", "public_repo")


@dataclass(frozen=True)
class TokenCheck:
    """GITHUB_TOKEN as GitHub sees it: its user and (classic tokens) its scopes, or why that is not known."""

    present: bool
    login: str | None = None
    scopes: tuple[str, ...] | None = None  # None: GitHub lists none (a fine-grained or app token)
    problem: str | None = None  # no token, offline, refused or unreachable

    @property
    def can_write(self) -> bool | None:
        """Whether the scopes allow the nightly's writes; None when GitHub does not list scopes."""
        if self.scopes is None:
            return None
        return any(scope in WRITE_SCOPES for scope in self.scopes)


def check_token(environ: Mapping[str, str]) -> TokenCheck:
    """Ask GitHub (`GET /user`) who GITHUB_TOKEN is and read its `X-OAuth-Scopes`."""
    # imported where used: PyGithub (~160 ms) only when GitHub is asked
    from github import GithubException

    tgt = target(None, environ)  # registers the token with the log redaction before any request
    if tgt.token is None:
        return TokenCheck(present=False, problem="no GITHUB_TOKEN")
    offline = offline_reason(environ)
    if offline:
        return TokenCheck(present=True, problem=f"{offline}: GitHub not asked")
    gh = client(tgt)
    try:
        login = gh.get_user().login
    except GithubException as err:
        message = (err.data or {}).get("message", "") if isinstance(err.data, dict) else ""
        return TokenCheck(present=True, problem=scrub(f"GitHub refused it ({err.status} {message})".strip(), tgt))
    except Exception as err:  # noqa: BLE001  # no connection, TLS, DNS: requests' and urllib3's many kinds
        return TokenCheck(present=True, problem=scrub(f"GitHub unreachable at {tgt.api} ({type(err).__name__})", tgt))
    header = gh.oauth_scopes
    scopes = None if header is None else tuple(s for s in header if s)
    return TokenCheck(present=True, login=login, scopes=scopes)
