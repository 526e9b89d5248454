"""`kpatch release --to github`: the example's set as a release of the fake GitHub (drafted, its assets uploaded,
published last) and its index pushed to a local bare repository standing in for the project's gh-pages; the
pushed tree served on 127.0.0.1 and installed by real pip, its links downloading the release's assets from the
fake; and `--yank` on that branch."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from kpatch.wheels import lock as lockfile
from tests.git.test_release import (
    LINE,
    Quiet,
    Sets,
    build_sets,
    installed,
    installs_as_printed,
    line_declared,
    pip_into,
    versions,
)
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

    def serve(self, site: Path) -> None:
        """The pushed gh-pages tree, as GitHub Pages would serve it, into the served folder `site`."""
        tree = subprocess.run(["git", "--git-dir", str(self.pages), "archive", "gh-pages"], capture_output=True,
                              check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(site)], input=tree, check=True)

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


@pytest.fixture
def pages_site(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A folder served over HTTP on 127.0.0.1 (GitHub Pages' stand-in), and its URL."""
    folder = tmp_path / "site"
    folder.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


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
    assert ".kpatch-release.lock" not in tree  # the writer's lock of the scratch checkout stays out
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


def test_pip_and_uv_install_the_github_release_from_the_pushed_index_and_verify_installed_passes(
        world: World, pages_site: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site, url = pages_site
    lock = lockfile.read(world.sets.first / "pylock.toml")
    code, result, output = world.release("--tag", "g5", "--base-url", url)
    assert code == 0, output
    assert result["pip_command"] == f"pip install --index-url {url}/stable/simple 'app=={lock.wheels[-1].version}'"
    assert result["uv_command"] == f"uv pip install -r {url}/stable/releases/g5/pylock.toml"
    world.serve(site)
    # as the local path's release is checked: real pip and real uv with the printed commands, verify --installed
    installs_as_printed(world.sets, result, tmp_path, monkeypatch)
    # the wheels came from the release's assets on GitHub (the index's and the lock's links), through its 302 to
    # their bytes: once for pip, once for uv
    fetched = [r.path.rsplit("/", 1)[-1] for r in world.fake.requests if "/releases/download/g5/" in r.path]
    assert all(fetched.count(w.filename) >= 2 for w in lock.wheels), fetched


def test_release_to_github_in_kpatch_toml_is_the_default_without_to(world: World) -> None:
    toml = world.sets.root / "kpatch.toml"
    toml.write_text(toml.read_text().replace("[release]\n", '[release]\nto = "github"\n'))
    ran = world.sets.kpatch("release", "--json", "--tag", "g8")
    assert ran.exit_code == 0, ran.output
    (made,) = releases_of(world.fake, REPO)
    assert (made.tag, made.draft) == ("g8", False)
    assert "g8" in world.show("stable/releases.json")


def test_yank_on_github_marks_the_release_yanked_in_the_pushed_index_and_says_so_in_its_notes(
        world: World, pages_site: tuple[Path, str]) -> None:
    site, url = pages_site
    assert world.release("--tag", "y1", "--base-url", url)[0] == 0
    code, second, output = world.release("--tag", "y2", "--base-url", url, "--lock",
                                         str(world.sets.second / "pylock.toml"))
    assert code == 0, output
    before = world.branch()
    first = lockfile.read(world.sets.first / "pylock.toml")
    bodies = {r.tag: r.body for r in releases_of(world.fake, REPO)}
    code, result, output = world.release("--yank", "y1", "--why", "breaks the fp8 KV cache", "--base-url", url)
    assert code == 0, output
    assert result["yanked"] == "breaks the fp8 KV cache" and result["tag"] == "y1"
    assert result["pages_written"] == ["simple/app/index.html", "simple/app/index.json"]  # the kernels: y2 holds them
    after = world.branch()
    parent = subprocess.run(["git", "--git-dir", str(world.pages), "rev-parse", f"{after}^"], capture_output=True,
                            text=True, check=True).stdout.strip()
    assert after != before and parent == before and str(result["pages"]).startswith(str(after)[:12])
    app = first.wheels[-1]
    page = world.show("stable/simple/app/index.html")
    (link,) = [line for line in page.splitlines() if f"/y1/{app.filename}#sha256={app.sha256}" in line]
    assert 'data-yanked="y1: breaks the fp8 KV cache"' in link
    assert page.count("data-yanked") == 1  # y2's app is not yanked
    assert "data-yanked" not in world.show("stable/simple/vllm-xpu-kernels/index.html")
    ledger = json.loads(world.show("stable/releases.json"))["releases"]
    assert [(r["tag"], r["yanked"]) for r in ledger] == [("y1", "breaks the fp8 KV cache"), ("y2", None)]
    # GitHub's release stays, every asset with it; its notes now start by saying it is yanked
    made = {r.tag: r for r in releases_of(world.fake, REPO)}
    assert made["y1"].body == "> **Yanked** (stable channel): breaks the fp8 KV cache\n\n" + bodies["y1"]
    assert made["y2"].body == bodies["y2"] and len(made["y1"].assets) == 2 * len(first.wheels) + 3
    assert result["github"] == "https://github.example/kpatch/kimi-xpu/releases/tag/y1"
    # pip, reading the pushed index, no longer offers the yanked version
    world.serve(site)
    assert versions(f"{url}/stable/simple", "app") == f"Available versions: {second['version']}"
    # a yank is for ever: a second one is refused and pushes nothing
    code, error, output = world.release("--yank", "y1", "--why", "again")
    assert code == ExitCode.BAD_INPUT and "already yanked" in str(error["message"]), output
    assert world.branch() == after
    tree = subprocess.run(["git", "--git-dir", str(world.pages), "ls-tree", "-r", "--name-only", "gh-pages"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert ".kpatch-release.lock" not in tree


def test_yank_on_github_of_a_tag_the_index_does_not_list_is_refused_naming_it(world: World) -> None:
    assert world.release("--tag", "z1")[0] == 0
    pushed, writes = world.branch(), len(world.fake.writes())
    code, error, output = world.release("--yank", "z9", "--why", "never made")
    assert code == ExitCode.BAD_INPUT, output
    assert error["message"] == (f"no release 'z9' on channel stable in the index on branch gh-pages of "
                                f"{world.pages} (released: z1)")
    assert world.branch() == pushed and len(world.fake.writes()) == writes


def test_a_release_line_on_github_has_its_own_index_folder_title_and_yank_and_pip_gets_only_its_set(
        world: World, pages_site: tuple[Path, str], tmp_path: Path) -> None:
    """`--line 0.9 --to github`: the line's channel is 0.9/stable/ on gh-pages, beside main's stable/; the GitHub
    release's title names the line, its yank note too, and pip on each index gets that line's set only."""
    site, url = pages_site
    assert world.release("--tag", "m1", "--base-url", url)[0] == 0
    with line_declared(world.sets):
        code, line, output = world.release("--line", LINE, "--tag", "l1", "--base-url", url, "--lock",
                                           str(world.sets.second / "pylock.toml"))
        assert code == 0, output
        code, yanked, output = world.release("--line", LINE, "--yank", "l1", "--why", "breaks the 0.9 sampler",
                                             "--base-url", url)
        assert code == 0, output
    assert line["line"] == LINE and line["index_url"] == f"{url}/{LINE}/stable/simple"
    assert line["folder"] == f"{LINE}/stable/releases/l1"
    assert [r["tag"] for r in json.loads(world.show("stable/releases.json"))["releases"]] == ["m1"]
    assert [(r["tag"], r["yanked"]) for r in json.loads(world.show(f"{LINE}/stable/releases.json"))["releases"]] \
        == [("l1", "breaks the 0.9 sampler")]
    made = {r.tag: r for r in releases_of(world.fake, REPO)}
    assert made["l1"].name == f"app {line['version']} (line {LINE})" and "(line" not in made["m1"].name
    assert made["l1"].body.startswith(f"> **Yanked** (stable channel of line {LINE}): breaks the 0.9 sampler\n\n"
                                      f"# app {line['version']} (line {LINE}, stable, l1)")
    assert yanked["line"] == LINE and yanked["folder"] == f"{LINE}/stable/releases/l1"
    world.serve(site)
    # pip pinned to the yanked version still installs it from the line's index (its assets on GitHub), and main's
    # index does not know it
    target = tmp_path / "line"
    assert pip_into(target, str(line["pip_command"])).returncode == 0
    assert installed(target)["app"] == line["version"]
    assert line["version"] not in versions(f"{url}/stable/simple", "app")
