"""Paths the XPU platform refuses, on small synthetic applications (issue 41): a CUDA device query that raises in a
torch built for XPU, and the flag set only after one; each with a case where the refusal does not hold, so the
call stays reported."""

from __future__ import annotations

from pathlib import Path

from kpatch.verify.contract.reach import Verdict
from tests.unit.test_reach import reach_of

EXPERTS = """
    import torch

    class MegaExperts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ready = False

        def prepare_weights(self):
            if self.ready:
                return
            {check}
            self.ready = True

        def run(self, x):
            if not self.ready:
                raise RuntimeError("prepare the weights first")
            torch.ops._C.scaled_fp4_quant(x)

        def forward(self, x):
            self.prepare_weights()
            return self.run(x)

    def build():
        return MegaExperts()
    """


def _experts(tmp_path: Path, check: str, more: dict[str, str] | None = None) -> dict[str, Verdict]:
    return reach_of(tmp_path, {"app/experts.py": EXPERTS.replace("{check}", check), **(more or {})})


def test_a_flag_set_only_after_a_cuda_device_query_stays_false_on_xpu_so_the_call_it_gates_is_off_xpu(
        tmp_path: Path) -> None:
    got = _experts(tmp_path, 'if torch.cuda.get_device_capability(0)[0] != 10:\n'
                             '                raise ValueError("needs SM100")')
    verdict = got["scaled_fp4_quant"]
    assert not verdict.reached
    assert "returns first if `not self.ready`" in verdict.why
    assert "torch.cuda.get_device_capability(0)" in verdict.why and "raises on XPU" in verdict.why


def test_a_call_after_a_device_query_in_the_same_function_is_off_xpu(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/ops.py": """
        import torch

        def fused(x):
            major, _ = torch.cuda.get_device_capability()
            torch.ops._C.fused_sm90(x)

        def guarded(x):
            if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9:
                pass
            torch.ops._C.after_short_circuit(x)
        """})
    assert not got["fused_sm90"].reached
    assert "torch.cuda.get_device_capability()" in got["fused_sm90"].why
    assert got["after_short_circuit"].reached  # the query sits after `and`: never evaluated on XPU


def test_a_flag_set_after_a_check_xpu_passes_keeps_the_call_reported(tmp_path: Path) -> None:
    got = _experts(tmp_path, 'if x_dim % 128:\n                raise ValueError("dims")')
    assert got["scaled_fp4_quant"].reached


def test_a_torch_cuda_function_the_application_replaces_with_xpus_is_neither_false_nor_raising(
        tmp_path: Path) -> None:
    runner = {"app/runner.py": """
        import torch

        def wrap():
            torch.cuda.get_device_capability = torch.xpu.get_device_capability
            torch.cuda.is_current_stream_capturing = torch.xpu.is_current_stream_capturing
        """, "app/graphs.py": """
        import torch

        def capture(x):
            if torch.cuda.is_current_stream_capturing():
                torch.ops._C.graph_safe(x)
        """}
    got = _experts(tmp_path, 'if torch.cuda.get_device_capability(0)[0] != 10:\n'
                             '                raise ValueError("needs SM100")', runner)
    assert got["scaled_fp4_quant"].reached
    assert got["graph_safe"].reached

