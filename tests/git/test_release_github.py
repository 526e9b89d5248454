"""`kpatch release --to github`: the example's set as a release of the fake GitHub (drafted, its assets uploaded,
published last) and its index pushed to a local bare repository standing in for the project's gh-pages."""

from __future__ import annotations

import json
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from kpatch.wheels import lock as lockfile
from tests.git.test_release import Sets, build_sets
from tests.support.fake_github import FakeGitHub, fake_github
from tests.support.fake_github_releases import add_tag, cut_uploads_after, releases_of
from tests.support.json_envelope import checked

REPO = "kpatch/kimi-xpu"
TOKEN = "ghp_RELEASErelease0123456789RELEASErel"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, build_env: dict[str, str]) -> Iterator[Sets]:
    yield from build_sets(tmp_path_factory.mktemp("release-github"), build_env)


@dataclass(frozen=True)
class World:
    sets: Sets
    fake: FakeGitHub
    pages: Path  # the bare repository the index's branch is pushed to

    def release(self, *args: str) -> tuple[int, dict[str, object], str]:
        ran = self.sets.kpatch("release", "--to", "github", "--json", *args)
        data = checked(ran.stdout, "release") if ran.stdout.strip() else {}  # as the JSON Schema says
        return ran.exit_code, data.get("result") or data.get("error") or {}, ran.output

    def show(self, path: str) -> str:
        return subprocess.run(["git", "--git-dir", str(self.pages), "show", f"gh-pages:{path}"], capture_output=True,
                              text=True, check=True).stdout

    def branch(self) -> str | None:
        ran = subprocess.run(["git", "--git-dir", str(self.pages), "rev-parse", "--verify", "--quiet",
                              "refs/heads/gh-pages"], capture_output=True, text=True, check=False)
        return ran.stdout.strip() or None


