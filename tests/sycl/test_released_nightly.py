"""The nightly's released-pair lines (kpatch.verify.pairs.night_notes, `kpatch nightly --released-pairs`): against
a package index on 127.0.0.1 serving the application's sdist and two kernels wheels built here, offline, and with
an index that cannot be reached."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpatch.config import load
from kpatch.forge import offline
from kpatch.nightly import released
from kpatch.project.workspace import Workspace
from kpatch.verify.pairs import Released, night_notes
from tests.sycl.test_wheel_verify import KERNELS_CPP, _build_extension, _serve, _wheel, pair, simple_index

__all__ = ["pair"]  # the module's fixture, used here

DEMO = Released(app="app", kernels="appkernels", model="app/", model_name="Demo")


@pytest.fixture
def served(pair: dict[str, Path], tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An index with app 0.1 (pinning appkernels 0.1, which lacks missing_op) and appkernels 0.1 only."""
    root = tmp_path / "index"
    simple_index(root, {"appkernels": [pair["wheel"]], "app": [pair["sdist"]]})
    server, url = _serve(root)
    try:
        yield url, root
    finally:
        server.shutdown()
        server.server_close()


def test_the_night_says_the_newest_released_pair_does_not_carry_the_fix_and_names_the_ops_it_lacks(
        served: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = served
    lines = night_notes(DEMO, url, tmp_path / "cache")
    assert lines == ("released pairs: app 0.1 x appkernels 0.1 (pinned) does not carry the fix yet: Demo lacks 2 "
                     "op(s) on XPU (fused_op, missing_op)",)


def test_the_night_says_when_a_released_kernels_wheel_starts_to_carry_the_fix(
        pair: dict[str, Path], served: tuple[str, Path], tmp_path: Path) -> None:
    url, root = served
    fixed = KERNELS_CPP.replace("Tensor? pos) -> ()", "Tensor? pos=None) -> ()").replace(
        '  ops.def("add_one', '  ops.def("missing_op(Tensor x) -> ()");\n  ops.def("add_one')
    (tmp_path / "b").mkdir()
    so = _build_extension(fixed, tmp_path / "b" / "_C.abi3.so")
    newer = _wheel(tmp_path / "appkernels-0.2-cp38-abi3-linux_x86_64.whl", {"appkernels/_C.abi3.so": so.read_bytes()})
    (root / "appkernels" / "index.html").unlink()
    (root / "appkernels" / pair["wheel"].name).unlink()
    simple_index(root / "next", {"appkernels": [pair["wheel"], newer]})
    (root / "appkernels").rmdir()
    (root / "next" / "appkernels").rename(root / "appkernels")
    lines = night_notes(DEMO, url, tmp_path / "cache")
    assert lines[0].startswith("released pairs: app 0.1 x appkernels 0.1 (pinned) does not carry the fix yet")
    assert lines[1] == "released pairs: app 0.1 x appkernels 0.2 (the newest kernels) carries the fix: every Demo " \
                       "op (app/) is served on XPU with the application's schemas; the stack's patches should now " \
                       "be found merged upstream and dropped at the next rebase"


def test_the_released_pairs_are_skipped_with_the_reason_when_offline_or_the_index_cannot_be_reached(
        tmp_path: Path) -> None:
    with offline("the test runs offline"):
        assert night_notes(DEMO, "http://127.0.0.1:9", tmp_path) == (
            "released pairs: not checked (the test runs offline: the package index http://127.0.0.1:9 is not "
            "asked)",)
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    lines = night_notes(DEMO, closed, tmp_path)
    assert len(lines) == 1 and lines[0].startswith(f"released pairs: not checked (the package index {closed} could "
                                                   f"not be used: package index {closed}/app/:")
    assert not (tmp_path / "app").exists()


def test_the_pair_to_check_is_the_stacks_application_and_kernels_and_the_folder_its_patches_change(
        tmp_path: Path) -> None:
    (tmp_path / "patches" / "app").mkdir(parents=True)
    (tmp_path / "patches" / "kern").mkdir(parents=True)
    for i, path in enumerate(("app/models/demo/nvidia/mla.py", "app/models/demo/nvidia/ops/fused.py",
                              "tests/test_demo.py")):
        (tmp_path / "patches" / "app" / f"000{i + 1}-x.patch").write_text(
            f"From 0 Mon Sep 17 00:00:00 2001\nFrom: a <a@b>\nSubject: [PATCH] x\n\n---\n"
            f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n")
    (tmp_path / "kpatch.toml").write_text(
        'version = 1\n\n[[upstream]]\nname = "kern"\nurl = "https://example.invalid/kern.git"\nbranch = "main"\n'
        'base = "main"\npatches = "patches/kern"\nrequires = []\n\n'
        '[[upstream]]\nname = "app"\nurl = "https://example.invalid/app.git"\nbranch = "main"\nbase = "main"\n'
        'patches = "patches/app"\nrequires = ["kern"]\n')
    ws = Workspace.create(load(tmp_path / "kpatch.toml"), tmp_path / "cache", tmp_path / "work")
    found = released.what(ws)
    assert found == Released(app="app", kernels="kern", model="app/models/demo/nvidia/",
                             model_name="app/models/demo/nvidia")


REAL_KERNELS = os.environ.get("KPATCH_REAL_KERNELS_WHEEL")  # vllm_xpu_kernels-0.1.15.4-...whl
REAL_VLLM = os.environ.get("KPATCH_REAL_VLLM_SDIST")  # vllm-0.33.0.tar.gz


@pytest.mark.skipif(not (REAL_KERNELS and REAL_VLLM), reason="the released pair is not on this machine: set "
                    "KPATCH_REAL_KERNELS_WHEEL (vllm_xpu_kernels 0.1.15.4) and KPATCH_REAL_VLLM_SDIST (vllm-0.33.0)")
def test_the_night_says_the_released_vllm_and_kernels_do_not_carry_the_kimi_k3_fix(tmp_path: Path) -> None:
    assert REAL_KERNELS and REAL_VLLM
    root = tmp_path / "index"
    simple_index(root, {"vllm-xpu-kernels": [Path(REAL_KERNELS)], "vllm": [Path(REAL_VLLM)]})
    server, url = _serve(root)
    try:
        lines = night_notes(Released(model="vllm/models/kimi_k3/nvidia/", model_name="Kimi-K3"), url,
                            tmp_path / "cache")
    finally:
        server.shutdown()
        server.server_close()
    assert len(lines) == 1 and lines[0].startswith("released pairs: vllm 0.33.0 x vllm-xpu-kernels 0.1.15.4 (pinned) "
                                                   "does not carry the fix yet: Kimi-K3 lacks 6 op(s)")
    assert "fused_kimi_k3_mla_decode_q_concat_kv_cache_insert" in lines[0]
