"""Ops only the application's CPU or ROCm build declares (issue 41): where an op is declared says nothing of where
it is called from, so a call of one that XPU may run is a finding like any other, and only a call the reachability
model keeps off XPU is left out (counted among the other backends' ops)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from kpatch.verify.contract import check, findings

KERNELS = """
    TORCH_LIBRARY(_C, ops) {
      ops.def("rms_norm(Tensor! out, Tensor x) -> ()");
      ops.impl("rms_norm", torch::kXPU, &rms_norm);
    }
    """
APP_CUDA = """
    TORCH_LIBRARY(_C, ops) {
      ops.def("rms_norm(Tensor! out, Tensor x) -> ()");
    }
    """
APP_CPU = """
    TORCH_LIBRARY(_C, ops) {
      ops.def("state_update_cpu(Tensor! state, Tensor x) -> ()");
      ops.def("cpu_attn_cache(Tensor! cache, Tensor x) -> ()");
    }
    """
CPU_OPS = """
    import torch

    def state_update_cpu(state, x):
        torch.ops._C.state_update_cpu(state, x)

    def cpu_attn_cache(cache, x):
        torch.ops._C.cpu_attn_cache(cache, x)
    """
# a backend a user picks by name from a registry with no platform check (`--mamba-backend cpu`)
MAMBA = """
    from app.ops import state_update_cpu

    class TritonUpdate:
        def run(self, state, x):
            state.add_(x)

    class CpuUpdate:
        def run(self, state, x):
            state_update_cpu(state, x)

    BACKENDS = {"triton": TritonUpdate, "cpu": CpuUpdate}

    def decode(backend, state, x):
        BACKENDS[backend]().run(state, x)
    """
# the CPU attention path runs only on the CPU platform
ATTENTION = """
    from app.platforms import current_platform
    from app.ops import cpu_attn_cache

    def write_cache(cache, x):
        if current_platform.is_cpu():
            cpu_attn_cache(cache, x)
        else:
            cache.copy_(x)
    """


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    kernels = _tree(tmp_path / "kernels", {"csrc/xpu/torch_bindings.cpp": KERNELS})
    app = _tree(tmp_path / "app_tree", {
        "csrc/torch_bindings.cpp": APP_CUDA, "csrc/cpu/torch_bindings.cpp": APP_CPU,
        "app/__init__.py": "", "app/platforms.py": "current_platform = None\n", "app/ops.py": CPU_OPS,
        "app/mamba.py": MAMBA, "app/attention.py": ATTENTION})
    return kernels, app


def test_a_cpu_builds_op_that_a_backend_picked_by_name_calls_on_xpu_is_reported(tmp_path: Path) -> None:
    kernels, app = _pair(tmp_path)
    report = check(kernels, app)
    found = {(f.op, str(f.site)) for f in findings(report)}
    assert ("_C.state_update_cpu", "app/ops.py:5") in found
    assert "_C.state_update_cpu" not in report.other_backends


def test_a_cpu_builds_op_called_only_behind_a_cpu_platform_check_is_left_out(tmp_path: Path) -> None:
    kernels, app = _pair(tmp_path)
    report = check(kernels, app)
    assert not [f for f in findings(report) if f.op == "_C.cpu_attn_cache"]
    assert report.other_backends == ("_C.cpu_attn_cache",)
