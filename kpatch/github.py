"""The only module that talks to GitHub (PyGithub): is an `Upstream-PR:` merged, and as which commit."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

log = logging.getLogger("kpatch.github")

DEFAULT_API = "https://api.github.com"
TIMEOUT = 10


@dataclass(frozen=True)
class PullState:
    pr: str  # owner/repo#N
    merged: bool
    merge_commit: str | None


@dataclass(frozen=True)
class PullCheck:
    """Merged PRs by name, or why GitHub could not be asked (then nothing is known)."""

    pulls: dict[str, PullState]
    unavailable: str | None


def api_url() -> str:
    return os.environ.get("KPATCH_GITHUB_API", DEFAULT_API)


def check_pulls(prs: set[str]) -> PullCheck:
    """Ask GitHub about each PR; any network or server failure degrades to 'unavailable', never a crash."""
    if not prs:
        return PullCheck({}, None)
    if os.environ.get("KPATCH_OFFLINE"):
        return PullCheck({}, "offline (KPATCH_OFFLINE is set): Upstream-PR states not checked")
    from github import Auth, Github, GithubException

    token = os.environ.get("GITHUB_TOKEN")
    client = Github(base_url=api_url(), auth=Auth.Token(token) if token else None, timeout=TIMEOUT, retry=None,
                    lazy=True)
    pulls: dict[str, PullState] = {}
    try:
        for pr in sorted(prs):
            repo, number = pr.split("#")
            try:
                pull = client.get_repo(repo).get_pull(int(number))
                pulls[pr] = PullState(pr=pr, merged=bool(pull.merged), merge_commit=pull.merge_commit_sha)
            except GithubException as err:
                if err.status != 404:
                    raise
                log.warning("GitHub: %s not found", pr)
    except GithubException as err:
        return PullCheck({}, f"GitHub unavailable ({api_url()} answered {err.status}): Upstream-PR states not checked")
    except Exception as err:  # connection refused, DNS, TLS, timeouts: all mean "cannot ask now"
        log.warning("GitHub unreachable: %r", err)
        return PullCheck({}, f"GitHub unreachable ({api_url()}: {type(err).__name__}): Upstream-PR states not checked")
    finally:
        client.close()
    return PullCheck(pulls, None)
