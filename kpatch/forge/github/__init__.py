"""The one seam to GitHub (through PyGithub), the implementation of `kpatch.forge.Forge`: Upstream-PR states for
rebase, and the nightly's PR and issue.

Nothing else in kpatch imports PyGithub. PyGithub itself is imported lazily, so `kpatch --help` does not pay for it.

For `kpatch rebase`, `kpatch status --prs` and the nightly:

    check = github.check_pulls({"vllm-project/vllm#123", ...})      # -> PullCheck
    check.unavailable      # why GitHub could not be asked (then check.pulls is empty), or None
    check.pulls[pr]        # PullState(pr, merged, merge_commit, problem, state, review, checks); .summary

  All of them in ONE GraphQL query (up to 50 PRs a query); without a token (GitHub's GraphQL API needs one) each
  PR is read from the REST API instead, with no review or checks.

  `merge_commit` is a 40-hex SHA or None: GitHub's `merge_commit_sha` is refused when it is anything else (`main~20`,
  '', null) and `problem` says so. The caller must still check with git that the SHA is an ancestor of the new base
  before it drops a patch. PR names that break GitHub's name rules (`../..#1`) are never sent.

For `kpatch nightly` (issue 12):

    tgt = github.target(stack.github, os.environ, dry_run=options.dry_run)   # -> Target; UsageError if malformed
    with github.Reporter(tgt) as gh:                                          # sleep=, retry=, clock= for tests
        gh.ensure_pull_request("kpatch/nightly", "main", title, body)       # open ONE PR, or update the open one
        gh.report_failure(title, body)                                       # open ONE issue, or comment on it
        gh.close_failure(comment)                                            # close the open one after a pass
    github.push_target(tgt)   # PushTarget(url, env): git pushes with the token in an http.extraheader via env

  The repository comes from kpatch.toml (`[github] repository = "owner/name"`), else `GITHUB_REPOSITORY`; the
  token from `GITHUB_TOKEN`; the API base from `KPATCH_GITHUB_API` (GitHub Enterprise: `https://HOST/api/v3`).
  `tgt.dry_run` says why nothing will be written ("--dry-run", "no GITHUB_TOKEN", "no repository ...",
  "KPATCH_OFFLINE is set"), or is None. A dry run with a token still reads GitHub, to say exactly what it would do
  ("would update pull request #12"); without one, GitHub is not asked.

  Every step returns a `Result(kind, action, outcome, ref, attempts, message)` and never raises for anything
  GitHub does: `Outcome.DONE` (written), `DRY_RUN` (what would be written), `UNAVAILABLE` (5xx, rate limits or no
  connection after every retry), `DENIED` (401/403: the token lacks a permission), `REJECTED` (another 4xx). So
  the nightly's exit code reflects the run, not the reporting; it prints `result.message` and puts the result in
  its report.

Retries: 5xx and connection errors back off (2 s, 4 s, ...), rate limits wait for `Retry-After`, else the
primary limit's `x-ratelimit-reset`, else a minute; a wait beyond `RetryPolicy.longest_wait` gives up at once.
PyGithub's own retry and throttling are off, so each request is made and counted once per round. Each round
re-reads GitHub before writing, so a write whose reply was lost (a 502 after the issue was created) is not made
twice. The token lives in a `Token` (repr `Token(***)`); what this package logs is redacted by a filter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from kpatch.forge.github.names import NAME_PATTERN, OWNER_PATTERN, PR_PATTERN, Repository, parse_repository

if TYPE_CHECKING:  # the rest loads on first use: kpatch.toml's [github] check must not slow `kpatch --help`
    from kpatch.forge.github.access import DEFAULT_API, PushTarget, Target, Token, push_target, target
    from kpatch.forge.github.identity import TokenCheck, check_token
    from kpatch.forge.github.pulls import check_pulls, merge_commit
    from kpatch.forge.github.report import FAILURE_LABEL, Reporter, RetryPolicy
    from kpatch.forge.model import Action, Kind, Outcome, PullCheck, PullState, Ref, Result

_LAZY = {
    "pulls": ("check_pulls", "merge_commit"),
    "report": ("FAILURE_LABEL", "Reporter", "RetryPolicy"),
    "model": ("Action", "Kind", "Outcome", "PullCheck", "PullState", "Ref", "Result"),  # forge-neutral: kpatch.forge
    "access": ("DEFAULT_API", "PushTarget", "Target", "Token", "push_target", "target"),
    "identity": ("TokenCheck", "check_token"),
}
_WHERE = {name: module for module, names in _LAZY.items() for name in names}

__all__ = [
    "DEFAULT_API", "FAILURE_LABEL", "NAME_PATTERN", "OWNER_PATTERN", "PR_PATTERN", "Action", "Kind", "Outcome",
    "PullCheck", "PullState", "PushTarget", "Ref", "Reporter", "Repository", "Result", "RetryPolicy", "Target",
    "Token", "TokenCheck", "check_pulls", "check_token", "merge_commit", "parse_repository", "push_target", "target",
]


def __getattr__(name: str) -> object:
    """Load the submodule that defines `name` on first use."""
    if name not in _WHERE:
        raise AttributeError(f"module 'kpatch.forge.github' has no attribute {name!r}")
    package = "kpatch.forge" if _WHERE[name] == "model" else "kpatch.forge.github"
    return getattr(importlib.import_module(f"{package}.{_WHERE[name]}"), name)
