"""GitHub Releases for `kpatch release --to github`: a draft first, its assets, published last.

A release is found by its tag among every release the token can see (drafts too: GitHub's by-tag lookup skips
them). An asset is uploaded once: one of the same name and size that GitHub says is `uploaded` is kept (a resumed
release), one that is not (an upload cut off: `starter`, or another size) is deleted first. Every failure of
GitHub, or of the way to it, is an UpstreamError naming the step; the token is only ever sent by PyGithub to the
API host it was given for (`access.client`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kpatch.errors import UpstreamError, UsageError
from kpatch.forge.github.access import Target, client, scrub, web_url

log = logging.getLogger("kpatch.forge.github")


@dataclass(frozen=True)
class ReleaseState:
    """A GitHub release as kpatch reads it: its tag, whether it is still a draft, its page, body and assets."""

    tag: str
    draft: bool
    url: str
    body: str
    assets: dict[str, int]  # name -> size, of the assets GitHub holds complete (state "uploaded")


class GitHubReleases:
    """The releases of the target's repository (a token that can write is required)."""

    def __init__(self, tgt: Target) -> None:
        if tgt.repository is None:
            raise UsageError("--to github: no repository: set [github] repository in kpatch.toml or "
                             "GITHUB_REPOSITORY")
        if tgt.token is None:
            raise UsageError(f"--to github: no GITHUB_TOKEN to publish on {tgt.repository} with")
        if not tgt.asks:
            raise UsageError(f"--to github: GitHub is not asked ({tgt.dry_run})")
        self.target = tgt
        self._client: Any = None
        self._repo: Any = None

    def __enter__(self) -> GitHubReleases:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._client is not None:
            self._client.close()

    @property
    def repository(self) -> str:
        return str(self.target.repository)

    def download_url(self, tag: str, name: str) -> str:
        """Where users download asset `name` of release `tag` once it is published."""
        return f"{web_url(self.target.api)}/{self.repository}/releases/download/{tag}/{name}"

    def tag_exists(self, tag: str) -> bool:
        """The repository has git tag `tag` (a release made by someone else, or a plain tag)."""
        try:
            self._call("read the tag", lambda: self._repo.get_git_ref(f"tags/{tag}").object)  # lazy: read now
        except _NotFound:
            return False
        return True

    def find(self, tag: str) -> ReleaseState | None:
        """The release (draft or published) with `tag`, or None."""
        raw = self._raw(tag)
        return None if raw is None else _state(raw)

    def draft(self, tag: str, title: str, body: str) -> ReleaseState:
        """A new draft release for `tag` (its git tag is made only when it is published)."""
        self._call(f"create the draft release {tag}",
                   lambda: self._repo.create_git_release(tag, title, body, draft=True, prerelease=False))
        found = self.find(tag)
        assert found is not None
        return found

    def delete(self, tag: str) -> None:
        """Delete the draft release `tag` (a half-made one of another set: never public)."""
        raw = self._raw(tag)
        if raw is not None:
            self._call(f"delete the draft release {tag}", raw.delete_release)

    def upload(self, tag: str, path: Path, name: str) -> bool:
        """Asset `name` of release `tag` from `path`: kept when GitHub holds it complete at the same size (False),
        else (re)uploaded (True)."""
        raw = self._raw(tag)
        if raw is None:
            raise UpstreamError(f"GitHub release {tag} of {self.repository} went away during the upload")
        size = path.stat().st_size
        for asset in raw.assets:
            if asset.name == name:
                if asset.state == "uploaded" and asset.size == size:
                    return False
                self._call(f"delete the incomplete asset {name} of {tag}", asset.delete_asset)
        self._call(f"upload {name} to release {tag}",
                   lambda: raw.upload_asset(str(path), name=name, content_type="application/octet-stream"))
        return True

    def publish(self, tag: str, body: str) -> ReleaseState:
        """Mark the draft `tag` published (its git tag is made now): the last step, after every asset."""
        raw = self._raw(tag)
        if raw is None:
            raise UpstreamError(f"GitHub release {tag} of {self.repository} went away before it was published")
        self._call(f"publish release {tag}", lambda: raw.update_release(raw.name or tag, body, draft=False))
        found = self.find(tag)
        assert found is not None
        return found

    def edit_notes(self, tag: str, body: str) -> ReleaseState:
        """The notes (body) of the published release `tag` replaced by `body` (a yank says so there)."""
        raw = self._raw(tag)
        if raw is None:
            raise UpstreamError(f"GitHub release {tag} of {self.repository} went away before its notes were edited")
        self._call(f"edit the notes of release {tag}", lambda: raw.update_release(raw.name or tag, body))
        found = self.find(tag)
        assert found is not None
        return found

    def _raw(self, tag: str) -> Any:
        releases = self._call("list the releases", lambda: list(self._repo.get_releases()))
        return next((r for r in releases if r.tag_name == tag), None)

    def _call(self, what: str, work: Callable[[], Any]) -> Any:
        # imported where used: PyGithub (~160 ms) only when GitHub is asked
        from github import GithubException

        if self._client is None:
            self._client = client(self.target)
            self._repo = self._client.get_repo(self.repository)
        try:
            return work()
        except GithubException as err:
            said = err.data.get("message") if isinstance(err.data, dict) else None
            if err.status == 404 and what == "read the tag":
                raise _NotFound from None
            hint = " (the token cannot write releases: it needs contents: write)" if err.status in (401, 403) else ""
            raise UpstreamError(scrub(f"GitHub could not {what} on {self.repository}: {err.status}"
                                      f"{f' {said}' if said else ''}{hint}", self.target)) from None
        except OSError as err:
            raise UpstreamError(scrub(f"GitHub could not be reached to {what} ({self.target.api}): {err}",
                                      self.target)) from None


class _NotFound(Exception):
    pass


def _state(raw: Any) -> ReleaseState:
    return ReleaseState(tag=raw.tag_name, draft=bool(raw.draft), url=raw.html_url, body=raw.body or "",
                        assets={a.name: a.size for a in raw.assets if a.state == "uploaded"})
