"""The fake GitHub's releases: drafts (seen only with write access), assets uploaded as raw bytes, a git tag made
when a release is published, and `cut_uploads_after(n)`: the n+1-th upload leaves a `starter` asset and answers
502 (an upload killed half way, as GitHub keeps it). A published release's complete assets are downloaded, by
anyone, at their browser_download_url, which answers 302 to the asset's bytes elsewhere on the server (as GitHub
sends its downloads to objects.githubusercontent.com); drafts and cut-off assets are 404 there."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.support.fake_github import Answer, FakeGitHub, Json, Repo, page

STAMP = "2026-11-30T00:00:00Z"


@dataclass
class Asset:
    id: int
    name: str
    data: bytes
    state: str = "uploaded"


@dataclass
class FakeRelease:
    id: int
    tag: str
    name: str
    body: str
    draft: bool
    assets: list[Asset] = field(default_factory=list)


@dataclass
class Releases:
    """Per repository: its releases and git tags; how many uploads may still finish (None: all)."""

    releases: dict[str, list[FakeRelease]] = field(default_factory=dict)
    tags: dict[str, set[str]] = field(default_factory=dict)
    uploads_left: int | None = None


def state(fake: FakeGitHub) -> Releases:
    if not hasattr(fake, "release_state"):
        fake.release_state = Releases()  # type: ignore[attr-defined]
    return fake.release_state  # type: ignore[attr-defined, no-any-return]


def cut_uploads_after(fake: FakeGitHub, count: int | None) -> None:
    state(fake).uploads_left = count


def add_tag(fake: FakeGitHub, full: str, tag: str) -> None:
    state(fake).tags.setdefault(full, set()).add(tag)


def releases_of(fake: FakeGitHub, full: str) -> list[FakeRelease]:
    return state(fake).releases.get(full, [])


def _full(repo: Repo) -> str:
    return f"{repo.owner}/{repo.name}"


def _asset_json(fake: FakeGitHub, repo: Repo, release: FakeRelease, asset: Asset) -> Json:
    return {"id": asset.id, "name": asset.name, "label": "", "state": asset.state, "size": len(asset.data),
            "content_type": "application/octet-stream", "download_count": 0, "created_at": STAMP,
            "updated_at": STAMP, "url": f"{fake.url}/repos/{_full(repo)}/releases/assets/{asset.id}",
            "browser_download_url": f"{fake.url}/{_full(repo)}/releases/download/{release.tag}/{asset.name}"}


def _release_json(fake: FakeGitHub, repo: Repo, release: FakeRelease) -> Json:
    base = f"{fake.url}/repos/{_full(repo)}/releases/{release.id}"
    return {"id": release.id, "tag_name": release.tag, "name": release.name, "body": release.body,
            "draft": release.draft, "prerelease": False, "target_commitish": "main", "created_at": STAMP,
            "published_at": None if release.draft else STAMP, "url": base,
            "html_url": f"https://github.example/{_full(repo)}/releases/tag/{release.tag}",
            "upload_url": f"{base}/assets{{?name,label}}", "tarball_url": None, "zipball_url": None,
            "author": {"login": "kpatch-bot", "id": 1, "type": "User"},
            "assets": [_asset_json(fake, repo, release, a) for a in release.assets]}


def _find(fake: FakeGitHub, repo: Repo, ident: str) -> FakeRelease:
    found = next((r for r in releases_of(fake, _full(repo)) if r.id == int(ident)), None)
    if found is None:
        raise Answer(404, "Not Found")
    return found


def list_releases(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json,
                  access: str = "write") -> tuple[int, Any, dict[str, str]]:
    rows = [_release_json(fake, repo, r) for r in reversed(releases_of(fake, _full(repo)))]
    return page(fake, f"/repos/{_full(repo)}/releases", query, rows)


def create_release(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json) -> Json:
    tag = str(body.get("tag_name", ""))
    if not tag or any(r.tag == tag for r in releases_of(fake, _full(repo))):
        raise Answer(422, "Validation Failed", [{"resource": "Release", "code": "already_exists",
                                                 "field": "tag_name"}])
    release = FakeRelease(fake._id(), tag, str(body.get("name") or tag), str(body.get("body") or ""),
                          bool(body.get("draft")))
    state(fake).releases.setdefault(_full(repo), []).append(release)
    if not release.draft:
        add_tag(fake, _full(repo), tag)
    return _release_json(fake, repo, release)


def get_release(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json, ident: str) -> Json:
    return _release_json(fake, repo, _find(fake, repo, ident))


def edit_release(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json, ident: str) -> Json:
    release = _find(fake, repo, ident)
    for key, attr in (("name", "name"), ("body", "body"), ("draft", "draft")):
        if key in body:
            setattr(release, attr, body[key])
    if not release.draft:
        add_tag(fake, _full(repo), release.tag)
    return _release_json(fake, repo, release)


def delete_release(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json,
                   ident: str) -> tuple[int, Any, dict[str, str]]:
    release = _find(fake, repo, ident)
    state(fake).releases[_full(repo)].remove(release)
    return 204, None, {}


def upload_asset(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json, ident: str) -> Json:
    release = _find(fake, repo, ident)
    name = query.get("name", "")
    if not name or any(a.name == name for a in release.assets):
        raise Answer(422, "Validation Failed", [{"resource": "ReleaseAsset", "code": "already_exists",
                                                 "field": "name"}])
    data = body.get("_bytes", b"")
    left = state(fake).uploads_left
    if left is not None and left <= 0:  # the upload is cut: GitHub keeps a `starter` asset with part of it
        release.assets.append(Asset(fake._id(), name, data[: len(data) // 2], state="starter"))
        raise Answer(502, "Server Error")
    if left is not None:
        state(fake).uploads_left = left - 1
    asset = Asset(fake._id(), name, data)
    release.assets.append(asset)
    return _asset_json(fake, repo, release, asset)


def delete_asset(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json,
                 aid: str) -> tuple[int, Any, dict[str, str]]:
    for release in releases_of(fake, _full(repo)):
        for asset in release.assets:
            if asset.id == int(aid):
                release.assets.remove(asset)
                return 204, None, {}
    raise Answer(404, "Not Found")


def get_tag_ref(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json, name: str) -> Json:
    if name not in state(fake).tags.get(_full(repo), set()):
        raise Answer(404, "Not Found")
    return {"ref": f"refs/tags/{name}", "url": f"{fake.url}/repos/{_full(repo)}/git/refs/tags/{name}",
            "object": {"type": "commit", "sha": "1" * 40}}


def download_asset(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json, tag: str,
                   name: str) -> tuple[int, Any, dict[str, str]]:
    release = next((r for r in releases_of(fake, _full(repo)) if r.tag == tag and not r.draft), None)
    asset = next((a for a in release.assets if a.name == name and a.state == "uploaded"), None) if release else None
    if asset is None:
        raise Answer(404, "Not Found")
    return 302, None, {"Location": f"{fake.url}/{_full(repo)}/releases/objects/{asset.id}"}


def asset_bytes(fake: FakeGitHub, repo: Repo, query: dict[str, str], body: Json,
                aid: str) -> tuple[int, Any, dict[str, str]]:
    for release in releases_of(fake, _full(repo)):
        for asset in release.assets:
            if asset.id == int(aid) and asset.state == "uploaded" and not release.draft:
                return 200, asset.data, {}
    raise Answer(404, "Not Found")


ROUTES = [
    ("GET", r"/repos/(?P<repo>[^/]+/[^/]+)/releases", "list_releases"),
    ("POST", r"/repos/(?P<repo>[^/]+/[^/]+)/releases", "create_release"),
    ("GET", r"/repos/(?P<repo>[^/]+/[^/]+)/releases/(?P<ident>\d+)", "get_release"),
    ("PATCH", r"/repos/(?P<repo>[^/]+/[^/]+)/releases/(?P<ident>\d+)", "edit_release"),
    ("DELETE", r"/repos/(?P<repo>[^/]+/[^/]+)/releases/(?P<ident>\d+)", "delete_release"),
    ("POST", r"/repos/(?P<repo>[^/]+/[^/]+)/releases/(?P<ident>\d+)/assets", "upload_asset"),
    ("DELETE", r"/repos/(?P<repo>[^/]+/[^/]+)/releases/assets/(?P<aid>\d+)", "delete_asset"),
    ("GET", r"/repos/(?P<repo>[^/]+/[^/]+)/git/refs?/tags/(?P<name>.+)", "get_tag_ref"),
    ("GET", r"/(?P<repo>[^/]+/[^/]+)/releases/download/(?P<tag>[^/]+)/(?P<name>[^/]+)", "download_asset"),
    ("GET", r"/(?P<repo>[^/]+/[^/]+)/releases/objects/(?P<aid>\d+)", "asset_bytes"),
]
