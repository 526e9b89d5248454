"""The one record of a wheel of the set: what travels from the build to the cache, the lock, `verify`, `kpatch
test` and the nightly report. Where its file is, is the holder's business (the cache entry, the lock's folder)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Wheel:
    """One built wheel: whose, what it is, its file, and what it was built from and against."""

    upstream: str  # the upstream it was built from
    package: str  # its distribution name (normalized, PEP 503, once it has been through a lock)
    version: str
    filename: str  # its file name; the file sits in the cache entry or beside the lock
    sha256: str
    size: int
    torch: str | None = None  # the torch (version with local label) it was built against; None: none
    commit: str | None = None  # the patched upstream commit it was built from, where known
    requires: tuple[str, ...] = ()  # its Requires-Dist, where its METADATA was read

