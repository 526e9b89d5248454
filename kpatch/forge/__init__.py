"""Where the project and its upstreams are hosted, behind one small Protocol: what the nightly and the engine need.

GitHub, through PyGithub (`forge.github`), is its one implementation; `forge.hosts` says which forge hosts what.
Which forge a project uses is derived, not configured: kpatch.toml's `[github]` table (or `GITHUB_REPOSITORY`)
names the repository the nightly reports to, and an Upstream-PR trailer (`owner/repo#N`) names a GitHub pull
request. A GitLab upstream would add
`forge/gitlab/` implementing the same Protocol and its own table; nothing above this package would change.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from kpatch.forge.model import Result

OFFLINE = "KPATCH_OFFLINE"  # set: no forge is asked anything (Upstream-PR states unchecked, nothing written)


# Why kpatch itself set KPATCH_OFFLINE (the demo, a replay): what the messages say instead of "KPATCH_OFFLINE
# is set", which a person reads as "I set it". A variable, so that the processes kpatch starts read it too.
OFFLINE_BY = "KPATCH_OFFLINE_BY"


@contextmanager
def offline(why: str) -> Iterator[None]:
    """KPATCH_OFFLINE for a block (the demo, the simulated nights, a replay: no one on the network is asked about
    Upstream-PR states), restored after it. `why` is what the messages say (a person did not set it): "the demo
    runs offline"; where the person had set it already, they still say "KPATCH_OFFLINE is set"."""
    saved = {name: os.environ.get(name) for name in (OFFLINE, OFFLINE_BY)}
    if saved[OFFLINE] is None:
        os.environ[OFFLINE], os.environ[OFFLINE_BY] = "1", why
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def offline_reason(environ: Mapping[str, str] | None = None) -> str | None:
    """Why no forge is asked, in the words a message uses: "KPATCH_OFFLINE is set" where a person set it, the
    reason kpatch gave where it set it itself (`offline`); None when it is not set."""
    environ = os.environ if environ is None else environ
    if not environ.get(OFFLINE):
        return None
    return environ.get(OFFLINE_BY) or f"{OFFLINE} is set"


class Forge(Protocol):
    """The nightly's voice on the forge: one pull request and one failure issue, each step a Result that never
    raises for anything the forge does. A context manager (it closes its session)."""

    @property
    def dry(self) -> bool:
        """Nothing is written (a dry run, no token, offline): each step says what it would do."""
        ...

    def ensure_pull_request(self, head: str, base: str, title: str, body: str) -> Result:
        """Open ONE pull request head -> base, or update the title and body of the open one."""
        ...

    def propose_pull(self, head_owner: str, head: str, base: str, title: str, body: str, *,
                     draft: bool = False) -> Result:
        """ONE pull request from a fork's branch (`head_owner:head`) -> `base`, found by its head: opened, or its
        title and body edited (kpatch propose)."""
        ...

    def report_failure(self, title: str, body: str, label: str = ...) -> Result:
        """Open ONE failure issue (of `label`: each release line has its own), or comment on the open one."""
        ...

    def close_failure(self, comment: str, label: str = ...) -> Result:
        """Close the open failure issue of `label` (after a good night), saying why."""
        ...

    def keep_issue(self, title: str, body: str, label: str, about: str) -> Result:
        """ONE issue with `label` whose body is edited in place each time (the carry dashboard)."""
        ...

    def pin_issue(self, number: int) -> Result:
        """Pin issue `number` to the repository, once: one pinned already is left as it is (NOTHING)."""
        ...

    def __enter__(self) -> Forge: ...

    def __exit__(self, *exc: object) -> None: ...
