"""The guard kinds of issue 41 in the XPU reachability model, on small synthetic applications: an object None on XPU
(a workspace whose factory returns None there, a buffer registered as None), a KV-cache dtype no XPU attention
backend takes; each with a case where the guard does not hold, so the call stays reported."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_reach import PLATFORM, reach_of

WORKSPACE = PLATFORM + """
    import torch

    class Workspace:
        @classmethod
        def create(cls, size):
            if size > 4096 or not hasattr(torch.ops._C, "{probe}"):
                return None
            if torch.cuda.get_device_capability()[0] not in (9, 10):
                return None
            return cls(size)

        def __init__(self, size):
            self.size = size

    def fused_norm(x, workspace):
        torch.ops._C.fused_allreduce_norm(x, workspace.size)

    def plain_norm(x):
        return x
    """

LAYERS = """
    from functools import partial
    from app.workspace import Workspace, fused_norm, plain_norm

    class Layer:
        def __init__(self, workspace=None):
            self.boundary = partial(fused_norm, workspace=workspace) if workspace is not None else plain_norm

    class Model:
        def __init__(self):
            self.workspace = Workspace.create(1024)
            self.layers = [Layer(workspace=self.workspace) for _ in range(2)]
    """


def test_a_workspace_whose_factory_returns_none_on_xpu_keeps_every_call_behind_its_check_off_xpu(
        tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/workspace.py": WORKSPACE.replace("{probe}", "fused_allreduce_norm"),
                              "app/layers.py": LAYERS})
    verdict = got["fused_allreduce_norm"]
    assert not verdict.reached
    assert "workspace is not None" in verdict.why and "create returns None on XPU" in verdict.why
    assert "app/layers.py:12 passes `self.workspace`" in verdict.why


def test_a_workspace_whose_probe_names_an_op_the_kernels_define_may_exist_on_xpu_so_its_call_is_reported(
        tmp_path: Path) -> None:
    # a size check XPU may pass in place of the CUDA capability query, which raises on XPU (test_reach_refusals.py)
    workspace = WORKSPACE.replace("{probe}", "defined_op").replace(
        "torch.cuda.get_device_capability()[0] not in (9, 10)", "size % 128")
    got = reach_of(tmp_path, {"app/workspace.py": workspace, "app/layers.py": LAYERS}, defined=("defined_op",))
    assert got["fused_allreduce_norm"].reached


def test_a_workspace_parameter_one_call_fills_from_elsewhere_is_not_none_on_xpu(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/workspace.py": WORKSPACE.replace("{probe}", "fused_allreduce_norm"),
                              "app/layers.py": LAYERS,
                              "app/other.py": "from app.layers import Layer\n\ndef build(ws):\n"
                                              "    return Layer(workspace=ws)\n"})
    assert got["fused_allreduce_norm"].reached


BUFFER = PLATFORM + """
    import torch

    def fused_decode_supported():
        return {test}

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            weight = None
            if fused_decode_supported():
                weight = torch.empty(3, 4)
            self.register_buffer("decode_weight", weight, persistent=False)

        def forward(self, x):
            if self.decode_weight is not None:
                return torch.ops._C.fused_decode(x, self.decode_weight)
            return x
    """


def test_a_buffer_registered_as_none_on_xpu_keeps_the_call_behind_its_check_off_xpu(tmp_path: Path) -> None:
    test = 'hasattr(torch.ops._C, "fused_decode") and current_platform.has_device_capability(90)'
    got = reach_of(tmp_path, {"app/decoder.py": BUFFER.replace("{test}", test)})
    assert not got["fused_decode"].reached
    assert "self.decode_weight is not None" in got["fused_decode"].why


def test_a_buffer_registered_with_a_tensor_on_xpu_keeps_the_call_reported(tmp_path: Path) -> None:
    test = 'hasattr(torch.ops._C, "defined_op") and current_platform.device_type == "xpu"'
    got = reach_of(tmp_path, {"app/decoder.py": BUFFER.replace("{test}", test)}, defined=("defined_op",))
    assert got["fused_decode"].reached


BACKENDS = {
    "app/platform_enum.py": "import enum\n\nclass PlatformEnum(enum.Enum):\n    CUDA = 1\n    XPU = 2\n",
    "app/attention/backend.py": """
        class AttentionBackend:
            supported_kv_cache_dtypes = ["auto", "float16", "bfloat16"]
        """,
    "app/attention/registry.py": """
        import enum

        class AttentionBackendEnum(enum.Enum):
            FLASH_ATTN = "app.attention.flash.FlashBackend"
            TRITON_MLA = "app.attention.triton_mla.TritonMLABackend"
            SPARSE_MLA = "app.attention.sparse.SparseMLABackend"
        """,
    "app/attention/flash.py": "from app.attention.backend import AttentionBackend\n\n"
                              "class FlashBackend(AttentionBackend):\n    pass\n",
    "app/attention/triton_mla.py": "from app.attention.backend import AttentionBackend\n\n"
                                   "class TritonMLABackend(AttentionBackend):\n"
                                   "    supported_kv_cache_dtypes = ['auto', 'bfloat16', 'fp8', 'fp8_e4m3']\n",
    "app/attention/sparse.py": "from app.attention.backend import AttentionBackend\n\n"
                               "class SparseMLABackend(AttentionBackend):\n"
                               "    supported_kv_cache_dtypes = ['auto', 'fp8_ds_mla']\n",
    "app/attention/mla.py": """
        import torch

        class MLAAttention:
            def __init__(self, kv_cache_dtype):
                self.kv_cache_dtype = kv_cache_dtype

            def forward(self, q):
                if self.kv_cache_dtype == "fp8_ds_mla":
                    torch.ops._C.ds_mla_insert(q)
                elif self.kv_cache_dtype in ("fp8", "fp8_e4m3"):
                    torch.ops._C.fp8_mla_insert(q)
                else:
                    torch.ops._C.bf16_mla_insert(q)
        """,
}
XPU_PLATFORM = """
    from app.attention.registry import AttentionBackendEnum
    from app.platform_enum import PlatformEnum

    class XPUPlatform:
        _enum = PlatformEnum.XPU

        @classmethod
        def get_attn_backend_cls(cls, selected, use_mla):
            if use_mla:
                if selected == AttentionBackendEnum.TRITON_MLA:
                    return AttentionBackendEnum.TRITON_MLA.get_path()
                return "app.attention.triton_mla.TritonMLABackend"
            return AttentionBackendEnum.FLASH_ATTN.get_path()
    """


def test_a_kv_cache_dtype_no_attention_backend_of_the_xpu_platform_takes_keeps_its_branch_off_xpu(
        tmp_path: Path) -> None:
    got = reach_of(tmp_path, {**BACKENDS, "app/xpu_platform.py": XPU_PLATFORM})
    assert not got["ds_mla_insert"].reached
    assert "kv_cache_dtype 'fp8_ds_mla'" in got["ds_mla_insert"].why
    assert "app/xpu_platform.py:9 get_attn_backend_cls" in got["ds_mla_insert"].why
    assert got["fp8_mla_insert"].reached and got["bf16_mla_insert"].reached


def test_a_kv_cache_dtype_an_xpu_backend_takes_keeps_its_branch_reported(tmp_path: Path) -> None:
    platform = XPU_PLATFORM.replace("AttentionBackendEnum.TRITON_MLA.get_path()",
                                    "AttentionBackendEnum.SPARSE_MLA.get_path()")
    got = reach_of(tmp_path, {**BACKENDS, "app/xpu_platform.py": platform})
    assert got["ds_mla_insert"].reached


def test_an_xpu_backend_whose_dtypes_are_not_literal_leaves_every_cache_dtype_branch_reported(tmp_path: Path) -> None:
    files = {**BACKENDS, "app/xpu_platform.py": XPU_PLATFORM,
             "app/attention/flash.py": "from app.attention.backend import AttentionBackend\n\n"
                                       "class FlashBackend(AttentionBackend):\n"
                                       "    supported_kv_cache_dtypes = list_dtypes()\n"}
    got = reach_of(tmp_path, files)
    assert got["ds_mla_insert"].reached


def test_a_backend_a_factory_makes_from_others_takes_at_most_their_dtypes(tmp_path: Path) -> None:
    made = "from app.attention.sparse import SparseMLABackend\nfrom app.attention.flash import FlashBackend\n\n" \
           "def combine(a, b, name):\n    return a\n\n" \
           "ComboBackend = combine(FlashBackend, {other}, name='combo')\n"
    platform = XPU_PLATFORM.replace('"app.attention.triton_mla.TritonMLABackend"', '"app.attention.combo.ComboBackend"')
    got = reach_of(tmp_path, {**BACKENDS, "app/xpu_platform.py": platform,
                              "app/attention/combo.py": made.replace("{other}", "FlashBackend")})
    assert not got["ds_mla_insert"].reached
    got = reach_of(tmp_path / "with_sparse", {**BACKENDS, "app/xpu_platform.py": platform,
                                              "app/attention/combo.py": made.replace("{other}", "SparseMLABackend")})
    assert got["ds_mla_insert"].reached


def test_a_buffer_kept_none_by_a_version_number_a_function_returns_on_xpu_keeps_its_call_off_xpu(
        tmp_path: Path) -> None:
    arch = PLATFORM + """
        def get_arch_version():
            if current_platform.is_rocm() and current_platform.on_gfx950():
                return 4
            return {fallback}
        """
    decoder = BUFFER.replace("{test}", "get_arch_version() >= 4").replace(
        "    import torch\n", "    import torch\n    from app.arch import get_arch_version\n", 1)
    got = reach_of(tmp_path, {"app/arch.py": arch.replace("{fallback}", "0"), "app/decoder.py": decoder})
    assert not got["fused_decode"].reached and "self.decode_weight is not None" in got["fused_decode"].why
    got = reach_of(tmp_path / "unknown", {"app/arch.py": arch.replace("{fallback}", "read_arch()"),
                                          "app/decoder.py": decoder})
    assert got["fused_decode"].reached
