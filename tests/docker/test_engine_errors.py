"""An engine error is one line: the engine, what failed, the next step (no library repr, no cut-off string)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kpatch.container.docker import Engine
from kpatch.errors import BuildError

MISSING = "registry.kpatch-test.invalid/no-such-base:1"  # a registry no resolver knows: the pull cannot succeed


def test_a_base_image_no_registry_can_give_names_it_and_the_local_way_round(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN true\n")
    with pytest.raises(BuildError) as caught:
        Engine().build_image(tmp_path, "kpatch-engine-errors:never", {"BASE_IMAGE": MISSING}, {}, lambda line: None)
    first = str(caught.value).splitlines()[0]
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    assert first.startswith(f"the Docker engine at {where} cannot pull base image {MISSING} "
                            "(registry.kpatch-test.invalid: "), first
    assert first.endswith(f"'docker pull {MISSING}' where a registry answers, or 'kpatch build-wheels "
                          "--base-image REF' with an image the engine has")
