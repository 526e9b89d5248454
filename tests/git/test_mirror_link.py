"""A new mirror of an upstream on this disk gets as hard links the object files its first fetch would bring (as
`git clone --local` does, but only those), and the fetch only writes its refs: the mirror holds exactly the objects
a copied fetch gives it, never one the upstream's folder holds besides (kpatch/gitx/localobjects.py).

The repositories are real; each mirror is compared with one a plain `git fetch` made from the same upstream.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kpatch.gitx.localobjects import link_fetched
from kpatch.gitx.mirror import Mirror
from tests.support.gitrepos import git

REFSPEC = "+refs/heads/*:refs/remotes/upstream/*"


def _upstream(tmp_path: Path, *, packed: bool = False) -> Path:
    """A bare upstream with two branches and a tag; its objects loose (as `git clone` of a fresh repository leaves
    them) or in one pack."""
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    for n in range(3):
        (work / "file.txt").write_text(f"version {n}\n")
        git(work, "add", "file.txt")
        git(work, "commit", "-q", "-m", f"commit {n}", date=n)
    git(work, "tag", "-a", "-m", "a release", "v1")
    git(work, "switch", "-q", "-c", "side", "HEAD~1")
    (work / "side.txt").write_text("side\n")
    git(work, "add", "side.txt")
    git(work, "commit", "-q", "-m", "side", date=9)
    source = tmp_path / "upstream.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(source))
    if packed:
        git(source, "repack", "-q", "-a", "-d")
    return source


def _unreachable_blob(source: Path, text: str) -> str:
    """A blob written into `source` that no ref reaches (as a stack's own blob a person's clone may hold)."""
    return subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=source, input=text, capture_output=True,
                          text=True, check=True).stdout.strip()


def _objects(repo: Path) -> set[str]:
    listing = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    return set(listing.split())


def _fetched(source: Path, folder: Path) -> Path:
    """A mirror a plain `git fetch` made (what the linked one must equal)."""
    git(folder.parent, "init", "-q", "--bare", str(folder))
    git(folder, "fetch", "-q", "--tags", "--", str(source), REFSPEC)
    return folder


def _inodes(folder: Path) -> set[int]:
    return {p.stat().st_ino for p in folder.rglob("*") if p.is_file()}


def _refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(objectname) %(refname)", "refs/remotes/upstream/", "refs/tags/")


def test_a_new_mirror_of_a_local_upstream_shares_its_object_files_and_equals_a_fetched_one(tmp_path: Path) -> None:
    source = _upstream(tmp_path)
    mirror = Mirror(tmp_path / "cache" / "upstream.git", "upstream")
    mirror.fetch(str(source))
    assert _inodes(source / "objects") & _inodes(mirror.path / "objects"), "no object file is linked"
    plain = _fetched(source, tmp_path / "plain.git")
    assert _objects(mirror.path) == _objects(plain)
    assert _refs(mirror.path) == _refs(plain)
    assert git(mirror.path, "fsck", "--no-dangling") == ""


def test_a_packed_upstreams_pack_is_linked_with_its_index(tmp_path: Path) -> None:
    source = _upstream(tmp_path, packed=True)
    mirror = Mirror(tmp_path / "cache" / "upstream.git", "upstream")
    mirror.fetch(str(source))
    (pack,) = (source / "objects" / "pack").glob("pack-*.pack")
    assert (mirror.path / "objects" / "pack" / pack.name).stat().st_ino == pack.stat().st_ino
    assert _objects(mirror.path) == _objects(_fetched(source, tmp_path / "plain.git"))


def test_an_object_no_branch_or_tag_reaches_is_not_linked_into_the_mirror(tmp_path: Path) -> None:
    """`git clone --local` links every object file: a mirror made so held a blob no fetch gives it (the cold
    rebase's preimage test found the stack's own blobs already there)."""
    source = _upstream(tmp_path)
    stray = _unreachable_blob(source, "a stack's own blob\n")
    kept = git(source, "commit-tree", "-m", "kept under a ref no fetch takes", "main^{tree}")
    git(source, "update-ref", "refs/kpatch/private", kept)
    mirror = Mirror(tmp_path / "cache" / "upstream.git", "upstream")
    mirror.fetch(str(source))
    held = _objects(mirror.path)
    assert stray not in held and kept not in held
    assert held == _objects(_fetched(source, tmp_path / "plain.git"))


def test_a_pack_that_also_holds_unreachable_objects_is_not_linked_and_the_fetch_copies(tmp_path: Path) -> None:
    source = _upstream(tmp_path)
    stray = _unreachable_blob(source, "packed, reached by nothing\n")
    every = "".join(f"{oid}\n" for oid in _objects(source)).encode()  # one pack of every object, stray or not
    subprocess.run(["git", "pack-objects", "-q", "objects/pack/pack"], cwd=source, input=every, check=True,
                   capture_output=True)
    git(source, "prune-packed")
    (pack,) = (source / "objects" / "pack").glob("pack-*.pack")
    with pack.with_suffix(".idx").open("rb") as index:
        listing = subprocess.run(["git", "show-index"], cwd=source, stdin=index, capture_output=True, text=True,
                                 check=True).stdout
    assert stray in listing.split()  # the pack holds it
    mirror = Mirror(tmp_path / "cache" / "upstream.git", "upstream")
    mirror.fetch(str(source))
    assert not _inodes(source / "objects") & _inodes(mirror.path / "objects")
    held = _objects(mirror.path)
    assert stray not in held
    assert held == _objects(_fetched(source, tmp_path / "plain.git"))


def test_a_ref_the_upstream_hides_from_fetches_lends_the_mirror_nothing(tmp_path: Path) -> None:
    source = _upstream(tmp_path)
    hidden = git(source, "commit-tree", "-m", "hidden", "main^{tree}")
    git(source, "update-ref", "refs/heads/hidden", hidden)
    git(source, "config", "uploadpack.hideRefs", "refs/heads/hidden")
    mirror = Mirror(tmp_path / "cache" / "upstream.git", "upstream")
    mirror.fetch(str(source))
    assert hidden not in _objects(mirror.path)
    assert _objects(mirror.path) == _objects(_fetched(source, tmp_path / "plain.git"))


@pytest.mark.parametrize("planted", ["object file", "fan-out folder"])
def test_a_symlink_among_the_upstreams_objects_lends_the_mirror_nothing(tmp_path: Path, planted: str) -> None:
    """A loose object file, or the folder of two hex digits holding it, that is a symlink (the shape of
    CVE-2022-39253, which `git clone --local` refuses): nothing is linked, the fetch copies."""
    source = _upstream(tmp_path)
    blob = git(source, "rev-parse", "main:file.txt")
    loose = source / "objects" / blob[:2] / blob[2:]
    link = loose if planted == "object file" else loose.parent
    moved = tmp_path / "elsewhere"
    link.rename(moved)
    link.symlink_to(moved)
    target = tmp_path / "mirror.git"
    git(tmp_path, "init", "-q", "--bare", str(target))
    assert not link_fetched(str(source), target)
    assert not os.path.lexists(target / "objects" / blob[:2] / blob[2:])
