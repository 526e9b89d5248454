"""`verify --installed` asks the live dispatcher (CPU torch, in a child Python) about a fake kernels package that
registers its op for the XPU key through torch.library: all good, op missing, defaults missing (#592), wrong key."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from kpatch.verify.contract import read_app
from kpatch.verify.diagnose import diagnose, extension_modules
from kpatch.verify.model import Status
from tests.support.fakedist import install_dist

DECLARED = ("kimi_insert(Tensor! q, Tensor! cache, Tensor slots, int block, Tensor? positions=None, "
            "Tensor? cos_sin=None) -> ()")
APP_CALLS = ('import torch\n\n\ndef insert(q, cache, slots):\n'
             '    torch.ops._C.kimi_insert(q, cache, slots, cache.shape[1])\n\n\n'
             'def norm(out, x):\n    torch.ops._C.rms_norm(out, x)\n')
VARIANTS = {  # what the fake kernels register: (schema of kimi_insert or None, its dispatch key)
    "all good": (DECLARED, "XPU"),
    "op missing": (None, "XPU"),
    "defaults missing (#592)": (DECLARED.replace("=None", ""), "XPU"),
    "wrong dispatch key": (DECLARED, "CUDA"),
}


def fake_kernels(schema: str | None, key: str) -> str:
    """A kernels `_C` module that registers rms_norm, and kimi_insert as asked, through torch.library."""
    defines = ["rms_norm(Tensor! out, Tensor input) -> ()"] + ([schema] if schema else [])
    return ("import torch\n\nlib = torch.library.Library('_C', 'FRAGMENT')\n"
            + "".join(f"lib.define({s!r})\nlib.impl({s.split('(')[0]!r}, lambda *a: None, "
                      f"{'XPU' if s.startswith('rms_norm') else key!r})\n" for s in defines))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_dispatcher_diagnosis(variant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    kernels_info = install_dist(site, "vllm-xpu-kernels", "1.0", {
        "vllm_xpu_kernels/__init__.py": "", "vllm_xpu_kernels/_C.py": fake_kernels(*VARIANTS[variant])})
    app_info = install_dist(site, "fakeapp", "1.0", {"fakeapp/__init__.py": "", "fakeapp/model.py": APP_CALLS})
    source = tmp_path / "app-source"
    (source / "csrc").mkdir(parents=True)
    (source / "csrc" / "torch_bindings.cpp").write_text(
        f'STABLE_TORCH_LIBRARY_FRAGMENT(_C, ops) {{\n  ops.def("rms_norm(Tensor! out, Tensor input) -> ()");\n'
        f'  ops.def(\n      "{DECLARED}");\n}}\n')
    monkeypatch.syspath_prepend(str(site))
    kernels = metadata.PathDistribution(kernels_info)
    assert extension_modules(kernels) == ["vllm_xpu_kernels._C"]
    checks = diagnose(kernels, metadata.PathDistribution(app_info), read_app(source), (), "dist/k.whl")
    by_subject = {c.subject: c for c in checks}
    assert by_subject["vllm_xpu_kernels._C"].status is Status.PASS
    assert by_subject["_C::rms_norm"].status is Status.PASS  # registered right in every variant
    kimi = by_subject["_C::kimi_insert"]
    if variant == "all good":
        assert kimi.status is Status.PASS
        assert kimi.detail == "XPU kernel; schema matches the application's declaration csrc/torch_bindings.cpp:4"
        return
    assert kimi.status is Status.FAIL and kimi.fix
    if variant == "op missing":
        assert "not registered; called from fakeapp/model.py:5" in kimi.detail and "AttributeError" in kimi.detail
        assert "dist/k.whl" in kimi.fix
    elif variant == "defaults missing (#592)":
        assert "differs from the application's declaration csrc/torch_bindings.cpp:4" in kimi.detail
        assert "arg 5 positions: default None vs none" in kimi.detail
        assert "fakeapp/model.py:5 leaves out positions, cos_sin" in kimi.detail
    else:
        assert "registered for CUDA but has no kernel for XPU; called from fakeapp/model.py:5" in kimi.detail
        assert "torch::kXPU" in kimi.fix


def test_a_kernels_module_that_fails_to_import_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    kernels_info = install_dist(site, "vllm-xpu-kernels", "1.0", {
        "vllm_xpu_kernels/__init__.py": "", "vllm_xpu_kernels/_C.py": "raise OSError('undefined symbol: _ZN3c10')\n"})
    app_info = install_dist(site, "fakeapp", "1.0", {"fakeapp/__init__.py": "", "fakeapp/model.py": APP_CALLS})
    monkeypatch.syspath_prepend(str(site))
    checks = diagnose(metadata.PathDistribution(kernels_info), metadata.PathDistribution(app_info), None, (), "k.whl")
    (imported,) = [c for c in checks if c.subject == "vllm_xpu_kernels._C"]
    assert imported.status is Status.FAIL and "OSError: undefined symbol: _ZN3c10" in imported.detail
    assert "k.whl" in imported.fix


def test_a_kernels_distribution_without_an_op_library_fails(tmp_path: Path) -> None:
    site = tmp_path / "site"
    kernels_info = install_dist(site, "vllm-xpu-kernels", "1.0", {"vllm_xpu_kernels/__init__.py": ""})
    app_info = install_dist(site, "fakeapp", "1.0", {"fakeapp/__init__.py": "", "fakeapp/model.py": APP_CALLS})
    (check,) = diagnose(metadata.PathDistribution(kernels_info), metadata.PathDistribution(app_info), None, (),
                        "k.whl")
    assert (check.status, check.subject) == (Status.FAIL, "vllm-xpu-kernels")
    assert "no op library to import" in check.detail and check.fix.endswith("k.whl")
