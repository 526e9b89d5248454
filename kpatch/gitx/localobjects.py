"""A new mirror of a repository on this disk gets the object files its first fetch would bring as hard links, as
`git clone --local` does, so that the fetch only writes refs.

A fetch from a local path packs the whole history in the source (`git pack-objects`: every loose object compressed
again, deltas searched) and indexes the pack again in the mirror: for openssh's 889 loose objects, 0.7-0.9 s of a
quilt import's 2.5 s. With the object files already in the mirror, git's quickfetch finds every wanted commit there,
checks that it is connected and writes the refs (0.03 s).

`git clone --local` links every object file of the source, reachable or not; a mirror would then hold objects no
fetch gives it (a stack's own blobs a person's upstream clone happens to hold, say, which later code must not find
there). So only the objects the fetch would bring are linked: those reachable from the refs the source advertises
for the fetch's refspecs (branches and tags, as `git ls-remote` lists them: hidden refs are not listed), listed by
one `git rev-list --objects` in the source. A loose object is linked when it is one of them; a pack (with its index)
only when every object it holds is one of them. When some wanted object is in neither (an alternate's, a pack that
also holds others, a partial clone's promise), nothing is linked and the fetch copies as before: a fetch into a
mirror with no refs sends the whole history whatever the mirror already holds, so a part linked would save nothing.
Anything unusual (a shallow source, grafts, a symlinked object file, another file system, another hash, git
refusing the folder) likewise leaves the fetch to do it all. Either way the mirror ends with the same objects.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from kpatch.gitx.runner import run

log = logging.getLogger("kpatch.git")

_OID = re.compile(r"^[0-9a-f]{40}$")
_IDX_V2 = b"\377tOc\0\0\0\2"
# Past this many loose objects the mirror's `git maintenance run --auto` (gc.auto's 6700) would repack them in the
# background after the fetch: a fetch's one pack instead.
LOOSE_MAX = 6000


def link_fetched(url: str, mirror: Path, refspecs: Iterable[str] = ("refs/heads/", "refs/tags/")) -> bool:
    """Hard-link into the new (empty) bare repository `mirror` the object files of the repository at the absolute
    path `url` that a fetch of its branches and tags would bring; True when every one of them was linked."""
    source = _git_dir(Path(url))
    if source is None:
        return False
    objects = mirror / "objects"
    tips = _advertised(url, mirror, tuple(refspecs))
    if not tips:
        return False
    wanted = _reachable(source, tips)
    if wanted is None:
        return False
    files = _files(source / "objects", wanted)
    if files is None:
        return False
    made: set[str] = set()  # the fan-out folders made so far
    try:
        for name in files:
            folder = name.partition("/")[0]
            if folder not in made:
                (objects / folder).mkdir(exist_ok=True)
                made.add(folder)
            _link(f"{source}/objects/{name}", f"{objects}/{name}")  # strings: 900 Paths cost 0.05 s
    except OSError as err:  # another file system, no permission, a file gone: the fetch copies what is missing
        log.debug("objects of %s not linked: %s", url, err)
        return False
    return True


def _git_dir(path: Path) -> Path | None:
    """The git folder a fetch from `path` reads (where its objects are), without a process; None for anything but
    a plain repository: a bare one, or a worktree's `.git` folder (a linked worktree, a `.git` file, is left to
    the fetch) with no shallow history, grafts or alternates."""
    dot_git = path / ".git"
    if dot_git.is_dir() and not dot_git.is_symlink():
        folder = dot_git
    elif not dot_git.exists() and (path / "HEAD").is_file() and (path / "objects").is_dir():
        folder = path
    else:
        return None
    objects = folder / "objects"
    if objects.is_symlink() or not objects.is_dir() or (folder / "commondir").exists() or \
            (folder / "shallow").exists() or (folder / "info" / "grafts").exists() or \
            (objects / "info" / "alternates").exists() or (objects / "info" / "http-alternates").exists():
        return None
    return folder


def _advertised(url: str, mirror: Path, prefixes: tuple[str, ...]) -> list[str]:
    """The objects the refs under `prefixes` name, as the source advertises them to a fetch into `mirror`
    (`git ls-remote` there, with the fetch's config: refs the source hides are not there)."""
    done = run(["ls-remote", "--", url], mirror, user_config=True, check=False)
    if done.status != 0:
        return []
    tips = []
    for line in done.text.splitlines():
        oid, _, ref = line.partition("\t")
        if ref.startswith(prefixes) and not ref.endswith("^{}") and _OID.match(oid):
            tips.append(oid)
    return sorted(set(tips))


def _reachable(source: Path, tips: list[str]) -> set[str] | None:
    """Every object reachable from `tips` in `source` (replace refs ignored, as upload-pack does); None when git
    cannot list them all (one missing: a partial clone's, a broken repository)."""
    done = run(["--git-dir", str(source), "--no-replace-objects", "rev-list", "--objects", "--no-object-names",
                "--missing=print", "--stdin"], source, stdin="".join(f"{tip}\n" for tip in tips).encode(),
               check=False)
    if done.status != 0:
        return None
    listed = done.text.split()
    if any(not _OID.match(oid) for oid in listed):  # "?<oid>": missing
        return None
    return set(listed)


def _files(objects: Path, wanted: set[str]) -> list[str] | None:
    """The object files (relative to `objects`) that hold exactly `wanted`: its loose objects, then packs (each with
    its index) holding nothing else; None when some wanted object is in neither, or there are too many loose."""
    files: list[str] = []
    left = set()
    fanout: dict[str, bool] = {}  # a fan-out folder that is a symlink (CVE-2022-39253's shape) lends nothing
    for oid in wanted:
        name = f"{oid[:2]}/{oid[2:]}"
        if oid[:2] not in fanout:
            fanout[oid[:2]] = _folder(f"{objects}/{oid[:2]}")
        if fanout[oid[:2]] and _regular(f"{objects}/{name}"):
            files.append(name)
        else:
            left.add(oid)
    if len(files) > LOOSE_MAX:
        return None
    packs = objects / "pack"
    if left and packs.is_dir() and not packs.is_symlink():
        for index in sorted(packs.glob("pack-*.idx")):
            pack = index.with_suffix(".pack")
            if not (_regular(index) and _regular(pack)) or index.with_suffix(".promisor").exists():
                continue
            held = _pack_objects(index)
            if held is None or not held <= wanted:
                continue  # it holds objects the fetch would not bring (or git's old index format)
            files += [f"pack/{pack.name}", f"pack/{index.name}"]
            left -= held
    return None if left else files


def _pack_objects(index: Path) -> set[str] | None:
    """The objects a pack's index (version 2, SHA-1) lists; None for any other."""
    try:
        data = index.read_bytes()
    except OSError:
        return None
    if len(data) < 8 + 256 * 4 or not data.startswith(_IDX_V2):
        return None
    count = int.from_bytes(data[8 + 255 * 4:8 + 256 * 4], "big")
    start = 8 + 256 * 4
    # the table of names, the CRCs, the offsets, the two trailing hashes: a SHA-1 index's size
    if len(data) < start + count * 28 + 40:
        return None
    return {data[at:at + 20].hex() for at in range(start, start + count * 20, 20)}


def _folder(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _regular(path: str | Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _link(source: str, target: str) -> None:
    """`target` a new hard link of the regular file `source` (never of a symlink put there since it was looked at:
    one is removed again, and the linking stops)."""
    with contextlib.suppress(FileExistsError):
        os.link(source, target, follow_symlinks=False)
    if not _regular(target):
        Path(target).unlink()
        raise OSError(f"{source} is no longer a regular file")
