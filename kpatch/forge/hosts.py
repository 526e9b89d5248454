"""Which forge hosts a thing, and its implementation for it: an Upstream-PR (`owner/repo#N`), a repository the
nightly reports to, a fork kpatch pushes to. GitHub is the one host today (`forge.github`).

Apart from `forge/__init__.py` (the Protocol and the offline switch) because `forge.github` imports those: the
package face importing its implementation back would be a circle."""

from __future__ import annotations

from collections.abc import Mapping

from kpatch.forge import Forge
from kpatch.forge.github.access import push_env as github_push_env
from kpatch.forge.github.access import target
from kpatch.forge.github.names import parse_repository
from kpatch.forge.github.pulls import check_pulls as github_pulls
from kpatch.forge.github.report import Reporter
from kpatch.forge.model import PullCheck


def check_pulls(prs: set[str]) -> PullCheck:
    """The Upstream-PR states, from the forge the PR names live on (`owner/repo#N`: GitHub)."""
    return github_pulls(prs)


def on_repository(repository: str, environ: Mapping[str, str], *, dry_run: bool) -> Forge:
    """The forge for pull requests on `repository` (`owner/name` on GitHub): GITHUB_TOKEN, KPATCH_GITHUB_API."""
    return Reporter(target(parse_repository(repository), environ, dry_run=dry_run))


def push_env(url: str, environ: Mapping[str, str], *, dry_run: bool = False) -> dict[str, str]:
    """What authenticates a `git push` to the fork at `url` (the token as a header, in the environment only, and
    only to the forge's own host; nothing in a dry run)."""
    return github_push_env(url, environ, dry_run=dry_run)
