"""`[release] nightly = true`: a real green night on the example upstreams (--backend local) publishes its set on
the nightly channel, into a folder or as a GitHub release of the fake GitHub with its index on a bare repository."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpatch.wheels import lock as lockfile
from tests.support.fake_github import fake_github
from tests.support.fake_github_releases import releases_of
from tests.support.gitrepos import Project
from tests.support.nightly_world import REPO, World, make_world


@pytest.fixture
def world(project: Project, tmp_path: Path) -> Iterator[World]:
    with fake_github() as fake:
        yield make_world(project, tmp_path / "cache", fake)


def _configure(world: World, table: str) -> None:
    toml = world.root / "kpatch.toml"
    toml.write_text(toml.read_text() + f"\n[release]\n{table}")
    subprocess.run(["git", "-C", str(world.root), "commit", "--quiet", "-am", "Release the green nights"],
                   check=True)


def _notes(report: dict[str, object]) -> list[str]:
    return [n for n in report["notes"] if str(n).startswith("release: ")]  # type: ignore[attr-defined]


def test_a_green_night_publishes_its_set_on_the_nightly_channel_of_the_folder(world: World) -> None:
    _configure(world, 'nightly = true\nto = "site"\n')
    world.churn("kernels", 2)
    result, report = world.night("--backend", "local")
    assert result.exit_code == 0, result.output
    lock = lockfile.read(world.root / "dist" / "pylock.toml")
    app = next(w for w in lock.wheels if w.upstream == "app")
    tag = "nightly-" + app.version.replace("+", "-")
    (note,) = _notes(report)
    assert note.startswith(f"release: app {app.version} published as {tag} on the nightly channel")
    ledger = json.loads((world.root / "site" / "nightly" / "releases.json").read_text())
    assert [r["tag"] for r in ledger["releases"]] == [tag]
    for wheel in lock.wheels:
        assert (world.root / "site" / "nightly" / "files" / wheel.filename).read_bytes() == \
            (world.root / "dist" / wheel.filename).read_bytes()
        page = (world.root / "site" / "nightly" / "simple" / wheel.package / "index.html").read_text()
        assert f"{wheel.filename}#sha256={wheel.sha256}" in page
    assert (world.root / "site" / "nightly" / "releases" / tag / "pylock.toml").is_file()
    assert not (world.root / "site" / "stable").exists()


def test_a_green_night_with_to_github_publishes_a_release_and_pushes_the_index(world: World, tmp_path: Path) -> None:
    pages = tmp_path / "pages.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(pages)], check=True)
    _configure(world, f'nightly = true\nto = "github"\npages-remote = "{pages}"\n')
    world.churn("kernels", 2)
    result, report = world.night("--backend", "local")
    assert result.exit_code == 0, result.output
    lock = lockfile.read(world.root / "dist" / "pylock.toml")
    (made,) = releases_of(world.fake, REPO)
    assert not made.draft and made.tag.startswith("nightly-")
    assert sorted(a.name for a in made.assets if a.state == "uploaded") == sorted(
        [*(w.filename for w in lock.wheels), *(f"{w.filename}.metadata" for w in lock.wheels), "pylock.toml",
         "SHA256SUMS", "NOTES.md"])
    (note,) = _notes(report)
    assert f"published as {made.tag} on the nightly channel (https://github.example/{REPO}/releases/tag/" in note
    ledger = subprocess.run(["git", "--git-dir", str(pages), "show", "gh-pages:nightly/releases.json"],
                            capture_output=True, text=True, check=True).stdout
    assert [r["tag"] for r in json.loads(ledger)["releases"]] == [made.tag]


def test_a_dry_run_night_says_what_it_would_release_and_publishes_nothing(world: World) -> None:
    _configure(world, 'nightly = true\nto = "site"\n')
    world.churn("kernels", 2)
    result, report = world.night("--backend", "local", "--dry-run")
    assert result.exit_code == 0, result.output
    (note,) = _notes(report)
    assert note.startswith("release: would publish nightly-") and note.endswith("of site (--dry-run)")
    assert not (world.root / "site").exists()
