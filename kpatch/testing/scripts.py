"""The scripts a test run starts (in the test image, in a test container, on this host), shipped as package data."""

from __future__ import annotations

from importlib import resources


def script(name: str) -> bytes:
    """The packaged script `name` (in kpatch/testing/data/), as bytes: what is hashed, copied in and run."""
    return resources.files("kpatch.testing").joinpath("data", name).read_bytes()
