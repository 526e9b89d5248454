"""A real Docker engine and a local base image (no registry here): .ci/run starts dockerd and builds it."""

from __future__ import annotations

import os
import subprocess

import pytest

BASE_IMAGE = os.environ.get("KPATCH_TEST_BASE_IMAGE", "kpatch-test-base:bookworm")


@pytest.fixture(autouse=True)
def _test_compiler_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests' builds share one compiler-cache volume of their own, never the user's (kpatch-sccache)."""
    monkeypatch.setenv("KPATCH_SCCACHE_VOLUME", "kpatch-sccache-tests")


@pytest.fixture(scope="session")
def base_image() -> str:
    info = subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True, text=True)
    if info.returncode != 0:
        pytest.fail(f"no Docker engine with the base image {BASE_IMAGE}: run scripts/docker-test-image "
                    f"(it starts dockerd if needed and builds the image): {info.stderr.strip()[:200]}")
    return BASE_IMAGE
