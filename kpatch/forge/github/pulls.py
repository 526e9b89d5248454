"""Upstream-PR states for rebase, status and the nightly: merged (as which commit, checked, not trusted), closed,
draft or open, the review decision and the head commit's checks.

With a token, every PR is asked in ONE GraphQL query (an aliased `repository { pullRequest }` per PR, up to `BATCH`
a query); GitHub's GraphQL API needs a token, so without one each PR is read from the REST API (public
repositories only, 60 requests an hour).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from typing import Any

from kpatch.forge import offline_reason
from kpatch.forge.github.access import Target, client, scrub, target
from kpatch.forge.github.names import PR_PATTERN
from kpatch.forge.model import PullCheck, PullState

log = logging.getLogger("kpatch.forge.github")

_PR = re.compile(PR_PATTERN)
_SHA = re.compile(r"[0-9a-f]{40}")
BATCH = 50  # pull requests per GraphQL query: one query for any stack kpatch has seen, well under GitHub's limits
FIELDS = ("state isDraft merged reviewDecision mergeCommit { oid } "
          "commits(last: 1) { nodes { commit { statusCheckRollup { state } } } }")
SCOPES = ("a classic token needs the repo scope (public_repo for public upstreams), a fine-grained one "
          "\"Pull requests: read\" on each upstream")
_REVIEW = {"APPROVED": "approved", "CHANGES_REQUESTED": "changes requested"}
_CHECKS = {"SUCCESS": "green", "FAILURE": "red", "ERROR": "red", "PENDING": "pending", "EXPECTED": "pending"}
NOT_CHECKED = "Upstream-PR states not checked"


class _Refused(Exception):
    """GitHub answered, but not with states: the one line to show instead."""


def merge_commit(value: object) -> str | None:
    """GitHub's merge_commit_sha when it is a full lowercase SHA, else None (`main~20`, '', null are refused)."""
    return value if isinstance(value, str) and _SHA.fullmatch(value) else None


def query(prs: Sequence[tuple[str, str, int]]) -> tuple[str, dict[str, object]]:
    """The GraphQL query for `(owner, name, number)`s: alias `prI` per PR, the names passed as variables."""
    params: list[str] = []
    parts: list[str] = []
    variables: dict[str, object] = {}
    for i, (owner, name, number) in enumerate(prs):
        params += [f"$o{i}: String!", f"$n{i}: String!", f"$p{i}: Int!"]
        parts.append(f"pr{i}: repository(owner: $o{i}, name: $n{i}) {{ pullRequest(number: $p{i}) {{ {FIELDS} }} }}")
        variables.update({f"o{i}": owner, f"n{i}": name, f"p{i}": number})
    return f"query({', '.join(params)}) {{ {' '.join(parts)} }}", variables


def check_pulls(prs: set[str]) -> PullCheck:
    """Ask GitHub about each PR; any network or server failure degrades to 'unavailable', never a crash."""
    if not prs:
        return PullCheck({}, None)
    reason = offline_reason()
    if reason:
        return PullCheck({}, f"offline ({reason}): {NOT_CHECKED}")
    # imported where used: PyGithub (~160 ms) only when GitHub is asked
    from github import GithubException

    # Only the token and API base matter here: the PRs name their own repositories.
    tgt = target(None, {k: v for k, v in os.environ.items() if k != "GITHUB_REPOSITORY"})
    wanted: list[tuple[str, str, str, int]] = []
    for pr in sorted(prs):
        match = _PR.fullmatch(pr)
        if match is None:  # series.py refuses these already; never build a query or API path from one
            log.warning("GitHub: %r is not owner/repo#N: not asked", pr)
            continue
        wanted.append((pr, match["owner"], match["name"], int(match["number"])))
    session = client(tgt)
    try:
        pulls = _graphql(session, tgt, wanted) if tgt.token is not None else _rest(session, wanted)
    except _Refused as err:
        return PullCheck({}, str(err))
    except GithubException as err:
        return PullCheck({}, _refusal(err.status, err.data, err.headers, tgt))
    except Exception as err:  # noqa: BLE001  # connection refused, DNS, TLS, timeouts: all mean "cannot ask now"
        log.warning("GitHub unreachable: %s", scrub(f"{type(err).__name__}: {err}", tgt))
        return PullCheck({}, f"GitHub unreachable ({tgt.api}: {type(err).__name__}): {NOT_CHECKED}")
    finally:
        session.close()
    return PullCheck(pulls, None)


