"""What the XPU platform selects, in the XPU reachability model (issue 41): an attention backend its selector never
returns, another platform's class, and a method whose every call by name is off XPU are not reached; each rule has
a case where it does not hold and the call stays reported."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_reach import PLATFORM, reach_of
from tests.unit.test_reach_guards import BACKENDS, XPU_PLATFORM

SPARSE = """
    import torch
    from app.attention.backend import AttentionBackend

    class SparseMLABackend(AttentionBackend):
        supported_kv_cache_dtypes = ['auto', 'fp8_ds_mla']

        @staticmethod
        def get_impl_cls():
            return SparseMLAImpl

    class SparseMLAImpl:
        def forward(self, q):
            torch.ops._C.sparse_gather(q)
    """


def test_an_attention_backend_the_xpu_selector_never_returns_keeps_its_impl_off_xpu(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {**BACKENDS, "app/attention/sparse.py": SPARSE, "app/xpu_platform.py": XPU_PLATFORM})
    verdict = got["sparse_gather"]
    assert not verdict.reached
    assert "app/attention/registry.py:7: SPARSE_MLA, an attention backend app/xpu_platform.py:9 get_attn_backend_cls" \
        in verdict.why


def test_a_backend_the_xpu_selector_returns_keeps_its_impl_reported(tmp_path: Path) -> None:
    platform = XPU_PLATFORM.replace("AttentionBackendEnum.TRITON_MLA.get_path()",
                                    "AttentionBackendEnum.SPARSE_MLA.get_path()")
    got = reach_of(tmp_path, {**BACKENDS, "app/attention/sparse.py": SPARSE, "app/xpu_platform.py": platform})
    assert got["sparse_gather"].reached


def test_a_backend_member_a_model_names_on_xpu_keeps_its_impl_reported_and_a_comparison_does_not(
        tmp_path: Path) -> None:
    model = PLATFORM + """
        from app.attention.registry import AttentionBackendEnum

        def pick(selected):
            if selected == AttentionBackendEnum.SPARSE_MLA:
                return None
            return AttentionBackendEnum.{use}.get_class()
        """
    files = {**BACKENDS, "app/attention/sparse.py": SPARSE, "app/xpu_platform.py": XPU_PLATFORM}
    got = reach_of(tmp_path, {**files, "app/models/model.py": model.replace("{use}", "FLASH_ATTN")})
    assert not got["sparse_gather"].reached
    got = reach_of(tmp_path / "named", {**files, "app/models/model.py": model.replace("{use}", "SPARSE_MLA")})
    assert got["sparse_gather"].reached


def test_a_backend_path_also_quoted_in_a_registry_keeps_its_impl_reported(tmp_path: Path) -> None:
    registry = 'BACKENDS = {"sparse": "app.attention.sparse.SparseMLABackend"}\n'
    got = reach_of(tmp_path, {**BACKENDS, "app/attention/sparse.py": SPARSE, "app/xpu_platform.py": XPU_PLATFORM,
                              "app/plugins.py": registry})
    assert got["sparse_gather"].reached


CUDA_PLATFORM = """
    import torch
    from app.platform_enum import PlatformEnum

    class CudaPlatformBase:
        _enum = PlatformEnum.CUDA

        @classmethod
        def warm_up(cls, x):
            torch.ops._C.cuda_warm_up(x)

    class CudaPlatform(CudaPlatformBase):
        pass
    """


def test_a_method_of_another_platforms_class_is_off_xpu(tmp_path: Path) -> None:
    use = PLATFORM + "\ndef run(x):\n    current_platform.warm_up(x)\n"
    got = reach_of(tmp_path, {**BACKENDS, "app/cuda.py": CUDA_PLATFORM, "app/use.py": use})
    assert not got["cuda_warm_up"].reached
    assert "app/cuda.py:6: PlatformEnum.CUDA: CudaPlatformBase.warm_up is another platform's" in got["cuda_warm_up"].why


def test_a_method_of_another_platforms_class_called_through_that_class_is_reported(tmp_path: Path) -> None:
    use = "from app.cuda import CudaPlatform\n\ndef run(x):\n    CudaPlatform.warm_up(x)\n"
    got = reach_of(tmp_path, {**BACKENDS, "app/cuda.py": CUDA_PLATFORM, "app/use.py": use})
    assert got["cuda_warm_up"].reached


def test_a_method_of_another_platforms_class_named_through_it_only_in_a_docstring_or_comment_is_off_xpu(
        tmp_path: Path) -> None:
    use = PLATFORM + '\ndef run(x):\n    """Picked as CudaPlatform.warm_up picks it."""\n' \
        '    current_platform.warm_up(x)  # see CudaPlatform.warm_up\n'
    got = reach_of(tmp_path, {**BACKENDS, "app/cuda.py": CUDA_PLATFORM, "app/use.py": use})
    assert not got["cuda_warm_up"].reached
    assert "CudaPlatformBase.warm_up is another platform's" in got["cuda_warm_up"].why


def test_a_method_of_another_platforms_class_named_through_it_in_a_string_the_code_uses_is_reported(
        tmp_path: Path) -> None:
    use = PLATFORM + '\nHOOK = "app.cuda.CudaPlatform.warm_up"\n\ndef run(x):\n    current_platform.warm_up(x)\n'
    got = reach_of(tmp_path, {**BACKENDS, "app/cuda.py": CUDA_PLATFORM, "app/use.py": use})
    assert got["cuda_warm_up"].reached


GROUP = """
    import torch

    class Group:
        def gather_fp8(self, x):
            torch.ops._C.gather_fp8(x)
    """
USE = PLATFORM + """
    from app.group import Group

    def run(x):
        group = Group()
        if current_platform.is_cuda():
            group.gather_fp8(x)
        {more}
    """


def test_a_method_every_call_of_which_by_name_is_off_xpu_is_off_xpu(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/group.py": GROUP, "app/use.py": USE.replace("{more}", "")})
    assert not got["gather_fp8"].reached
    assert "Group.gather_fp8 is used only where XPU does not run: app/use.py:8" in got["gather_fp8"].why


def test_a_method_one_call_of_which_by_name_xpu_runs_is_reported(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/group.py": GROUP, "app/use.py": USE.replace("{more}", "group.gather_fp8(x)")})
    assert got["gather_fp8"].reached


def test_a_method_named_in_quotes_may_be_called_by_getattr_so_it_is_reported(tmp_path: Path) -> None:
    more = 'getattr(group, "gather_fp8")(x)'
    got = reach_of(tmp_path, {"app/group.py": GROUP, "app/use.py": USE.replace("{more}", more)})
    assert got["gather_fp8"].reached


def test_a_method_of_another_platforms_class_the_xpu_platform_inherits_is_reported(tmp_path: Path) -> None:
    xpu = "from app.cuda import CudaPlatformBase\nfrom app.platform_enum import PlatformEnum\n\n" \
          "class XPUPlatform(CudaPlatformBase):\n    _enum = PlatformEnum.XPU\n"
    use = PLATFORM + "\ndef run(x):\n    current_platform.warm_up(x)\n"
    got = reach_of(tmp_path, {**BACKENDS, "app/cuda.py": CUDA_PLATFORM, "app/xpu.py": xpu, "app/use.py": use})
    assert got["cuda_warm_up"].reached


ACTIVATION = """
    import torch

    def apply_activation(x, *, counts=None):
        if counts is not None:
            return _masked(x, counts)
        return x

    def _masked(x, counts):
        torch.ops._C.masked_act(x, counts)
    """
EXPERTS = PLATFORM + """
    from app.activation import apply_activation

    class Experts:
        def activation(self, x, *, counts=None):
            apply_activation(x, counts=counts)

    class Batched(Experts):
        def apply(self, x, n):
            if current_platform.is_xpu():
                {xpu}
            else:
                self.activation(x, counts=n)

    def run(x):
        Batched().apply(x, 1)
    """


def test_a_keyword_only_parameter_passed_only_where_xpu_does_not_run_is_none_on_xpu(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/activation.py": ACTIVATION,
                              "app/experts.py": EXPERTS.replace("{xpu}", "self.activation(x)")})
    verdict = got["masked_act"]
    assert not verdict.reached
    assert "every call of activation that passes counts is off XPU or passes None: app/experts.py:14 (not reached " \
           "on XPU)" in verdict.why


def test_a_keyword_only_parameter_the_xpu_branch_passes_keeps_its_call_reported(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/activation.py": ACTIVATION,
                              "app/experts.py": EXPERTS.replace("{xpu}", "self.activation(x, counts=n)")})
    assert got["masked_act"].reached


def test_a_keyword_spread_from_a_dict_on_xpu_keeps_its_call_reported(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/activation.py": ACTIVATION,
                              "app/experts.py": EXPERTS.replace("{xpu}", "self.activation(x, **{'counts': n})")})
    assert got["masked_act"].reached


def test_a_method_passed_on_as_a_value_may_get_the_keyword_unseen_so_its_call_is_reported(tmp_path: Path) -> None:
    xpu = "run_later(self.activation)"
    got = reach_of(tmp_path, {"app/activation.py": ACTIVATION, "app/experts.py": EXPERTS.replace("{xpu}", xpu)})
    assert got["masked_act"].reached


def test_another_objects_attribute_of_the_methods_name_is_taken_for_data_and_keeps_the_keyword_none(
        tmp_path: Path) -> None:
    layer = "def describe(layer):\n    return str(layer.activation)\n"
    got = reach_of(tmp_path, {"app/activation.py": ACTIVATION, "app/layer.py": layer,
                              "app/experts.py": EXPERTS.replace("{xpu}", "self.activation(x)")})
    assert not got["masked_act"].reached


def test_a_method_got_by_getattr_on_self_may_get_the_keyword_unseen_so_its_call_is_reported(tmp_path: Path) -> None:
    xpu = 'getattr(self, "activation")(x, **kwargs)'
    got = reach_of(tmp_path, {"app/activation.py": ACTIVATION, "app/experts.py": EXPERTS.replace("{xpu}", xpu)})
    assert got["masked_act"].reached


def test_a_method_torch_calls_by_name_is_reported_though_its_one_call_in_the_application_is_off_xpu(
        tmp_path: Path) -> None:
    group = GROUP.replace("gather_fp8(self", "backward(self")
    use = USE.replace("group.gather_fp8(x)", "group.backward(x)").replace("{more}", "")
    got = reach_of(tmp_path, {"app/group.py": group, "app/use.py": use})
    assert got["gather_fp8"].reached


ATTENTION = """
    import torch

    class Attention:
        def forward(self, x):
            return self._insert(x)

        def _insert(self, x):
            torch.ops._C.{op}(x)
    """


def test_the_path_of_a_method_called_by_name_goes_through_its_own_class_not_a_same_named_one_elsewhere(
        tmp_path: Path) -> None:
    got = reach_of(tmp_path, {"app/models/a_model/attention.py": ATTENTION.replace("{op}", "a_insert"),
                              "app/models/b_model/attention.py": ATTENTION.replace("{op}", "b_insert")})
    assert got["b_insert"].reached and got["a_insert"].reached
    assert got["b_insert"].why.startswith("app/models/b_model/attention.py:6: Attention._insert used here")
    assert "a_model" not in got["b_insert"].why


CPU_PLATFORM = """
    from app.platform_enum import PlatformEnum

    class CpuPlatform:
        _enum = PlatformEnum.CUDA

        @classmethod
        def get_communicator_cls(cls):
            return "app.comm.shm.ShmCommunicator"
    """
SHM = """
    import torch

    class ShmCommunicator:
        def all_reduce(self, x):
            torch.ops._C.shm_allreduce(x)
    """


def test_a_class_whose_path_in_quotes_only_another_platforms_method_returns_is_off_xpu(tmp_path: Path) -> None:
    got = reach_of(tmp_path, {**BACKENDS, "app/cpu.py": CPU_PLATFORM, "app/comm/shm.py": SHM})
    assert not got["shm_allreduce"].reached
    assert "class ShmCommunicator is used only where XPU does not run: app/cpu.py:9" in got["shm_allreduce"].why
    assert "CpuPlatform.get_communicator_cls is another platform's" in got["shm_allreduce"].why


def test_a_class_whose_path_in_quotes_code_xpu_runs_returns_or_writes_otherwise_is_reported(tmp_path: Path) -> None:
    xpu = CPU_PLATFORM.replace("CpuPlatform", "XPUPlatform").replace("PlatformEnum.CUDA", "PlatformEnum.XPU")
    got = reach_of(tmp_path, {**BACKENDS, "app/cpu.py": CPU_PLATFORM, "app/xpu.py": xpu, "app/comm/shm.py": SHM})
    assert got["shm_allreduce"].reached
    plugins = 'PLUGINS = ["app.comm.shm.ShmCommunicator.all_reduce"]\n'  # a longer name: how it is used is not read
    got = reach_of(tmp_path / "longer", {**BACKENDS, "app/cpu.py": CPU_PLATFORM, "app/comm/shm.py": SHM,
                                         "app/plugins.py": plugins})
    assert got["shm_allreduce"].reached
    named = 'import importlib\n\ndef load():\n    return getattr(importlib.import_module("app.comm.shm"), ' \
            '"ShmCommunicator")\n'
    got = reach_of(tmp_path / "named", {**BACKENDS, "app/cpu.py": CPU_PLATFORM, "app/comm/shm.py": SHM,
                                        "app/loader.py": named})
    assert got["shm_allreduce"].reached
