"""The XPU reachability model (kpatch.verify.contract.reach) on small synthetic applications: each platform-dispatch
pattern vLLM uses, in both directions (the call is dismissed with its evidence, or still reported)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

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


def test_torch_cuda_state_checks_are_false_on_xpu_but_the_same_check_of_torch_xpu_is_not(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/gemm.py": """
        import torch

        def project(x):
            if x.stride(0) == 1 and torch.cuda.is_current_stream_capturing():
                torch.ops._C.fused_a_gemm(x)
            if torch.xpu.is_current_stream_capturing():
                torch.ops._C.xpu_graph_gemm(x)
        """, "app/use.py": "from app.gemm import project\n\ndef run(x):\n    project(x)\n"})
    assert not got["fused_a_gemm"].reached
    assert "torch.cuda.is_current_stream_capturing()" in got["fused_a_gemm"].why
    assert got["xpu_graph_gemm"].reached


ROPE = """
    import torch

    def rope(q, head_size, offset=0, inverse=False):
        if offset == 0 and not inverse:
            torch.ops._C.rope(q, head_size)
        else:
            torch.ops._C.rope_offset(q, head_size, offset, inverse)
    """


def test_a_branch_on_a_parameter_is_reached_only_through_calls_that_can_take_it(tmp_path: Path) -> None:
    """Every call passes the defaults (or constants that keep them): the 4-argument form never runs."""
    got = reach_of(tmp_path, {"app/ops.py": ROPE, "app/use.py": """
        from app import ops

        def run(q):
            ops.rope(q, 64)
            ops.rope(q, 64, 0, inverse=False)
        """})
    assert got["rope"].reached
    assert not got["rope_offset"].reached
    why = got["rope_offset"].why
    assert why.startswith("app/ops.py:5: only if `offset == 0 and") and "is false, which no call of rope passes" in why
    assert "app/use.py:" in why and "+1 more" in why


def test_a_branch_on_a_parameter_is_reached_when_a_call_xpu_runs_passes_an_unknown_value(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/ops.py": ROPE, "app/use.py": """
        from app.ops import rope

        def run(q):
            rope(q, 64)

        def run_offset(q, inverse):
            rope(q, 64, offset=q.size(-1) - 64, inverse=inverse)
        """})
    assert got["rope_offset"].reached and "app/use.py:8" in got["rope_offset"].why


def test_a_branch_on_a_parameter_is_not_reached_when_the_only_call_passing_it_is_a_cuda_forward(
        tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/ops.py": ROPE, "app/custom_op.py": """
        class CustomOp:
            def forward_xpu(self, *args):
                return self.forward_native(*args)
        """, "app/layer.py": """
        from app import ops
        from app.custom_op import CustomOp

        class ScalingRope(CustomOp):
            def forward_native(self, q):
                ops.rope(q, 64)

            def forward_cuda(self, q):
                ops.rope(q, 64, offset=q.size(-1) - 64)
        """, "app/model.py": "from app.layer import ScalingRope\n\nLAYER = ScalingRope()\n"})
    assert got["rope"].reached
    assert not got["rope_offset"].reached and "does not call forward_cuda" in got["rope_offset"].why


TOPK = PLATFORM + """
    import torch

    class Topk:
        def __init__(self, backend):
            self._backend = backend
            self._is_cuda = current_platform.is_cuda()

        def _cooperative_constraints(self, rows):
            failures = []
            if not self._is_cuda:
                failures.append("requires CUDA")
            if rows > 64:
                failures.append("too many rows")
            return failures

        def _auto(self, rows):
            if not self._cooperative_constraints(rows):
                return "cooperative"
            if self._is_cuda:
                return "persistent"
            return "per_row"

        def resolve(self, rows):
            if self._backend == "auto":
                return self._auto(rows)
            failures = []
            if self._backend == "cooperative":
                failures = self._cooperative_constraints(rows)
            elif self._backend == "persistent":
                if not self._is_cuda:
                    failures.append("requires CUDA")
            if failures:
                raise RuntimeError("; ".join(failures))
            return self._backend

        def forward(self, x):
            backend = self.resolve(x.shape[0])
            if backend == "cooperative":
                torch.ops._C.cooperative_topk(x)
            elif backend == "persistent":
                torch.ops._C.persistent_topk(x)
            elif backend == "per_row":
                torch.ops._C.per_row_topk(x)
            elif backend == "radix":
                torch.ops._C.radix_topk(x)
    """


def test_a_backend_chosen_by_name_is_not_reached_when_every_way_to_choose_it_fails_on_xpu(tmp_path: Path) -> None:
    """`cooperative`: the auto chain needs an empty list of failures a platform check always fills; chosen by
    name, the same failures raise first. `per_row` is returned on XPU; `radix` may be configured by name and
    nothing stops it."""
    got = reach_of(tmp_path, {"app/topk.py": TOPK, "app/use.py": "from app.topk import Topk\n\nTOPK = Topk('auto')\n"})
    assert not got["cooperative_topk"].reached and "backend == 'cooperative'" in got["cooperative_topk"].why
    assert "app/topk.py:25: resolve never returns 'cooperative' on XPU" in got["cooperative_topk"].why
    assert not got["persistent_topk"].reached
    assert got["per_row_topk"].reached
    assert got["radix_topk"].reached


def test_a_list_of_failures_passed_to_a_helper_is_not_known_empty_or_full(tmp_path: Path) -> None:
    """`_settle(failures)` may empty the list a platform check filled: cooperative may be chosen again."""
    source = TOPK.replace("""            if rows > 64:
                failures.append("too many rows")
            return failures""", """            _settle(failures)
            return failures""")
    assert source != TOPK
    got = reach_of(tmp_path, {"app/topk.py": source + "\n\n    def _settle(failures):\n        failures.clear()\n",
                              "app/use.py": "from app.topk import Topk\n\nT = Topk('auto')\n"})
    assert got["cooperative_topk"].reached


def test_a_backend_name_a_platform_check_does_not_stop_stays_reached(tmp_path: Path) -> None:
    """The same selection with the CUDA requirement gone from `persistent`: it can be chosen by name on XPU."""
    source = TOPK.replace("""            elif self._backend == "persistent":
                if not self._is_cuda:
                    failures.append("requires CUDA")
