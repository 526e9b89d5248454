"""A branch that holds a published tree (the release index's `gh-pages`): checked out into a scratch folder from
its remote, and the folder's tree committed on it and pushed with a lease, so two publishers never overwrite each
other. Authentication comes through `env` (`GIT_CONFIG_*`), never a URL or argv."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kpatch.errors import UpstreamError
from kpatch.gitx.branch import push_lease, remote_branch
from kpatch.gitx.runner import COMMITTER, run


def checkout(remote: str, branch: str, folder: Path, env: Mapping[str, str]) -> str | None:
    """`folder` (new) holding `branch` of `remote` as it is there; returns its commit (None: no such branch yet,
    the folder starts empty)."""
    folder.mkdir(parents=True)
    run(["init", "--quiet", str(folder)], folder)
    try:
        head = remote_branch(folder, remote, branch, env)
        if head is not None:
            run(["fetch", "--quiet", "--no-tags", "--", remote, f"refs/heads/{branch}"], folder, env=env,
                user_config=True)
            run(["checkout", "--quiet", "--detach", head], folder)
    except Exception as err:  # noqa: BLE001  # a remote that cannot be read: the next step says which
        raise UpstreamError(f"cannot read branch {branch} of {remote}: {str(err).splitlines()[0]}") from None
    return head


def publish(folder: Path, remote: str, branch: str, parent: str | None, message: str,
            env: Mapping[str, str]) -> str | None:
    """Commit the folder's whole tree on `parent` and push it as `branch` of `remote`, if it still is `parent`
    there. Returns the commit, or None when the tree did not change."""
    run(["add", "--all", "--force", "."], folder)
    tree = run(["write-tree"], folder).text.strip()
    if parent is not None and run(["rev-parse", f"{parent}^{{tree}}"], folder).text.strip() == tree:
        return None
    author = {"GIT_AUTHOR_NAME": COMMITTER[0], "GIT_AUTHOR_EMAIL": COMMITTER[1]}
    commit = run(["commit-tree", *(["-p", parent] if parent else []), "-F", "-", tree], folder,
                 stdin=message.encode("utf-8"), env=author).text.strip()
    refused = push_lease(folder, commit, remote, branch, parent, env)
    if refused is not None:
        raise UpstreamError(f"the index was not pushed to branch {branch} of {remote}: {refused} (another publisher "
                            "moved it? run kpatch release again)")
    return commit