@pytest.fixture
def world(built: Sets, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    pages = tmp_path / "pages.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(pages)], check=True)
    toml = built.root / "kpatch.toml"
    text = toml.read_text()
    toml.write_text(text + f'\n[release]\npages-remote = "{pages}"\n')
    try:
        with fake_github() as fake:
            fake.repo(REPO)
            fake.grant(TOKEN, "write")
            monkeypatch.setenv("KPATCH_GITHUB_API", fake.url)
            monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
            monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
            yield World(built, fake, pages)
    finally:
        toml.write_text(text)


def _assets(world: World) -> dict[str, bytes]:
    (release,) = releases_of(world.fake, REPO)
    assert all(a.state == "uploaded" for a in release.assets)
    return {a.name: a.data for a in release.assets}


def test_release_to_github_uploads_every_asset_publishes_last_and_pushes_the_index(world: World) -> None:
    lock = lockfile.read(world.sets.first / "pylock.toml")
    code, result, output = world.release("--tag", "g1")
    assert code == 0, output
    (made,) = releases_of(world.fake, REPO)
    assert (made.tag, made.draft) == ("g1", False)
    assets = _assets(world)
    assert sorted(assets) == sorted([*(w.filename for w in lock.wheels),
                                     *(f"{w.filename}.metadata" for w in lock.wheels),
                                     "pylock.toml", "SHA256SUMS", "NOTES.md"])
    for wheel in lock.wheels:
        assert assets[wheel.filename] == (world.sets.first / wheel.filename).read_bytes()
    assert b"uv pip install -r" in assets["NOTES.md"] and "uv pip install -r" in made.body
    # the release is published only after its last asset: draft first, publish last
    writes = [(r.method, r.path, r.body) for r in world.fake.writes()]
    uploads = [i for i, (m, path, _) in enumerate(writes) if m == "POST" and path.endswith("/assets")]
    published = [i for i, (m, _, body) in enumerate(writes) if m == "PATCH" and body.get("draft") is False]
    assert writes[0][0] == "POST" and writes[0][2]["draft"] is True
    assert len(uploads) == len(assets) and published == [len(writes) - 1] and max(uploads) < published[0]
    # the index on gh-pages: links to the release's assets with their sha256, no wheel in the tree
    download = f"{world.fake.url}/{REPO}/releases/download/g1"
    for wheel in lock.wheels:
        page = world.show(f"stable/simple/{wheel.package}/index.html")
        assert f'href="{download}/{wheel.filename}#sha256={wheel.sha256}"' in page
    tree = subprocess.run(["git", "--git-dir", str(world.pages), "ls-tree", "-r", "--name-only", "gh-pages"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert not [name for name in tree if name.endswith(".whl")] and ".nojekyll" in tree
    data = tomllib.loads(world.show("stable/releases/g1/pylock.toml"))
    assert [w["url"] for p in data["packages"] for w in p["wheels"]] == [
        f"{download}/{w.filename}" for w in lock.wheels]
    assert result["github"] == "https://github.example/kpatch/kimi-xpu/releases/tag/g1"
    assert result["index_url"] == "https://kpatch.github.io/kimi-xpu/stable/simple"
    assert TOKEN not in output


def test_a_killed_upload_leaves_a_draft_that_the_next_run_finishes(world: World) -> None:
    cut_uploads_after(world.fake, 2)  # the third upload is cut half way
    code, error, output = world.release("--tag", "g2")
    assert code == ExitCode.UPSTREAM, output
    (draft,) = releases_of(world.fake, REPO)
    assert draft.draft and [a.state for a in draft.assets] == ["uploaded", "uploaded", "starter"]
    assert world.branch() is None  # nothing of an unfinished release reaches the index
    assert "upload" in str(error["message"]) and "g2" in str(error["message"])
    cut_uploads_after(world.fake, None)
    code, result, output = world.release("--tag", "g2")
    assert code == 0, output
    (done,) = releases_of(world.fake, REPO)
    assert done.id == draft.id and not done.draft
    assert result["resumed"] is True and len(result["uploaded"]) == len(done.assets) - 2  # type: ignore[arg-type]
    lock = lockfile.read(world.sets.first / "pylock.toml")
    assets = _assets(world)
    assert len(assets) == 2 * len(lock.wheels) + 3
    for wheel in lock.wheels:
        assert assets[wheel.filename] == (world.sets.first / wheel.filename).read_bytes()
    assert world.branch() is not None and "g2" in world.show("stable/releases.json")


def test_a_tag_on_github_is_refused_naming_it_and_nothing_is_written(world: World) -> None:
    add_tag(world.fake, REPO, "v-taken")
    code, error, output = world.release("--tag", "v-taken")
    assert code == ExitCode.BAD_INPUT, output
    assert str(error["message"]).startswith(f"tag v-taken already exists in {REPO}")
    assert releases_of(world.fake, REPO) == [] and world.branch() is None
    assert world.release("--tag", "g3")[0] == 0
    pushed = world.branch()
    code, error, output = world.release("--tag", "g3", "--lock", str(world.sets.second / "pylock.toml"))
    assert code == ExitCode.BAD_INPUT, output
    assert str(error["message"]).startswith("tag g3 is already released on GitHub "
                                            "(https://github.example/kpatch/kimi-xpu/releases/tag/g3)")
    assert len(releases_of(world.fake, REPO)) == 1 and world.branch() == pushed


def test_a_release_published_before_its_index_was_pushed_gets_its_index_on_the_next_run(world: World) -> None:
    hook = world.pages / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'pages are closed today' >&2\nexit 1\n")
    hook.chmod(0o755)
    code, error, output = world.release("--tag", "g4")
    assert code == ExitCode.UPSTREAM, output
    assert "the index was not pushed to branch gh-pages" in str(error["message"])
    (made,) = releases_of(world.fake, REPO)
    assert not made.draft and world.branch() is None  # the release is whole; its index is not there yet
    hook.unlink()
    uploads = len([r for r in world.fake.writes() if r.path.endswith("/assets")])
    code, result, output = world.release("--tag", "g4")
    assert code == 0, output
    assert result["resumed"] is True and result["uploaded"] == []
    assert len([r for r in world.fake.writes() if r.path.endswith("/assets")]) == uploads  # nothing sent again
    assert [r["tag"] for r in json.loads(world.show("stable/releases.json"))["releases"]] == ["g4"]