""", "")
    assert source != TOPK
    got = reach_of(tmp_path, {"app/topk.py": source, "app/use.py": "from app.topk import Topk\n\nT = Topk('auto')\n"})
    assert not got["cooperative_topk"].reached
    assert got["persistent_topk"].reached


def test_a_kernel_listed_only_under_another_platform_in_a_platform_keyed_table_is_not_reached(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/kernels.py": """
        import torch

        class CPUKernel:
            def apply(self, x):
                torch.ops._C.onednn_quant(x)

        class TritonKernel:
            def apply(self, x):
                torch.ops._C.triton_helper(x)

        class SharedKernel:
            def apply(self, x):
                torch.ops._C.shared_helper(x)
        """, "app/choose.py": """
        from app.kernels import CPUKernel, SharedKernel, TritonKernel
        from app.platforms import PlatformEnum, current_platform

        KERNELS = {
            PlatformEnum.CPU: [CPUKernel, SharedKernel],
            PlatformEnum.XPU: [TritonKernel, SharedKernel],
        }

        def choose():
            return KERNELS[current_platform._enum]
        """})
    assert not got["onednn_quant"].reached
    assert "app/choose.py:6: listed only under PlatformEnum.CPU in a table keyed by platform" in got["onednn_quant"].why
    assert got["triton_helper"].reached and got["shared_helper"].reached


def test_a_backend_stored_at_init_that_is_always_the_fallback_on_xpu_keeps_the_fused_path_off_it(
        tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/kda.py": PLATFORM + """
        import torch

        def fused_supported(heads):
            if heads not in (12, 24) or not hasattr(torch.ops._C, "fused_decode"):
                return False
            return current_platform.is_device_capability(90)

        def resolve_decode_backend(backend, heads):
            if backend == "triton":
                return "triton"
            native = fused_supported(heads)
            if native and backend in ("auto", "native"):
                return "native"
            if backend == "native":
                raise RuntimeError("native decode needs CUDA")
            return "triton"

        def resolve_prefill_backend(backend):
            return backend

        class Attention:
            def __init__(self, backend, heads):
                self.decode_backend = resolve_decode_backend(backend, heads)
                self.prefill_backend = resolve_prefill_backend(backend)

            def forward(self, x):
                if self.decode_backend != "triton":
                    torch.ops._C.fused_decode(x)
                if self.prefill_backend != "triton":
                    torch.ops._C.fused_prefill(x)
        """, "app/model.py": "from app.kda import Attention\n\nLAYER = Attention('auto', 12)\n"})
    assert not got["fused_decode"].reached
    assert "resolve_decode_backend returns only 'triton' on XPU" in got["fused_decode"].why
    assert got["fused_prefill"].reached


KIMI = {"app/models/k/__init__.py": PLATFORM + """
        if current_platform.is_rocm():
            from .amd.model import K3Model

            ENTRY = K3Model
        elif current_platform.is_xpu():
            from .amd.linear import LinearModel

        __all__ = ["LinearModel"]
        """, "app/models/k/amd/model.py": """
        from app.models.k.amd.linear import LinearModel

        class K3Model:
            def build(self):
                return LinearModel()
        """, "app/models/k/amd/linear.py": """
        import torch

        class LinearModel:
            def forward(self, x):
                torch.ops._C.kda_decode(x)
        """}


@pytest.mark.parametrize(("registry", "reached"), [
    ('MODELS = {"LinearModel": ("app.models.k", "LinearModel")}\n', True),
    ('MODELS = {"LinearModel": ("app.models.other", "LinearModel")}\n', False),
])
def test_a_class_a_registry_imports_by_name_from_a_package_that_re_exports_it_on_xpu_is_reached(
        tmp_path: Path, registry: str, reached: bool) -> None:
    """vLLM's registry names ("vllm.models.kimi_k3", "KimiLinearForCausalLM"); the package imports that class
    under is_xpu(). Its other use (under is_rocm) does not count; a registry naming another package does not either."""
    got = reach_of(tmp_path, {**KIMI, "app/registry.py": registry})
    assert got["kda_decode"].reached is reached
    if not reached:
        assert "current_platform.is_rocm()" in got["kda_decode"].why


def test_a_call_after_a_platform_assert_in_its_function_is_not_reached_but_one_before_it_is(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/ops.py": PLATFORM + """
        import torch

        def mla_decode(x):
            torch.ops._C.before_assert(x)
            assert current_platform.is_cuda_alike(), "CUDA only"
            torch.ops._C.after_assert(x)

        def any_device(x):
            assert x.dim() == 2
            torch.ops._C.after_shape_assert(x)
        """, "app/use.py": "from app.ops import mla_decode, any_device\n\ndef run(x):\n    mla_decode(x)\n"
                           "    any_device(x)\n"})
    assert not got["after_assert"].reached
    assert "after `assert current_platform.is_cuda_alike()`, false on XPU" in got["after_assert"].why
    assert got["before_assert"].reached and got["after_shape_assert"].reached
