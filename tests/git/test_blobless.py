"""Blobless mirrors: a first fetch from a server that allows filters brings commits and trees only, and apply,
rebase (merged detection, the culprit, the 3-way conflict) and export fetch the blobs they need; a server that
does not allow filters gets one note and a full mirror; existing full mirrors stay full.

The servers are the upstreams' own repositories fetched through file:// URLs (git's upload-pack, which honours
the served repository's uploadpack.allowFilter), the same protocol as over ssh or https.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kpatch.errors import ExitCode
from tests.support.cli import run_kpatch
from tests.support.gitrepos import git, mirror_dir
from tests.support.https_git import https_git
from tests.support.rebase_repos import FILES, RebaseProject, replace_line


def serve(rp: RebaseProject, *, filters: bool) -> None:
    """kpatch.toml names the upstreams by file:// URL; their repositories allow filters or not."""
    toml = rp.root / "kpatch.toml"
    text = toml.read_text()
    for repo in (rp.kernels, rp.app):
        git(repo, "config", "uploadpack.allowFilter", "true" if filters else "false")
        text = text.replace(f'url = "{repo}"', f'url = "file://{repo}"')
    toml.write_text(text)
    os.environ["KPATCH_BLOBLESS"] = "1"  # opt-in (the conftest's isolation removes it after each test)


def mirror(rp: RebaseProject, name: str, cache: Path | None = None) -> Path:
    return mirror_dir(cache or rp.root.parent / "home" / ".cache" / "kpatch", name)


def promisor(repo: Path) -> bool:
    found = subprocess.run(["git", "config", "--bool", "remote.upstream.promisor"], cwd=repo, capture_output=True,
                           text=True, check=False)
    return found.stdout.strip() == "true"


def missing(repo: Path) -> int:
    """How many objects reachable from the mirror's refs it lacks (asked without fetching them)."""
    listing = git(repo, "rev-list", "--objects", "--missing=print", "--all")
    return sum(line.startswith("?") for line in listing.splitlines())


def resolve_c(rp: RebaseProject) -> None:
    tree = rp.root / "work" / ".rebase" / "kernels"
    (tree / "c.txt").write_text(replace_line(FILES["c"], 15, "c line 15 rewritten upstream, fixed by us"))
    git(tree, "add", "c.txt")


def test_rebase_on_a_blobless_mirror_finds_merged_patches_the_culprit_and_exports(rp: RebaseProject) -> None:
    serve(rp, filters=True)
    result = rp.run("rebase", "--json")
    assert result.exit_code == ExitCode.CONFLICT, result.output
    kernels = mirror(rp, "kernels")
    assert promisor(kernels) and git(kernels, "config", "remote.upstream.partialclonefilter") == "blob:none"
    assert missing(kernels) > 0  # the churn's blobs were never fetched: nothing read them
    assert "partial clone" not in result.stderr
    payload = json.loads(result.stdout)["result"]
    patches = payload["stacks"][0]["patches"]
    assert [p["class"] for p in patches] == ["upstream", "upstream", "conflict", "clean"]
    assert "same patch-id as upstream" in patches[0]["why"]
    assert patches[2]["culprit"]["sha"] == rp.culprit
    resolve_c(rp)
    done = rp.run("rebase", "--continue")
    assert done.exit_code == 0, done.output
    assert "fixed by us" in (rp.root / "patches" / "kernels" / "0003-Fix-c.patch").read_text()
    assert rp.run("apply").exit_code == 0
    assert rp.run("export", "--check").exit_code == 0
    assert promisor(kernels) and missing(kernels) > 0  # still blobless: nothing fetched the whole history


def test_a_server_without_filters_gives_one_note_and_a_full_mirror(rp: RebaseProject) -> None:
    serve(rp, filters=False)
    result = rp.run("apply")
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if "does not allow partial clones" in line]
    assert len(notes) == 2 and "kernels's mirror has the whole history" in "\n".join(notes)  # one per upstream
    for name in ("kernels", "app"):
        assert not promisor(mirror(rp, name)) and missing(mirror(rp, name)) == 0
    again = rp.run("rebase")  # a later fetch asks for no filter, says nothing about it
    assert again.exit_code == ExitCode.CONFLICT and "partial clones" not in again.stderr


