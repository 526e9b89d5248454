"""The one record of a wheel of the set: what travels from the build to the cache, the lock, `verify`, `kpatch
test` and the nightly report. Where its file is, is the holder's business (the cache entry, the lock's folder)."""

from __future__ import annotations

from dataclasses import dataclass

from kpatch.wheels.compiler_cache import CacheStats


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



@dataclass(frozen=True)
class BuiltWheel:
    """A wheel of the set as one build made it: what `build-wheels --json` shows and the nightly's report carries.

    Apart from `Wheel` because it says what the build did (from the cache or built, the compiler cache's hits)
    and keeps the shape `build-wheels --json` has always had; `Wheel` is what the lock and the cache hold."""

    upstream: str
    filename: str
    version: str
    sha256: str
    cached: bool  # reused from the cache: no container was started for it
    torch: str | None  # the torch it was built against (None: none)
    compiler_cache: CacheStats | None = None  # hits and misses of its build's compiler cache (None: none ran)

    @classmethod
    def of(cls, wheel: Wheel, *, cached: bool, compiler_cache: CacheStats | None) -> BuiltWheel:
        return cls(upstream=wheel.upstream, filename=wheel.filename, version=wheel.version, sha256=wheel.sha256,
                   cached=cached, torch=wheel.torch, compiler_cache=compiler_cache)
