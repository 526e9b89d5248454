"""The compiler cache of container builds (sccache on a named volume): it speeds the kernels' C++ up, never changes
what is built."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kpatch.examples.ext import TRANSLATION_UNITS
from tests.docker.test_build_wheels import Pair


@pytest.fixture
def fresh_volume(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A compiler-cache volume of this test alone (cold at first), removed afterwards."""
    name = f"kpatch-sccache-test-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("KPATCH_SCCACHE_VOLUME", name)
    yield name
    subprocess.run(["docker", "volume", "rm", "-f", name], capture_output=True)


def kernels(result_stdout: str) -> dict[str, Any]:
    wheels: list[dict[str, Any]] = json.loads(result_stdout)["result"]["wheels"]
    return next(w for w in wheels if w["upstream"] == "kernels")


def rebuild(pair: Pair) -> dict[str, Any]:
    shutil.rmtree(pair.cache / "wheels")  # kpatch's wheel cache: the next build starts containers again
    result = pair.build()
    assert result.exit_code == 0, result.output
    return kernels(result.stdout)


def test_wheels_built_with_a_cold_a_warm_and_no_compiler_cache_are_byte_identical(
        tmp_path: Path, base_image: str, fresh_volume: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pair = Pair(tmp_path, base_image)
    cold = pair.build()
    assert cold.exit_code == 0, cold.output
    first = kernels(cold.stdout)
    units = TRANSLATION_UNITS + 1  # the kernels and the module's own file
    assert first["compiler_cache"]["hits"] == 0 and first["compiler_cache"]["misses"] == units
    assert first["compiler_cache"]["location"].startswith("Local disk")  # the volume, mounted as SCCACHE_DIR
    assert fresh_volume in subprocess.run(["docker", "volume", "ls", "-q"], capture_output=True, text=True).stdout
    built = pair.dist()
    warm = rebuild(pair)
    assert warm["compiler_cache"]["hits"] == units and warm["compiler_cache"]["misses"] == 0
    assert pair.dist() == built  # both wheels and the lock, byte for byte
    monkeypatch.setenv("KPATCH_SCCACHE", "0")
    off = rebuild(pair)
    assert off["compiler_cache"] is None
    assert pair.dist() == built


@pytest.mark.usefixtures("fresh_volume")
def test_a_change_to_one_translation_unit_misses_only_there(tmp_path: Path, base_image: str) -> None:
    pair = Pair(tmp_path, base_image)
    assert pair.build().exit_code == 0
    source = pair.example.kernels / "csrc" / "ext" / "kernel_07.cpp"
    tree = pair.root / "work" / "kernels"
    (tree / "csrc" / "ext" / "kernel_07.cpp").write_text(source.read_text().replace("% 5", "% 6"))
    subprocess.run(["git", "commit", "-qam", "Tune kernel 7\n\nUpstream-Status: pending"], cwd=tree, check=True)
    assert pair.run("export").exit_code == 0
    result = pair.build()
    assert result.exit_code == 0, result.output
    stats = kernels(result.stdout)["compiler_cache"]
    assert stats["misses"] == 1 and stats["hits"] == TRANSLATION_UNITS
    assert f"kernels: sccache {TRANSLATION_UNITS} hits, 1 miss (" in result.stderr
