"""Versions of the wheels kpatch builds, parsed and composed with `packaging.version` only (PEP 440)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kpatch.gitx import Repository

_LABEL = re.compile(r"^[a-z0-9]+(\.[a-z0-9]+)*$")
FALLBACK = Version("0.0.0")  # an upstream with no tag, or a tag that is no version


@dataclass(frozen=True)
class UpstreamVersion:
    """The public version an upstream's commit gets, and the tag it came from (None: no usable tag)."""

    public: Version
    tag: str | None


def from_tag(tag: str | None, count: int) -> UpstreamVersion:
    """`count` commits after `tag`: v0.33.0 -> 0.33.0, +12 -> 0.33.0.post12, v0.11.0rc1 +3 -> 0.11.0rc1.post3.

    The count is added to the tag's own dev or post number when it has one (v1.0.dev3 +2 -> 1.0.dev5, so a
    commit after a dev release still sorts before the final release); the tag's local label is dropped
    because kpatch adds its own.
    """
    if tag is None:
        return UpstreamVersion(public=_bump(FALLBACK, count), tag=None)
    try:
        parsed = Version(tag.removeprefix("v").removeprefix("V"))
    except InvalidVersion:
        return UpstreamVersion(public=_bump(FALLBACK, count), tag=None)
    return UpstreamVersion(public=_bump(Version(parsed.public), count), tag=tag)


def _bump(version: Version, count: int) -> Version:
    if not count:
        return version
    text = version.base_version
    if version.pre is not None:
        text += "".join(str(part) for part in version.pre)
    if version.dev is not None:  # a dev release stays one: the count moves it on, not past the release
        post = f".post{version.post}" if version.post is not None else ""
        return Version(f"{text}{post}.dev{version.dev + count}")
    return Version(f"{text}.post{(version.post or 0) + count}")


def upstream_version(repo: Path, commit: str) -> UpstreamVersion:
    """The version of `commit` from its nearest tag (git describe)."""
    found = Repository(repo).describe(commit)
    return from_tag(found[0], found[1]) if found else from_tag(None, 0)


def label(key: str, required: list[str]) -> str:
    """A local version label: kpatch.<own key>, after the labels of the wheels it is built against.

    The kernels wheel gets `kpatch.<k>`, vLLM `kpatch.<k>.<v>`: the vLLM label names the whole pair, and a
    change to vLLM alone leaves the kernels wheel (and its version) as it was.
    """
    parts = [p.removeprefix("kpatch.") for p in required]
    return "kpatch." + ".".join([*parts, key[:12]])


def with_label(public: Version, local: str) -> Version:
    """`public+local`, checked to be a valid PEP 440 version."""
    if not _LABEL.match(local):
        raise ValueError(f"bad local version label {local!r}")
    return Version(f"{public.public}+{local}")


def exact(package: str, version: Version | str) -> str:
    """`name==version`, the pin kpatch writes for a wheel it built or a torch it was built against."""
    return f"{canonicalize_name(package)}=={Version(str(version))}"


def satisfies(seen: str, wanted: str) -> bool:
    """Whether version `seen` is the `wanted` one: `2.14.0+xpu` is `2.14.0`; `2.14.0+cpu` is not `2.14.0+xpu`."""
    try:
        return SpecifierSet(f"=={Version(wanted)}").contains(Version(seen), prereleases=True)
    except InvalidVersion:
        return False