def test_kpatch_blobless_0_and_a_local_path_make_full_mirrors_without_a_note(rp: RebaseProject,
                                                                             tmp_path: Path) -> None:
    serve(rp, filters=True)
    off = run_kpatch(rp.root, "apply", "--cache-dir", str(tmp_path / "off"), env={"KPATCH_BLOBLESS": "0"})
    assert off.exit_code == 0 and "partial" not in off.stderr
    off_mirror = mirror(rp, "kernels", tmp_path / "off")
    assert not promisor(off_mirror) and missing(off_mirror) == 0
    shutil.rmtree(rp.root / "work")  # the worktrees belong to the first cache's mirrors
    path = rp.run("apply", "--cache-dir", str(tmp_path / "path"), "--url", f"kernels={rp.kernels}")
    assert path.exit_code == 0, path.output
    assert "partial" not in path.stderr and not promisor(mirror(rp, "kernels", tmp_path / "path"))


def test_an_existing_full_mirror_stays_full(rp: RebaseProject) -> None:
    """A mirror an older kpatch (or KPATCH_BLOBLESS=0) made is never re-cloned or turned blobless."""
    serve(rp, filters=True)
    assert run_kpatch(rp.root, "apply", env={"KPATCH_BLOBLESS": "0"}).exit_code == 0
    kernels = mirror(rp, "kernels")
    packs = sorted(p.name for p in (kernels / "objects" / "pack").glob("*.pack"))
    assert rp.run("rebase").exit_code == ExitCode.CONFLICT  # fetches the moved upstreams (nothing new here)
    assert not promisor(kernels) and missing(kernels) == 0
    assert sorted(p.name for p in (kernels / "objects" / "pack").glob("*.pack"))[:len(packs)] == packs


def test_a_blobless_mirror_whose_server_is_gone_fails_with_one_line_naming_the_upstream(rp: RebaseProject,
                                                                                       tmp_path: Path) -> None:
    """Offline, the blobs a rebase needs cannot come: the error names the upstream, the URL and the way out
    (--url NAME=PATH of a full clone, which the next fetch makes the promisor remote); nothing changes."""
    serve(rp, filters=True)
    assert rp.run("apply").exit_code == 0
    moved = tmp_path / "moved-kernels"
    shutil.move(rp.kernels, moved)
    before = rp.tracked()
    result = rp.run("rebase", "--onto", f"kernels={rp.kernels_new}")
    assert result.exit_code == ExitCode.UPSTREAM, result.output
    error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "upstream kernels: cannot fetch" in error[0] and "--url kernels=PATH" in error[0]
    assert rp.tracked() == before
    back = rp.run("rebase", "--url", f"kernels={moved}")
    assert back.exit_code == ExitCode.CONFLICT, back.output
    assert git(mirror(rp, "kernels"), "config", "remote.upstream.url") == str(moved)


@pytest.mark.parametrize("value", ["1", "true", "on"])
def test_kpatch_blobless_is_off_unless_set(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from kpatch.gitx.mirror import blobless_wanted

    monkeypatch.delenv("KPATCH_BLOBLESS", raising=False)
    assert not blobless_wanted()
    monkeypatch.setenv("KPATCH_BLOBLESS", value)
    assert blobless_wanted()
    monkeypatch.setenv("KPATCH_BLOBLESS", "0")
    assert not blobless_wanted()


def test_a_first_blobless_fetch_over_dumb_http_makes_a_full_mirror_with_one_note(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git's dumb HTTP protocol advertises nothing: a filtered first fetch over it never ended (it marks the remote
    a promisor, and each object the dumb walker lacked started a lazy fetch from that remote, whose walker lacked
    one too). The server is asked first (its advertised capabilities); over dumb HTTP the mirror is a full one."""
    from kpatch.gitx import Mirror

    upstream = tmp_path / "upstream"
    subprocess.run(["git", "init", "-q", "--initial-branch=main", str(upstream)], check=True)
    for number in range(3):
        (upstream / f"f{number}.txt").write_text(f"{number}\n")
        git(upstream, "add", "-A")
        git(upstream, "commit", "-qm", f"commit {number}", date=number)
    monkeypatch.setenv("KPATCH_BLOBLESS", "1")
    with https_git({"up": upstream}, tmp_path / "server", "user", "secret") as server:
        monkeypatch.setenv("GIT_SSL_CAINFO", str(server.ca_file))
        found = Mirror(tmp_path / "mirror.git", "up")
        note = found.fetch(server.url.replace("https://", "https://user:secret@") + "/up.git")
    assert note is not None and "does not allow partial clones" in note and "up's mirror has the whole history" in note
    assert "secret" not in note and server.authorized
    assert not promisor(found.path) and missing(found.path) == 0
