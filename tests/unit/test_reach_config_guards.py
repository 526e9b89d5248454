"""Opt-in config guards in the XPU reachability model (issue 41): a path taken only when a user sets a config value
away from its default, to a value no XPU module names, is off XPU, with the guard and its line; a value some XPU
module names, or a test of the default, keeps the call reported."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_reach import reach_of

CONFIG = """
    class KernelConfig:
        moe_backend: str = "auto"
        linear_backend: str = "auto"
    """

MODEL = """
    import torch

    class Moe:
        def __init__(self, vllm_config):
            self.use_mega = vllm_config.kernel_config.moe_backend == "{value}"

        def forward(self, x):
            if self.use_mega:
                torch.ops._C.mega_moe(x)
            return x

    def run(vllm_config, x):
        Moe(vllm_config).forward(x)
    """

DECODE = """
    import torch

    def build_decode(vllm_config):
        extra = vllm_config.additional_config
        backend = extra.get("decode_backend", "auto") if isinstance(extra, dict) else "auto"
        if backend == "auto":
            return None
        if backend != "{value}":
            raise ValueError("Supported decode_backend values are auto/{value}")
        return torch.ops._C.cooperative_topk(1)
    """


def test_a_path_taken_only_under_an_opt_in_config_value_no_xpu_module_names_is_guarded_off_xpu(
        tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/config/kernel.py": CONFIG,
                              "app/models/moe.py": MODEL.replace("{value}", "deep_gemm_mega_moe")})
    verdict = got["mega_moe"]
    assert not verdict.reached
    assert "app/models/moe.py:9: only if `self.use_mega`, false on XPU" in verdict.why
    assert "app/config/kernel.py:3: an opt-in config value, 'auto' unless a user sets it" in verdict.why


def test_an_opt_in_value_an_xpu_module_names_may_be_taken_there_so_its_call_is_reported(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/config/kernel.py": CONFIG,
                              "app/models/moe.py": MODEL.replace("{value}", "deep_gemm_mega_moe"),
                              "app/models/xpu/moe.py": 'MEGA = "deep_gemm_mega_moe"\n'})
    assert got["mega_moe"].reached


def test_a_test_of_the_default_config_value_keeps_its_call_reported(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/config/kernel.py": CONFIG,
                              "app/models/moe.py": MODEL.replace("{value}", "auto")})
    assert got["mega_moe"].reached


def test_a_field_no_config_class_declares_is_not_an_opt_in_guard(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/config/kernel.py": CONFIG.replace("moe_backend", "other_backend"),
                              "app/models/moe.py": MODEL.replace("{value}", "deep_gemm_mega_moe")})
    assert got["mega_moe"].reached


def test_an_extra_option_read_with_its_default_and_refused_unless_opted_in_keeps_the_path_after_off_xpu(
        tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/models/decode.py": DECODE.replace("{value}", "latency_specialized")})
    verdict = got["cooperative_topk"]
    assert not verdict.reached
    assert "app/models/decode.py:9: returns first if `backend != 'latency_specialized'`, true on XPU" in verdict.why
    assert "app/models/decode.py:6: an opt-in config value, 'auto' unless a user sets it" in verdict.why


def test_a_dict_get_on_something_not_a_config_is_not_an_opt_in_guard(tmp_path: Path) -> None:
    source = DECODE.replace("{value}", "latency_specialized").replace(
        "extra = vllm_config.additional_config", "extra = vllm_config.request_options")
    got = reach_of(tmp_path, {"app/models/decode.py": source})
    assert got["cooperative_topk"].reached
