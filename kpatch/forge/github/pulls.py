"""Upstream-PR states for rebase: is each PR merged, and as which commit (GitHub's reply checked, not trusted)."""

from __future__ import annotations

import logging
import os
import re

from kpatch.forge.github.access import client, scrub, target
from kpatch.forge.github.names import PR_PATTERN
from kpatch.forge.model import PullCheck, PullState

log = logging.getLogger("kpatch.forge.github")

_PR = re.compile(PR_PATTERN)
_SHA = re.compile(r"[0-9a-f]{40}")


def merge_commit(value: object) -> str | None:
    """GitHub's merge_commit_sha when it is a full lowercase SHA, else None (`main~20`, '', null are refused)."""
    return value if isinstance(value, str) and _SHA.fullmatch(value) else None


def check_pulls(prs: set[str]) -> PullCheck:
    """Ask GitHub about each PR; any network or server failure degrades to 'unavailable', never a crash."""
    if not prs:
        return PullCheck({}, None)
    if os.environ.get("KPATCH_OFFLINE"):
        return PullCheck({}, "offline (KPATCH_OFFLINE is set): Upstream-PR states not checked")
    from github import GithubException

    # Only the token and API base matter here: the PRs name their own repositories.
    tgt = target(None, {k: v for k, v in os.environ.items() if k != "GITHUB_REPOSITORY"})
    session = client(tgt)
    pulls: dict[str, PullState] = {}
    try:
        for pr in sorted(prs):
            match = _PR.fullmatch(pr)
            if match is None:  # series.py refuses these already; never build an API path from one
                log.warning("GitHub: %r is not owner/repo#N: not asked", pr)
                continue
            try:
                repo = session.get_repo(f"{match['owner']}/{match['name']}")
                pull = repo.get_pull(int(match["number"]))
                # raw: PyGithub's typed attribute raises on a non-string, and any reply must end as a state
                raw = pull.raw_data
                state = ("merged" if raw.get("merged") is True else "closed" if raw.get("state") == "closed" else
                         "draft" if raw.get("draft") is True else "open")
                pulls[pr] = _state(pr, raw.get("merged") is True, raw.get("merge_commit_sha"), state)
            except GithubException as err:
                if err.status != 404:
                    raise
                log.warning("GitHub: %s not found", pr)
    except GithubException as err:
        return PullCheck({}, f"GitHub unavailable ({tgt.api} answered {err.status}): Upstream-PR states not checked")
    except Exception as err:  # noqa: BLE001  # connection refused, DNS, TLS, timeouts: all mean "cannot ask now"
        log.warning("GitHub unreachable: %s", scrub(f"{type(err).__name__}: {err}", tgt))
        return PullCheck({}, f"GitHub unreachable ({tgt.api}: {type(err).__name__}): Upstream-PR states not checked")
    finally:
        session.close()
    return PullCheck(pulls, None)


def _state(pr: str, merged: bool, sha: object, state: str) -> PullState:
    commit = merge_commit(sha)
    if merged and commit is None:
        problem = f"{pr} is merged but its merge_commit_sha is not a commit SHA ({str(sha)[:60]!r}): not trusted"
        log.warning("GitHub: %s", problem)
        return PullState(pr=pr, merged=True, merge_commit=None, problem=problem, state=state)
    return PullState(pr=pr, merged=merged, merge_commit=commit if merged else None, state=state)