def _refusal(status: int, data: object, headers: object, tgt: Target) -> str:
    """One line for a refused request: the scopes the token needs on 401/403 (unless rate limited)."""
    said = data.get("message") if isinstance(data, dict) else None
    answered = scrub(f"{tgt.api} answered {status}" + (f": {said}" if said else ""), tgt)
    lowered = {str(k).lower(): str(v) for k, v in (headers or {}).items()} if isinstance(headers, dict) else {}
    limited = "retry-after" in lowered or lowered.get("x-ratelimit-remaining") == "0"
    if status in (401, 403) and not limited and tgt.token is not None:
        return f"GITHUB_TOKEN cannot read the pull requests ({answered}): {SCOPES}; {NOT_CHECKED}"
    return f"GitHub unavailable ({tgt.api} answered {status}): {NOT_CHECKED}"


def _graphql(session: Any, tgt: Target, wanted: list[tuple[str, str, str, int]]) -> dict[str, PullState]:
    pulls: dict[str, PullState] = {}
    requester = session.requester
    for start in range(0, len(wanted), BATCH):
        chunk = wanted[start:start + BATCH]
        text, variables = query([(owner, name, number) for _, owner, name, number in chunk])
        _headers, reply = requester.requestJsonAndCheck("POST", requester.graphql_url,
                                                       input={"query": text, "variables": variables})
        reply = reply if isinstance(reply, dict) else {}
        missing: set[str] = set()
        for error in reply.get("errors") or []:
            error = error if isinstance(error, dict) else {}
            path = error.get("path") or [None]
            said = scrub(str(error.get("message", ""))[:200], tgt)
            if error.get("type") == "NOT_FOUND" and isinstance(path[0], str):
                missing.add(path[0])
                continue
            if error.get("type") == "FORBIDDEN":
                raise _Refused(f"GITHUB_TOKEN cannot read the pull requests ({tgt.api}: {said}): {SCOPES}; "
                               f"{NOT_CHECKED}")
            raise _Refused(f"GitHub refused the query ({tgt.api}: {said or 'no message'}): {NOT_CHECKED}")
        data = reply.get("data") if isinstance(reply.get("data"), dict) else {}
        for i, (pr, *_rest_of) in enumerate(chunk):
            node = _at(data, f"pr{i}", "pullRequest")
            if f"pr{i}" in missing or not isinstance(node, dict):
                log.warning("GitHub: %s not found", pr)
                continue
            merged = node.get("merged") is True
            state = ("merged" if merged else "closed" if node.get("state") == "CLOSED" else
                     "draft" if node.get("isDraft") is True else "open")
            nodes = _at(node, "commits", "nodes")
            last = nodes[-1] if isinstance(nodes, list) and nodes else None
            rollup = _at(last, "commit", "statusCheckRollup", "state")
            pulls[pr] = _state(pr, merged, _at(node, "mergeCommit", "oid"), state,
                               review=_REVIEW.get(str(node.get("reviewDecision"))),
                               checks=_CHECKS.get(str(rollup)))
    return pulls


def _at(value: object, *keys: str) -> object:
    """`value[k1][k2]...`, or None where the reply is not shaped so (a reply is checked, not trusted)."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _rest(session: Any, wanted: list[tuple[str, str, str, int]]) -> dict[str, PullState]:
    """One REST request per PR (no token: GitHub's GraphQL API needs one); no reviews or checks."""
    from github import GithubException

    pulls: dict[str, PullState] = {}
    for pr, owner, name, number in wanted:
        try:
            # raw: PyGithub's typed attribute raises on a non-string, and any reply must end as a state
            raw = session.get_repo(f"{owner}/{name}").get_pull(number).raw_data
        except GithubException as err:
            if err.status != 404:
                raise
            log.warning("GitHub: %s not found", pr)
            continue
        state = ("merged" if raw.get("merged") is True else "closed" if raw.get("state") == "closed" else
                 "draft" if raw.get("draft") is True else "open")
        pulls[pr] = _state(pr, raw.get("merged") is True, raw.get("merge_commit_sha"), state)
    return pulls


def _state(pr: str, merged: bool, sha: object, state: str, *, review: str | None = None,
           checks: str | None = None) -> PullState:
    commit = merge_commit(sha)
    if merged and commit is None:
        problem = f"{pr} is merged but its merge_commit_sha is not a commit SHA ({str(sha)[:60]!r}): not trusted"
        log.warning("GitHub: %s", problem)
        return PullState(pr=pr, merged=True, merge_commit=None, problem=problem, state=state)
    return PullState(pr=pr, merged=merged, merge_commit=commit if merged else None, state=state, review=review,
                     checks=checks if state in ("open", "draft") else None)
