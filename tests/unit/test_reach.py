"""The XPU reachability model (kpatch.verify.contract.reach) on small synthetic applications: each platform-dispatch
pattern vLLM uses, in both directions (the call is dismissed with its evidence, or still reported)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from kpatch.verify.contract import pycalls
from kpatch.verify.contract.reach import Reach, Verdict

PLATFORM = "from app.platforms import current_platform\n"


def reach_of(root: Path, files: dict[str, str], defined: tuple[str, ...] = ()) -> dict[str, Verdict]:
    """Write an `app` package (every folder gets an __init__.py) and say, per op called, whether XPU runs it."""
    for rel, text in {"app/platforms.py": "current_platform = None\n", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            if str(parent) != "." and not (root / parent / "__init__.py").exists():
                (root / parent / "__init__.py").write_text("")
        path.write_text(PLATFORM + textwrap.dedent(text[len(PLATFORM):]) if text.startswith(PLATFORM)
                        else textwrap.dedent(text))
    sites, broken = pycalls.call_sites(root, packages=("app",))
    assert broken == []
    model = Reach(root, pycalls.package_files(root, ("app",)), lambda ns, op: op in defined)
    return {s.op: model.site(s.file, s.line, s.op) for s in sites if not s.probe and s.namespace != "vllm"}


def test_a_tensor_device_guard_one_call_up_keeps_the_cuda_helper_off_xpu(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/ops.py": """
        import torch

        def penalties_cuda(x):
            torch.ops._C.penalties_(x)

        def any_device_cuda(x):
            torch.ops._C.any_device(x)

        def penalties(x):
            if x.is_cuda and x.is_contiguous():
                penalties_cuda(x)
            else:
                x.mul_(2)
            any_device_cuda(x)
        """, "app/use.py": "from app.ops import penalties\n\ndef run(x):\n    penalties(x)\n"})
    assert not got["penalties_"].reached and "app/ops.py:11" in got["penalties_"].why
    assert "x.is_cuda" in got["penalties_"].why
    assert got["any_device"].reached


def test_a_platform_flag_stored_at_init_keeps_its_branch_off_xpu(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/embed.py": PLATFORM + """
        import torch

        class Embedding:
            def __init__(self, tp):
                self.use_fused = tp > 1 and current_platform.is_cuda()
                self.use_other = tp > 1

            def forward(self, x):
                if self.use_fused:
                    torch.ops._C.fused_embedding(x)
                if self.use_other:
                    torch.ops._C.other_embedding(x)
        """})
    assert not got["fused_embedding"].reached and "self.use_fused" in got["fused_embedding"].why
    assert got["other_embedding"].reached


def test_a_flag_other_code_may_set_on_the_object_is_not_trusted(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/embed.py": PLATFORM + """
        import torch

        class Embedding:
            def __init__(self):
                self.use_fused = current_platform.is_cuda()

            def forward(self, x):
                if self.use_fused:
                    torch.ops._C.fused_embedding(x)
        """, "app/tune.py": "def tune(layer):\n    layer.use_fused = True\n"})
    assert got["fused_embedding"].reached


def test_a_capability_check_is_false_on_xpu_where_get_device_capability_is_none(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/gemm.py": PLATFORM + """
        import torch

        def gemm(x):
            cap = current_platform.get_device_capability()
            if cap is not None and cap.major >= 9:
                torch.ops._C.sm90_gemm(x)
            if cap is None or cap.major < 9:
                torch.ops._C.fallback_gemm(x)
            if current_platform.has_device_capability(100):
                torch.ops._C.sm100_gemm(x)
        """, "app/run.py": "from app.gemm import gemm\n\ngemm(1)\n"})
    assert not got["sm90_gemm"].reached and not got["sm100_gemm"].reached
    assert got["fallback_gemm"].reached


def test_a_hasattr_probe_one_call_away_dismisses_only_ops_the_kernels_do_not_define(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/decode.py": PLATFORM + """
        import torch

        def supports_fused():
            return current_platform.is_rocm() or hasattr(torch.ops._C, "fused_decode")

        def supports_defined():
            if not hasattr(torch.ops._C, "defined_decode"):
                return False
            return True

        def decode(x):
            if supports_fused():
                torch.ops._C.fused_decode(x)
            if supports_defined():
                torch.ops._C.defined_decode(x)
        """, "app/run.py": "from app.decode import decode\n\ndecode(1)\n"}, defined=("defined_decode",))
    assert not got["fused_decode"].reached and "supports_fused()" in got["fused_decode"].why
    assert got["defined_decode"].reached  # defined (e.g. without an XPU kernel): the probe passes on XPU


def test_a_custom_op_runs_forward_xpu_so_forward_cuda_is_reached_only_when_forward_xpu_calls_it(
        tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/custom_op.py": """
        class CustomOp:
            def forward_xpu(self, *args):
                return self.forward_native(*args)
        """, "app/layers.py": """
        import torch
        from app.custom_op import CustomOp

        class Rope(CustomOp):
            def forward_native(self, x):
                return x

            def forward_cuda(self, x):
                torch.ops._C.rope(x)

        class Norm(CustomOp):
            def forward_cuda(self, x):
                torch.ops._C.norm(x)

            def forward_xpu(self, x):
                if x.dtype is None:
                    return self.forward_cuda(x)
                return x
        """})
    assert not got["rope"].reached and "runs forward_xpu" in got["rope"].why
    assert got["norm"].reached


def test_an_xpu_subclass_overriding_the_calling_method_keeps_the_base_method_off_xpu(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/attention.py": """
        import torch

        class Attention:
            def insert(self, x):
                torch.ops._C.fused_insert(x)

            def other(self, x):
                torch.ops._C.fused_other(x)
        """, "app/xpu/attention.py": """
        from app.attention import Attention

        class XPUAttention(Attention):
            def insert(self, x):
                return x

            def other(self, x):
                return super().other(x)
        """})
    assert not got["fused_insert"].reached and "XPUAttention overrides insert" in got["fused_insert"].why
    assert got["fused_other"].reached


def test_a_backend_whose_supports_current_device_is_false_on_xpu_is_never_chosen(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/experts.py": PLATFORM + """
        import torch

        def triton_kernels_supported():
            if current_platform.is_cuda():
                return True
            if current_platform.is_rocm():
                return True
            return False

        class CudaExperts:
            @staticmethod
            def _supports_current_device():
                return triton_kernels_supported() and True

            def apply(self, x):
                torch.ops._C.cuda_experts(x)

        class AnyExperts:
            @staticmethod
            def _supports_current_device():
                return current_platform.is_cuda() or current_platform.is_xpu()

            def apply(self, x):
                torch.ops._C.any_experts(x)
        """})
    assert not got["cuda_experts"].reached and "_supports_current_device" in got["cuda_experts"].why
    assert got["any_experts"].reached


def test_a_module_imported_only_under_is_rocm_is_not_reached_but_one_imported_on_xpu_is(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/models/m/__init__.py": PLATFORM + """
        if current_platform.is_rocm():
            from .amd.model import Model
        elif current_platform.is_xpu():
            from .shared.model import Model
        else:
            from .nvidia.model import Model
        """,
        "app/models/m/amd/model.py": "import torch\n\nclass Model:\n    def forward(self, x):\n"
                                     "        torch.ops._C.amd_only(x)\n",
        "app/models/m/shared/model.py": "import torch\n\nclass Model:\n    def forward(self, x):\n"
                                        "        torch.ops._C.shared(x)\n",
        "app/models/m/nvidia/model.py": "import torch\n\nclass Model:\n    def forward(self, x):\n"
                                        "        torch.ops._C.nvidia_only(x)\n"})
    assert not got["amd_only"].reached and "is_rocm()" in got["amd_only"].why
    assert not got["nvidia_only"].reached
    assert got["shared"].reached


def test_an_unused_function_of_an_imported_module_is_not_reached_and_one_called_anywhere_is(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/act.py": """
        import torch

        def situ_quant(x):
            torch.ops._C.situ_quant(x)

        def silu_clamp(x):
            torch.ops._C.silu_clamp(x)
        """, "app/moe.py": "from app.act import silu_clamp\n\ndef experts(x):\n    return silu_clamp(x)\n"})
    assert not got["situ_quant"].reached and "nothing in the application uses situ_quant" in got["situ_quant"].why
    assert got["silu_clamp"].reached and "app/moe.py:4" in got["silu_clamp"].why


def test_a_function_in_a_module_nothing_imports_may_be_an_entry_point_so_it_is_reached(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/api.py": "import torch\n\ndef rms_norm(x):\n    torch.ops._C.rms_norm(x)\n"})
    assert got["rms_norm"].reached


def test_a_custom_op_registration_is_followed_through_torch_ops_vllm_and_its_hasattr_guard(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/xpu_ops.py": """
        import torch
        from app.utils import direct_register_custom_op

        def _gemma_impl(x):
            torch.ops._C.gemma_norm(x)

        def _input_norm_impl(x):
            torch.ops._xpu_C.input_norm(x)

        def register():
            if hasattr(torch.ops._C, "gemma_norm"):
                direct_register_custom_op(op_name="xpu_gemma", op_func=_gemma_impl)
            direct_register_custom_op(op_name="xpu_input_norm", op_func=_input_norm_impl)
        """, "app/utils.py": "def direct_register_custom_op(op_name, op_func):\n    pass\n",
        "app/layer.py": "import torch\n\ndef run(x):\n    return torch.ops.vllm.xpu_input_norm(x)\n"})
    assert not got["gemma_norm"].reached and "hasattr" in got["gemma_norm"].why
    assert got["input_norm"].reached and "torch.ops.vllm.xpu_input_norm" in got["input_norm"].why


def test_a_class_chosen_only_after_an_xpu_early_return_is_not_reached(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/quant.py": PLATFORM + """
        import torch

        class GenericMethod:
            def apply(self, x):
                torch.ops._C.generic(x)

        class CudaMethod:
            def apply(self, x):
                torch.ops._C.awq_gemm(x)

        def get_quant_method():
            if current_platform.is_cpu() or current_platform.is_xpu():
                return GenericMethod()
            return CudaMethod()
        """})
    assert not got["awq_gemm"].reached and "returns first" in got["awq_gemm"].why
    assert got["generic"].reached


def test_an_import_bound_only_off_xpu_makes_its_uses_unreached(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/custom_ops.py": "import torch\n\ndef reshape(x):\n    torch.ops._C.reshape(x)\n",
                              "app/xpu_ops.py": "def reshape(x):\n    return x\n",
                              "app/paged.py": PLATFORM + """
        if current_platform.is_cuda_alike():
            from app import custom_ops as ops
        elif current_platform.is_xpu():
            from app import xpu_ops as ops

        def write(x):
            ops.reshape(x)
        """})
    assert not got["reshape"].reached and "is_cuda_alike()" in got["reshape"].why


def test_a_class_named_in_a_registry_string_is_reached_though_the_code_naming_it_is_not(tmp_path: Path) -> None:
    backend = """
        import torch

        class {name}Impl:
            def forward(self, x):
                torch.ops._C.{op}(x)

        class {name}Backend:
            @staticmethod
            def get_impl_cls():
                return {name}Impl
        """
    rocm = """
        from app.backends.sparse import SparseBackend
        from app.backends.dense import DenseBackend

        class RocmSparse(SparseBackend):
            pass

        class RocmDense(DenseBackend):
            pass
        """
    got = reach_of(tmp_path, {"app/backends/sparse.py": backend.format(name="Sparse", op="concat_q"),
                              "app/backends/dense.py": backend.format(name="Dense", op="dense_q"),
                              "app/backends/rocm.py": rocm,
                              "app/registry.py": 'BACKENDS = {"SPARSE": "app.backends.sparse.SparseBackend"}\n',
                              "app/platform_init.py": PLATFORM + """
        if current_platform.is_rocm():
            from app.backends import rocm
        """})
    assert got["concat_q"].reached  # the registry names SparseBackend
    assert not got["dense_q"].reached and "is_rocm()" in got["dense_q"].why
