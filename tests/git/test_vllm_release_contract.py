"""The real contract, in CI: vLLM v0.33.0's own source (its release sdist from the package index, pinned by
sha256) against the kernels stack's registrations (read from the patch files).

No hand-copied schema file: the eight Kimi-K3 MLA schemas vLLM declares in csrc/torch_bindings.cpp must equal,
argument for argument (names, types, `Tensor!`/`Tensor?`, defaults, order, returns), what the kernels patches
register for XPU in `_C`; and every one of these ops that vLLM's Kimi-K3 Python calls must be served on XPU.
The sdist is the one real upstream CI can reach (the kernels' source at the pinned commit is not on the index).
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import urllib.request
from pathlib import Path

import pytest

from kpatch.stack import added_text, load_series
from kpatch.verify.contract import cpp, pycalls, schema

ROOT = Path(__file__).resolve().parents[2]
SDIST = ("https://files.pythonhosted.org/packages/f7/25/aa5684e9c59d6fc75f78926b7f15e8d9adc7de2d9e6e7575b80776ad8169/"
         "vllm-0.33.0.tar.gz")
SHA256 = "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112"
WANTED = ("csrc/torch_bindings.cpp", "vllm/models/kimi_k3/")
KIMI = "fused_kimi_k3_mla_"

pytestmark = pytest.mark.registry


@pytest.fixture(scope="module")
def vllm_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """vLLM v0.33.0's bindings and Kimi-K3 package, from its sdist (cached under KPATCH_TEST_DOWNLOADS)."""
    cache = Path(os.environ.get("KPATCH_TEST_DOWNLOADS", tmp_path_factory.getbasetemp() / "downloads"))
    archive = cache / SDIST.rsplit("/", 1)[1]
    if not archive.is_file() or hashlib.sha256(archive.read_bytes()).hexdigest() != SHA256:
        cache.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(SDIST, timeout=120) as reply:
            data = reply.read()
        assert hashlib.sha256(data).hexdigest() == SHA256, "the sdist on the index is not the pinned one"
        archive.write_bytes(data)
    root = tmp_path_factory.mktemp("vllm-0.33.0")
    with tarfile.open(fileobj=io.BytesIO(archive.read_bytes()), mode="r:gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.split("/", 1)[-1].startswith(WANTED)]
        for member in members:
            member.name = member.name.split("/", 1)[1]
        tar.extractall(root, members=members, filter="data")
    return root


def kernels_registrations() -> cpp.Registrations:
    series = load_series("vllm-xpu-kernels", ROOT / "patches" / "vllm-xpu-kernels")
    added = "".join(added_text(p.path, "csrc/torch_bindings.cpp") for p in series.patches
                    if "csrc/torch_bindings.cpp" in p.paths)
    return cpp.registrations("TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n" + added + "}\n",
                             "csrc/torch_bindings.cpp", ("_C",))


def vllm_declarations(root: Path) -> dict[str, schema.Schema]:
    text = (root / "csrc" / "torch_bindings.cpp").read_text(encoding="utf-8")
    found = cpp.registrations(text, "csrc/torch_bindings.cpp", ("_C",))
    return {cpp.op_name(d.schema): schema.parse(d.schema) for d in found.definitions
            if d.namespace == "_C" and cpp.op_name(d.schema).startswith(KIMI)}


def test_the_kernels_register_vllms_eight_kimi_k3_schemas_exactly(vllm_release: Path) -> None:
    declared = vllm_declarations(vllm_release)
    assert len(declared) == 8, sorted(declared)
    registered = {cpp.op_name(d.schema): schema.parse(d.schema) for d in kernels_registrations().definitions}
    assert sorted(registered) == sorted(declared)
    for name, want in declared.items():
        assert schema.compare(want, registered[name]) == [], name


def test_every_kimi_k3_op_vllm_calls_is_served_on_xpu(vllm_release: Path) -> None:
    sites, broken = pycalls.call_sites(vllm_release, frozenset({"_C"}), ("vllm",))
    assert not broken
    called = {s.op for s in sites if s.op.startswith(KIMI) and not s.probe}
    assert len(called) == 8, sorted(called)
    xpu = {i.op for i in kernels_registrations().implementations if i.namespace == "_C" and i.key == "XPU"}
    assert called <= xpu, sorted(called - xpu)


def test_a_registration_without_the_defaults_breaks_the_contract(vllm_release: Path) -> None:
    """PR #592's shape (the `=None` defaults dropped) is a breaking difference against vLLM's declaration."""
    want = vllm_declarations(vllm_release)["fused_kimi_k3_mla_key_concat_kv_cache_insert"]
    theirs = next(d.schema for d in kernels_registrations().definitions
                  if cpp.op_name(d.schema) == "fused_kimi_k3_mla_key_concat_kv_cache_insert")
    assert schema.breaking(schema.compare(want, schema.parse(theirs.replace("=None", ""))))
