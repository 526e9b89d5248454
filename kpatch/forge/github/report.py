"""The nightly's pull request and failure issue: one of each, retried once per round, never an escaping error."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kpatch.forge.github.access import Target, client
from kpatch.forge.model import Action, Kind, Outcome, Ref, Result

log = logging.getLogger("kpatch.forge.github")

FAILURE_LABEL = "nightly-failure"


@dataclass(frozen=True)
class RetryPolicy:
    """How long kpatch keeps trying: `attempts` rounds, waits doubling from `first_wait`, none over `longest_wait`."""

    attempts: int = 5
    first_wait: float = 2.0
    longest_wait: float = 300.0


@dataclass(frozen=True)
class _Failure:
    outcome: Outcome
    message: str
    wait: float | None  # seconds before the next round; None: another round cannot help


@dataclass
class _Progress:
    """Writes made in earlier rounds of one step, so a write whose reply was lost is not made twice."""

    created: bool = False
    commented: set[int] = field(default_factory=set)
    closed: Ref | None = None


class Reporter:
    """The nightly's voice on GitHub; see the module docstring. Use as a context manager (closes the session)."""

    def __init__(self, tgt: Target, *, sleep: Callable[[float], None] = time.sleep, retry: RetryPolicy | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.target = tgt
        self.sleep = sleep
        self.retry = retry or RetryPolicy()
        self.clock = clock
        self._client: Any = None

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._client is not None:
            self._client.close()

    @property
    def dry(self) -> bool:
        return self.target.dry_run is not None

    def ensure_pull_request(self, head: str, base: str, title: str, body: str) -> Result:
        """Open ONE pull request head -> base, or update the title and body of the open one."""
        progress = _Progress()
        owner = self.target.repository.owner if self.target.repository else ""  # _step asks only with a repository

        def work(repo: Any) -> tuple[Action, Ref | None]:
            pulls = sorted(repo.get_pulls(state="open", head=f"{owner}:{head}", base=base), key=lambda p: p.number)
            return self._one(pulls, progress, title, body, lambda pull: self._edit(pull, title, body),
                             lambda: repo.create_pull(base=base, head=head, title=title, body=body,
                                                      maintainer_can_modify=False))

        return self._step(Kind.PULL, Action.OPEN, f"{head} -> {base}", work)

    def propose_pull(self, head_owner: str, head: str, base: str, title: str, body: str, *,
                     draft: bool = False) -> Result:
        """ONE pull request from `head_owner:head` (a fork's branch) -> `base`, found by its head: opened when there
        is none, else its title and body edited (never a second one); NOTHING (with it) when it was closed."""
        progress = _Progress()

        def work(repo: Any) -> tuple[Action, Ref | None]:
            found = sorted(repo.get_pulls(state="all", head=f"{head_owner}:{head}", base=base),
                           key=lambda p: p.number)
            pulls = [p for p in found if p.state == "open"]
            if found and not pulls and not progress.created:
                return Action.NOTHING, _ref(found[-1])  # closed or merged: never reopened, never a second one
            return self._one(pulls, progress, title, body, lambda pull: self._edit(pull, title, body),
                             lambda: repo.create_pull(base=base, head=f"{head_owner}:{head}", title=title,
                                                      body=body, draft=draft, maintainer_can_modify=True))

        return self._step(Kind.PULL, Action.OPEN, f"{head_owner}:{head} -> {base}", work)

    def report_failure(self, title: str, body: str, label: str = FAILURE_LABEL) -> Result:
        """Open ONE issue with `label`, or comment `body` on the open one."""
        progress = _Progress()

        def comment(issue: Any) -> Action:
            if not self.dry:
                self._comment_once(issue, body, progress)
            return Action.COMMENT

        def work(repo: Any) -> tuple[Action, Ref | None]:
            return self._one(_open_issues(repo, label), progress, title, body, comment,
                             lambda: repo.create_issue(title=title, body=body, labels=[label]),
                             prepare=lambda: _ensure_label(repo, label))

        return self._step(Kind.ISSUE, Action.OPEN, f"labelled {label}", work)

    def keep_issue(self, title: str, body: str, label: str, about: str) -> Result:
        """ONE issue with `label` whose body is edited in place each time; opened when there is none open."""
        progress = _Progress()

        def work(repo: Any) -> tuple[Action, Ref | None]:
            return self._one(_open_issues(repo, label), progress, title, body,
                             lambda issue: self._edit(issue, title, body),
                             lambda: repo.create_issue(title=title, body=body, labels=[label]),
                             prepare=lambda: _ensure_label(repo, label, about))

        return self._step(Kind.ISSUE, Action.OPEN, f"labelled {label}", work)

    def pin_issue(self, number: int) -> Result:
        """Pin issue #number to the repository. GitHub's REST API has no pin: GraphQL's `pinIssue`, asked only when
        the issue's `isPinned` is false (a retry after a lost reply, or a person's pin, pins nothing twice)."""

        def work(repo: Any) -> tuple[Action, Ref | None]:
            issue = repo.get_issue(number)
            ref = _ref(issue)
            _, data = repo.requester.graphql_query(_IS_PINNED, {"id": issue.node_id})
            if (data.get("data") or {}).get("node", {}).get("isPinned"):
                return Action.NOTHING, ref
            if not self.dry:
                repo.requester.graphql_query(_PIN, {"input": {"issueId": issue.node_id}})
            return Action.PIN, ref

        return self._step(Kind.ISSUE, Action.PIN, f"#{number}", work)
    def _one(self, items: list[Any], progress: _Progress, title: str, body: str, update: Callable[[Any], Action],
             create: Callable[[], Any], *, prepare: Callable[[], None] | None = None) -> tuple[Action, Ref | None]:
        """The one open item (the oldest of `items`) updated, else created once: a round after one whose create
        went through but whose reply was lost finds that item (its very title and body) and calls it opened,
        never creating a second. Nothing is written in a dry run (`update` checks `self.dry` itself)."""
        if items:
            item = items[0]
            if progress.created and (item.title, item.body or "") == (title, body):
                return Action.OPEN, _ref(item)  # the create went through; only its reply was lost
            return update(item), _ref(item)
        if self.dry:
            return Action.OPEN, None
        if prepare is not None:
            prepare()
        progress.created = True
        return Action.OPEN, _ref(create())

    def _edit(self, item: Any, title: str, body: str) -> Action:
        """Edit an open item's title and body when they differ (never in a dry run)."""
        if not self.dry and (item.title, item.body or "") != (title, body):
            item.edit(title=title, body=body)
        return Action.UPDATE

    def close_failure(self, comment: str, label: str = FAILURE_LABEL) -> Result:
        """Comment on and close every open issue with `label`; NOTHING when there is none."""
        progress = _Progress()

        def work(repo: Any) -> tuple[Action, Ref | None]:
            issues = _open_issues(repo, label)
            if not issues:
                return (Action.CLOSE, progress.closed) if progress.closed else (Action.NOTHING, None)
            if self.dry:
                return Action.CLOSE, _ref(issues[0])
            for issue in issues:
                self._comment_once(issue, comment, progress)
                progress.closed = progress.closed or _ref(issue)
                issue.edit(state="closed", state_reason="completed")
            return Action.CLOSE, progress.closed

        return self._step(Kind.ISSUE, Action.CLOSE, f"labelled {label}", work)

    def _comment_once(self, issue: Any, body: str, progress: _Progress) -> None:
        if issue.number in progress.commented:
            comments = list(issue.get_comments())
            if comments and comments[-1].body == body:
                return  # the earlier round's comment landed; only its reply was lost
        progress.commented.add(issue.number)
        issue.create_comment(body)

    def _step(self, kind: Kind, intent: Action, what: str, work: Callable[[Any], tuple[Action, Ref | None]]) -> Result:
        tgt = self.target
        if tgt.repository is None or not tgt.asks:
            return Result(kind, intent, Outcome.DRY_RUN, None, 0, _would(kind, intent, what, None, tgt.dry_run))
        if self._client is None:
            self._client = client(tgt)
        repo = self._client.get_repo(str(tgt.repository))  # lazy client: no request until a step reads
        for attempt in range(1, self.retry.attempts + 1):
            try:
                action, ref = work(repo)
            except Exception as err:  # noqa: BLE001  # every failure of GitHub or of the way to it becomes a typed result
                failure = self._failure(err, attempt)
                last = attempt == self.retry.attempts
                if failure.wait is None or last or failure.wait > self.retry.longest_wait:
                    log.warning("GitHub: %s %s %s: %s (attempt %d)", intent.value, kind.value, what, failure.message,
                                attempt)
                    return Result(kind, intent, failure.outcome, None, attempt,
                                  f"GitHub {failure.outcome.value} ({failure.message}) after {attempt} attempt(s): "
                                  f"{kind.value} {what} not {_PAST[intent]}")
                log.info("GitHub: %s; attempt %d of %d again in %.0f s", failure.message, attempt,
                         self.retry.attempts, failure.wait)
                self.sleep(failure.wait)
                continue
            if self.dry:
                return Result(kind, action, Outcome.DRY_RUN, ref, attempt, _would(kind, action, what, ref, tgt.dry_run))
            message = (f"no open {kind.value} {what}: nothing to close" if action is Action.NOTHING else
                       f"{_PAST[action]} {kind.value} #{ref.number if ref else '?'} {ref.url if ref else ''}".strip())
            log.info("GitHub: %s", message)
            return Result(kind, action, Outcome.DONE, ref, attempt, message)
        raise AssertionError("unreachable: RetryPolicy.attempts must be at least 1")

    def _failure(self, err: Exception, attempt: int) -> _Failure:
        """What went wrong, and how long to wait before the next round (None: do not retry)."""
        # imported where used: PyGithub (~160 ms) and requests only when GitHub is asked
        import requests
        from github import GithubException, RateLimitExceededException

        backoff = self.retry.first_wait * 2 ** (attempt - 1)
        api = self.target.api
        if isinstance(err, GithubException):
            headers = {str(k).lower(): str(v) for k, v in (err.headers or {}).items()}
            said = err.data.get("message") if isinstance(err.data, dict) else None
            errors = err.data.get("errors") if isinstance(err.data, dict) else None
            if said is None and isinstance(errors, list) and errors and isinstance(errors[0], dict):
                said = str(errors[0].get("message", ""))  # GraphQL's answer: 200 with errors, raised as a 400
            what = self._scrub(f"{api} answered {err.status}" + (f": {said}" if said else ""))
            limited = "retry-after" in headers or headers.get("x-ratelimit-remaining") == "0"
            if err.status == 429 or isinstance(err, RateLimitExceededException) or (err.status == 403 and limited):
                return _Failure(Outcome.UNAVAILABLE, f"rate limited ({what})", self._rate_wait(headers, backoff))
            if err.status >= 500:
                return _Failure(Outcome.UNAVAILABLE, what, _retry_after(headers, self.clock()) or backoff)
            return _Failure(Outcome.DENIED if err.status in (401, 403) else Outcome.REJECTED, what, None)
        if isinstance(err, (requests.RequestException, OSError)):
            return _Failure(Outcome.UNAVAILABLE, f"{api} unreachable ({type(err).__name__})", backoff)
        log.warning("GitHub: unexpected %s", self._scrub(repr(err)), exc_info=False)
        return _Failure(Outcome.UNAVAILABLE, f"unexpected reply from {api} ({type(err).__name__})", None)

    def _rate_wait(self, headers: Mapping[str, str], backoff: float) -> float:
        """Retry-After first; then the primary limit's reset time; else a minute, as GitHub's docs ask."""
        after = _retry_after(headers, self.clock())
        if after is not None:
            return after
        if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset", "").isdigit():
            return max(1.0, float(headers["x-ratelimit-reset"]) - self.clock() + 1)
        return max(60.0, backoff)

    def _scrub(self, text: str) -> str:
        return self.target.token.redact(text) if self.target.token else text


_PAST = {Action.OPEN: "opened", Action.UPDATE: "updated", Action.COMMENT: "commented on", Action.CLOSE: "closed",
         Action.PIN: "pinned", Action.NOTHING: "touched"}
_IS_PINNED = "query IsPinned($id: ID!) { node(id: $id) { ... on Issue { isPinned } } }"
_PIN = "mutation PinIssue($input: PinIssueInput!) { pinIssue(input: $input) { issue { id isPinned } } }"


def _would(kind: Kind, action: Action, what: str, ref: Ref | None, why: str | None) -> str:
    """A dry run's line: what would be done, to which number when GitHub was asked."""
    if ref is not None:
        return f"would {action.value} {kind.value} #{ref.number} ({why})"
    if action is Action.NOTHING:
        return f"would do nothing: no open {kind.value} {what} ({why})"
    if why and why != "--dry-run":  # GitHub was not asked: say both ways it could go
        alternative = {Action.OPEN: ", or update/comment on the open one", Action.CLOSE: " if one is open"}
        return f"would {action.value} {kind.value} {what}{alternative.get(action, '')} ({why}: GitHub not asked)"
    return f"would {action.value} {kind.value} {what} ({why})"


def _ref(item: Any) -> Ref:
    return Ref(number=item.number, url=item.html_url, title=item.title)


def _open_issues(repo: Any, label: str) -> list[Any]:
    """Open issues with the label, oldest first; the issues API lists pull requests too, which are skipped."""
    # `/pull/` in the page URL marks a pull request; reading `pull_request`, absent from a plain issue's data,
    # would make PyGithub fetch every issue once more.
    issues = [i for i in repo.get_issues(state="open", labels=[label]) if "/pull/" not in i.html_url]
    return sorted(issues, key=lambda i: i.number)


def _ensure_label(repo: Any, label: str,
                  about: str = "kpatch nightly failed; closed by the next passing night") -> None:
    from github import UnknownObjectException

    try:
        repo.get_label(label).complete()  # the client is lazy: ask now, so a missing label is a 404 here
    except UnknownObjectException:
        repo.create_label(label, "b60205", about)


def _retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds from a Retry-After header (a number, or an HTTP date), or None."""
    value = headers.get("retry-after", "").strip()
    if value.isdigit():
        return float(value)
    if value:
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - now)
        except (TypeError, ValueError):
            return None
    return None
