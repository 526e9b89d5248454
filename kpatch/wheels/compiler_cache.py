"""The compiler cache of container builds (sccache): where it is kept, what reaches the build, what it reports.

By default the cache lives on a named volume of the Docker engine (`kpatch-sccache`), so it outlives every build
container and works the same on a remote engine (DOCKER_HOST=ssh://...): the volume is on the engine's host.
Configured from the environment kpatch runs in, like sccache itself:

  KPATCH_SCCACHE=0              no compiler cache (sccache stays off PATH in the build)
  KPATCH_SCCACHE_VOLUME=NAME    another volume (one per project or per runner pool, say)
  SCCACHE_*                     passed to the build as they are: sccache's remote storage, e.g. SCCACHE_BUCKET and
                                SCCACHE_ENDPOINT (S3 or S3-compatible), SCCACHE_REDIS_ENDPOINT (Redis),
                                SCCACHE_GHA_ENABLED (GitHub Actions cache); sccache then uses it instead of the volume
  AWS_*, ACTIONS_* credentials  passed only with the remote that reads them (AWS_* with SCCACHE_BUCKET, ACTIONS_*
                                with SCCACHE_GHA_ENABLED: the names in CREDENTIALS), never otherwise, and kept
                                out of everything kpatch prints or logs; no other variable of kpatch's reaches a build

The cache never changes what is built: a hit returns the object file the same compile wrote, and nothing of this
goes into a wheel's cache key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kpatch.output.redact import add_secret

DEFAULT_VOLUME = "kpatch-sccache"
MOUNT = "/home/kpatch/.cache/sccache"  # made by the build image, owned by the build user (a new volume copies it)
# The credentials each remote cache reads, passed only when that cache is configured (its key is set).
CREDENTIALS = {
    "SCCACHE_BUCKET": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                       "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_PROFILE"),
    "SCCACHE_GHA_ENABLED": ("ACTIONS_CACHE_URL", "ACTIONS_RESULTS_URL", "ACTIONS_RUNTIME_TOKEN",
                            "ACTIONS_CACHE_SERVICE_V2"),
}
_SECRET_NAMES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "ACTIONS_RUNTIME_TOKEN", "SCCACHE_REDIS_PASSWORD")
_REMOTES = (("SCCACHE_BUCKET", "S3 bucket"), ("SCCACHE_REDIS_ENDPOINT", "Redis"), ("SCCACHE_REDIS", "Redis"),
            ("SCCACHE_REDIS_CLUSTER_ENDPOINTS", "Redis cluster"), ("SCCACHE_GHA_ENABLED", "GitHub Actions cache"),
            ("SCCACHE_GCS_BUCKET", "GCS bucket"), ("SCCACHE_AZURE_CONNECTION_STRING", "Azure blob storage"),
            ("SCCACHE_MEMCACHED_ENDPOINT", "memcached"), ("SCCACHE_WEBDAV_ENDPOINT", "WebDAV"))


@dataclass(frozen=True)
class CacheConfig:
    """What the build containers get: the volume to mount (or none) and the environment for sccache."""

    volume: str | None
    env: dict[str, str]
    where: str  # for people: "volume kpatch-sccache", "S3 bucket (SCCACHE_BUCKET)"...

    @property
    def enabled(self) -> bool:
        return bool(self.env)


@dataclass(frozen=True)
class CacheStats:
    """What the compiler cache did during one build (sccache's own counts)."""

    tool: str
    hits: int
    misses: int
    not_cached: int  # compiles sccache could not cache (e.g. options it does not support)
    errors: int
    location: str


OFF = CacheConfig(volume=None, env={}, where="off")


def from_environment(environ: Mapping[str, str]) -> CacheConfig:
    """The compiler cache the environment asks for (module docstring); the volume by default."""
    if environ.get("KPATCH_SCCACHE", "1").strip().lower() in ("0", "off", "false", "no"):
        return OFF
    volume = environ.get("KPATCH_SCCACHE_VOLUME", "").strip() or DEFAULT_VOLUME
    passed = {k: v for k, v in environ.items() if k.startswith("SCCACHE_") and k != "SCCACHE_DIR"}
    for key, names in CREDENTIALS.items():
        if passed.get(key, "").strip():
            passed |= {k: environ[k] for k in names if k in environ}
    for name in _SECRET_NAMES:
        add_secret(passed.get(name))
    remote = next((f"{label} ({key})" for key, label in _REMOTES if passed.get(key)), None)
    env = {**passed, "KPATCH_SCCACHE": "1", "SCCACHE_DIR": MOUNT}
    return CacheConfig(volume=volume, env=env, where=remote or f"volume {volume}")


def stats_from(raw: object) -> CacheStats | None:
    """The `compiler_cache` entry build-wheel.sh writes into its build info (None: no cache ran)."""
    if not isinstance(raw, dict):
        return None
    try:
        return CacheStats(tool=str(raw["tool"]), hits=int(raw["hits"]), misses=int(raw["misses"]),
                          not_cached=int(raw.get("not_cached", 0)), errors=int(raw.get("errors", 0)),
                          location=str(raw.get("location", "")))
    except (KeyError, TypeError, ValueError):
        return None


def describe(stats: CacheStats | None) -> str:
    """'sccache 23 hits, 1 miss' (or '' when no cache ran)."""
    if stats is None:
        return ""
    text = f"{stats.tool} {stats.hits} hit{'s' * (stats.hits != 1)}, {stats.misses} miss{'es' * (stats.misses != 1)}"
    if stats.not_cached:
        text += f", {stats.not_cached} not cacheable"
    if stats.errors:
        text += f", {stats.errors} error{'s' * (stats.errors != 1)}"
    return text
