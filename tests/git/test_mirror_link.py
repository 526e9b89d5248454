"""A new mirror of an upstream on this disk gets the upstream's object files as hard links (as `git clone --local`
does) and the fetch only writes its refs: the same refs and objects as a copied fetch, links never followed."""

from __future__ import annotations

import os
from pathlib import Path

from kpatch.gitx.mirror import Mirror, link_objects
from tests.support.gitrepos import Project, git


def _objects(repo: Path) -> Path:
    return repo / "objects" if (repo / "HEAD").is_file() else repo / ".git" / "objects"


def _inodes(folder: Path) -> set[int]:
    return {p.stat().st_ino for p in folder.rglob("*") if p.is_file() and "info" not in p.parts}


def test_a_new_mirror_of_a_local_upstream_shares_its_object_files_and_has_the_same_refs(project: Project,
                                                                                      tmp_path: Path) -> None:
    source = project.kernels
    mirror = Mirror(tmp_path / "mirrors" / "kernels.git", "kernels")
    mirror.fetch(str(source))
    shared = _inodes(_objects(source)) & _inodes(mirror.path / "objects")
    assert shared  # hard links, not copies
    theirs = git(source, "for-each-ref", "--format=%(objectname) %(refname:lstrip=2)", "refs/heads/").splitlines()
    ours = git(mirror.path, "for-each-ref", "--format=%(objectname) %(refname:lstrip=3)",
               "refs/remotes/upstream/").splitlines()
    assert ours == theirs
    assert git(mirror.path, "fsck", "--connectivity-only", "--no-dangling") == ""


def test_a_symlink_among_the_upstreams_objects_is_not_linked(tmp_path: Path) -> None:
    source = tmp_path / "up"
    git(tmp_path, "init", "-q", "--bare", str(source))
    outside = tmp_path / "secret"
    outside.write_text("not an object\n")
    (source / "objects" / "ab").mkdir()
    (source / "objects" / "ab" / ("c" * 38)).symlink_to(outside)
    (source / "objects" / "pack" / "pack-1.pack").symlink_to(outside)
    (source / "objects" / "pack" / "pack-1.idx").write_text("x")
    target = tmp_path / "mirror" / "objects"
    target.mkdir(parents=True)
    link_objects(source, target)
    assert not os.path.lexists(target / "ab" / ("c" * 38))
    assert not os.path.lexists(target / "pack" / "pack-1.pack")
