"""The compiler cache of container builds: what the environment turns on, what reaches the build, its counts."""

from __future__ import annotations

from kpatch.output.redact import redact_text
from kpatch.wheels import compiler_cache
from kpatch.wheels.backend import INFO_NAME, collect


def test_by_default_the_cache_is_a_named_volume_mounted_as_sccache_dir() -> None:
    config = compiler_cache.from_environment({"HOME": "/root", "PATH": "/usr/bin"})
    assert config.volume == compiler_cache.DEFAULT_VOLUME and config.where == "volume kpatch-sccache"
    assert config.env == {"KPATCH_SCCACHE": "1", "SCCACHE_DIR": compiler_cache.MOUNT}


def test_kpatch_sccache_0_turns_it_off_and_another_volume_can_be_named() -> None:
    assert compiler_cache.from_environment({"KPATCH_SCCACHE": "0"}) == compiler_cache.OFF
    assert not compiler_cache.OFF.enabled
    assert compiler_cache.from_environment({"KPATCH_SCCACHE_VOLUME": "runner-pool"}).volume == "runner-pool"


def test_remote_storage_settings_and_their_credentials_are_passed_and_secrets_redacted() -> None:
    env = {"SCCACHE_BUCKET": "kpatch-cache", "SCCACHE_ENDPOINT": "https://minio.example.invalid",
           "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3t-value-x", "SCCACHE_DIR": "/host/dir",
           "GITHUB_TOKEN": "ghp_never", "UNRELATED": "1"}
    config = compiler_cache.from_environment(env)
    assert config.where == "S3 bucket (SCCACHE_BUCKET)"
    assert config.env == {"SCCACHE_BUCKET": "kpatch-cache", "SCCACHE_ENDPOINT": "https://minio.example.invalid",
                          "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3t-value-x",
                          "KPATCH_SCCACHE": "1", "SCCACHE_DIR": compiler_cache.MOUNT}
    assert "s3cr3t-value-x" not in redact_text("key s3cr3t-value-x")
    gha = compiler_cache.from_environment({"SCCACHE_GHA_ENABLED": "true", "ACTIONS_RUNTIME_TOKEN": "tok-123456",
                                          "ACTIONS_CACHE_URL": "https://cache.example.invalid/"})
    assert gha.where == "GitHub Actions cache (SCCACHE_GHA_ENABLED)"
    assert gha.env["ACTIONS_RUNTIME_TOKEN"] == "tok-123456"


def test_the_build_info_counts_reach_the_build_output() -> None:
    info = (b'{"torch": null, "compiler_cache": {"tool": "sccache", "hits": 24, "misses": 1, "not_cached": 0, '
            b'"errors": 0, "location": "Local disk"}}')
    made = collect("kernels", {"k-1.0-cp38-abi3-linux_x86_64.whl": b"wheel", INFO_NAME: info})
    assert made.compiler_cache == compiler_cache.CacheStats(tool="sccache", hits=24, misses=1, not_cached=0, errors=0,
                                                            location="Local disk")
    assert compiler_cache.describe(made.compiler_cache) == "sccache 24 hits, 1 miss"
    no_cache = collect("kernels", {"k.whl": b"wheel", INFO_NAME: b'{"torch": null}'})  # an older build script
    assert no_cache.compiler_cache is None and compiler_cache.describe(None) == ""
    assert compiler_cache.stats_from({"tool": "sccache", "hits": "many"}) is None
