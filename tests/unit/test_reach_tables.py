"""Kernel tables on XPU, on small synthetic applications (issue 41): a kernel listed for the XPU platform only under
another platform's key, and otherwise only in a table asked whether it holds a class (`kernel in BACKEND_KERNELS.get(
backend, set())`), is off XPU; a table one use of which hands out its class keeps the kernel reported."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_reach import reach_of

KERNELS = """
    import torch

    class CutlassFp4Kernel:
        def apply(self, x):
            return torch.ops._C.scaled_fp4_quant(x)

    class XpuFp4Kernel:
        def apply(self, x):
            return x
    """

SELECT = """
    from app.kernels import CutlassFp4Kernel, XpuFp4Kernel
    from app.platforms import PlatformEnum, current_platform

    BACKEND_KERNELS = {"cutlass": {CutlassFp4Kernel}, "xpu": {XpuFp4Kernel}}
    POSSIBLE_KERNELS = {PlatformEnum.CUDA: [CutlassFp4Kernel], PlatformEnum.XPU: [XpuFp4Kernel]}

    def _filter(backend, kernels):
        backend_kernels = BACKEND_KERNELS.get(backend, set())
        return [k for k in kernels if k in backend_kernels] or kernels

    def backend_name(kernel):
        for key, kernels in BACKEND_KERNELS.items():
            if type(kernel) not in kernels:
                continue
            return key
        return "cutlass" in BACKEND_KERNELS

    def choose(backend):
        return _filter(backend, POSSIBLE_KERNELS[current_platform.enum])[0]()
    {more}
    """

LAYER = """
    from app.select import backend_name, choose

    def run(x, backend):
        kernel = choose(backend)
        print(backend_name(kernel))
        return kernel.apply(x)
    """


def test_a_kernel_listed_for_xpu_only_under_cuda_and_in_a_table_asked_only_for_membership_is_off_xpu(
        tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/kernels.py": KERNELS, "app/select.py": SELECT.replace("{more}", ""),
                              "app/layer.py": LAYER})
    verdict = got["scaled_fp4_quant"]
    assert not verdict.reached
    assert "listed only under PlatformEnum.CUDA" in verdict.why
    assert "+1 more, none reached" in verdict.why  # the membership table (the reason --explain lists for it)


def test_a_table_one_use_of_which_hands_out_its_class_keeps_the_kernel_reported(tmp_path: Path) -> None:
    more = """
    def forced(backend):
        for kernel in BACKEND_KERNELS[backend]:
            return kernel()
    """
    layer = LAYER + "\n    def forced_run(x):\n        return forced('cutlass').apply(x)\n"
    got = reach_of(tmp_path, {"app/kernels.py": KERNELS, "app/select.py": SELECT.replace("{more}", more),
                              "app/layer.py": layer})
    assert got["scaled_fp4_quant"].reached


def test_a_table_imported_under_another_name_may_be_used_unseen_so_the_kernel_is_reported(tmp_path: Path) -> None:
    more = """
    from app.select import BACKEND_KERNELS as KERNELS_BY_NAME

    def forced(backend):
        return next(iter(KERNELS_BY_NAME[backend]))()
    """
    layer = LAYER + "\n    def forced_run(x):\n        return forced('cutlass').apply(x)\n"
    got = reach_of(tmp_path, {"app/kernels.py": KERNELS, "app/select.py": SELECT.replace("{more}", ""),
                              "app/forced.py": more, "app/layer.py": layer.replace(
                                  "from app.select import backend_name, choose",
                                  "from app.forced import forced\n    from app.select import backend_name, choose")})
    assert got["scaled_fp4_quant"].reached


INT8_KERNELS = """
    import torch

    class CutlassInt8Kernel:
        def apply(self, x):
            return torch.ops._C.cutlass_scaled_mm_azp(x)

        def prepare(self, x):
            return torch.ops._C.cutlass_prepare(x)

    class TritonInt8Kernel(CutlassInt8Kernel):
        def apply(self, x):
            return x
    """
INT8_SELECT = """
    from app.kernels import CutlassInt8Kernel, TritonInt8Kernel
    from app.platforms import PlatformEnum, current_platform

    POSSIBLE_KERNELS = {PlatformEnum.CUDA: [CutlassInt8Kernel, TritonInt8Kernel], PlatformEnum.XPU: [TritonInt8Kernel]}

    def run(x):
        kernel = POSSIBLE_KERNELS[current_platform.enum][0]()
        kernel.prepare(x)
        return kernel.apply(x)
    """


def test_a_method_every_xpu_subclass_overrides_without_super_is_off_xpu_when_its_class_is_listed_only_for_cuda(
        tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/kernels.py": INT8_KERNELS, "app/select.py": INT8_SELECT})
    verdict = got["cutlass_scaled_mm_azp"]
    assert not verdict.reached
    assert "CutlassInt8Kernel.apply is overridden, without super(), by app/kernels.py:11 TritonInt8Kernel" \
        in verdict.why
    assert "listed only under PlatformEnum.CUDA" in verdict.why
    assert got["cutlass_prepare"].reached  # inherited, not overridden: the XPU kernel runs it


def test_an_override_that_calls_super_or_a_direct_use_of_the_base_keeps_the_base_method_reported(
        tmp_path: Path) -> None:
    calls_super = INT8_KERNELS.replace("            return x\n", "            return super().apply(x)\n")
    got = reach_of(tmp_path, {"app/kernels.py": calls_super, "app/select.py": INT8_SELECT})
    assert got["cutlass_scaled_mm_azp"].reached
    listed = INT8_SELECT.replace("PlatformEnum.XPU: [TritonInt8Kernel]", "PlatformEnum.XPU: [CutlassInt8Kernel]")
    got = reach_of(tmp_path / "listed", {"app/kernels.py": INT8_KERNELS, "app/select.py": listed})
    assert got["cutlass_scaled_mm_azp"].reached
