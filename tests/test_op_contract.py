"""The kernels patch registers vLLM's op schemas exactly, under torch::kXPU, in the _C library."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from kpatch.schemas import extract, normalise
from kpatch.stack import added_text, load_series

pytestmark = pytest.mark.unit  # no git repository, Docker engine or SYCL device

ROOT = Path(__file__).resolve().parents[1]
PINNED = ROOT / "tests" / "data" / "vllm-v0.33.0-kimi-k3-schemas.txt"


def vllm_schemas() -> dict[str, str]:
    lines = [line for line in PINNED.read_text().splitlines() if line and not line.startswith("#")]
    return {line.split("(", 1)[0]: normalise(line) for line in lines}


def kernels_bindings() -> str:
    series = load_series("vllm-xpu-kernels", ROOT / "patches" / "vllm-xpu-kernels")
    patch = next(p for p in series.patches if "csrc/torch_bindings.cpp" in p.paths)
    return added_text(patch.path, "csrc/torch_bindings.cpp")


def test_kernels_register_vllms_schemas_exactly() -> None:
    registered = extract(kernels_bindings())
    for name, schema in vllm_schemas().items():
        assert name in registered, f"the kernels patch does not define {name}"
        assert registered[name].text == schema


def test_both_ops_have_an_xpu_impl() -> None:
    text = kernels_bindings()
    for name in vllm_schemas():
        assert re.search(rf'ops\.impl\(\s*"{name}",\s*torch::kXPU,\s*&{name}\)', text), name


def test_sources_are_built_and_declared() -> None:
    series = load_series("vllm-xpu-kernels", ROOT / "patches" / "vllm-xpu-kernels")
    patch = next(p for p in series.patches if "CMakeLists.txt" in p.paths).path
    assert '"csrc/kimi_k3_mla_epilogue.cpp"' in added_text(patch, "CMakeLists.txt")
    declared = added_text(patch, "csrc/ops.h")
    for name in vllm_schemas():
        assert f"void {name}(" in declared


def test_a_registration_without_defaults_is_caught() -> None:
    """Upstream PR #592's registration drops the `=None` defaults: the comparison must see it."""
    pr592 = 'ops.def("' + next(iter(vllm_schemas().values())).replace("=None", "") + '");'
    name, schema = next(iter(vllm_schemas().items()))
    assert extract(pr592)[name].text != schema


def test_schemas_parse_and_agree_in_torch() -> None:
    registered = extract(kernels_bindings())
    for name, schema in vllm_schemas().items():
        want, got = torch._C.parse_schema(schema), torch._C.parse_schema(registered[name].text)
        assert [(a.name, str(a.type), a.default_value if a.has_default_value() else "-") for a in got.arguments] \
            == [(a.name, str(a.type), a.default_value if a.has_default_value() else "-") for a in want.arguments]
