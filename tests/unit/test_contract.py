"""The contract's readers on real schema strings and small sources: schemas, C++ registrations, CMake, Python."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpatch.verify.contract import cmake, cpp, pycalls, schema
from kpatch.verify.contract.schema import DiffKind
from tests.support.kimi_schemas import kimi


def test_pr592_registration_without_defaults_is_a_breaking_difference() -> None:
    name = "fused_kimi_k3_mla_decode_q_concat_kv_cache_insert"
    declared = schema.parse(kimi(name))
    pr592 = schema.parse(kimi(name).replace("=None", ""))
    diffs = schema.compare(declared, pr592)
    assert [(d.kind, d.breaking) for d in diffs] == [(DiffKind.DEFAULT, True), (DiffKind.DEFAULT, True)]
    assert "arg 9 position_ids: default None vs none" in diffs[0].detail
    # vLLM's own calls pass all ten arguments, so they still bind; a call that leaves the RoPE pair out does not
    assert schema.binds(pr592, 10, ()) is None
    assert schema.binds(pr592, 8, ()) == ("leaves out position_ids, cos_sin_cache, which the schema gives no "
                                          "default")
    assert schema.binds(declared, 8, ()) is None


def test_schema_differences_by_kind() -> None:
    want = schema.parse("f(Tensor! a, Tensor? b, int n, float e=1e-6) -> Tensor")
    cases = {
        "f(Tensor a, Tensor? b, int n, float e=1e-6) -> Tensor": [(DiffKind.MUTABILITY, True)],
        "f(Tensor! a, Tensor b, int n, float e=1e-6) -> Tensor": [(DiffKind.OPTIONAL, True)],
        "f(Tensor! a, Tensor? b, SymInt n, float e=1e-6) -> Tensor": [(DiffKind.TYPE, True)],
        "f(Tensor! a, Tensor? c, int n, float e=1e-6) -> Tensor": [(DiffKind.NAME, False)],
        "f(Tensor! a, Tensor? b, int n, float e=0.000001) -> Tensor": [],  # the same value, spelt otherwise
        "f(Tensor! a, Tensor? b=None, int n, float e=1e-6) -> Tensor": [(DiffKind.DEFAULT, False)],
        "f(Tensor? b, Tensor! a, int n, float e=1e-6) -> Tensor": [(DiffKind.ORDER, True)],
        "f(Tensor! a, Tensor? b, int n) -> Tensor": [(DiffKind.ARITY, False)],
        "f(Tensor! a, Tensor? b, int n, float e=1e-6, bool x) -> Tensor": [(DiffKind.ARITY, True)],
        "f(Tensor! a, Tensor? b, int n, float e=1e-6, bool x=False) -> Tensor": [(DiffKind.ARITY, False)],
        "f(Tensor! a, Tensor? b, int n, *, float e=1e-6) -> Tensor": [(DiffKind.KWARG_ONLY, True)],
        "f(Tensor! a, Tensor? b, int n, float e=1e-6) -> (Tensor, Tensor)": [(DiffKind.RETURNS, True)],
    }
    for text, expected in cases.items():
        got = [(d.kind, d.breaking) for d in schema.compare(want, schema.parse(text))]
        if got and got[0][0] is DiffKind.ORDER:
            got = got[:1]  # after an order difference each argument is compared by name: nothing else differs
        assert got == expected, text


def test_torch_printed_schemas_and_odd_types_parse() -> None:
    printed = ("_C::f(Tensor($0! -> ) q, Tensor($1! -> )? r=None, (int, int)? g=None, int[2] s=[1, 2], "
               "str m=\"auto\", *, ScalarType? dt=None) -> (Tensor a, Tensor[] b)")
    written = ("f(Tensor! q, Tensor!? r=None, (int, int)? g=None, int[2] s=[1,2], str m='auto', *, "
               "ScalarType? dt=None) -> (Tensor a, Tensor[] b)")
    assert schema.compare(schema.parse(written), schema.parse(printed)) == []
    assert schema.parse(printed).args[-1].kwarg_only
    with pytest.raises(schema.SchemaSyntaxError, match="column"):
        schema.parse("f(Tensor q -> ()")


def test_cpp_registrations_per_library_and_key() -> None:
    source = '''
#include "ops.h"
// ops.def("commented_out(Tensor x) -> ()");
TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  /* ops.def("also_commented(Tensor x) -> ()"); */
  ops.def(
      "joined(Tensor! out, "   // the pieces join
      "str mode=\\"auto\\") -> ()");
  ops.impl("joined", torch::kXPU, &joined);
  ops.def("catch_all(int n) -> int", &catch_all);
  ops.def("tagged(Tensor x) -> ()", {stride_tag});
  ops.impl("tagged", c10::DispatchKey::CUDA, &tagged);
}
TORCH_LIBRARY_EXPAND(CONCAT(TORCH_EXTENSION_NAME, _cache_ops), cache_ops) {
  cache_ops.def("swap(Tensor a) -> ()");
  cache_ops.impl("swap", torch::kCPU, &swap);
}
STABLE_TORCH_LIBRARY_IMPL(_C, CompositeExplicitAutograd, m) {
  m.impl("tagged", TORCH_BOX(&tagged));
}
'''
    found = cpp.registrations(source, "csrc/b.cpp", ("_C",))
    assert [(d.namespace, d.schema, d.line) for d in found.definitions] == [
        ("_C", 'joined(Tensor! out, str mode="auto") -> ()', 7),  # the line naming the op
        ("_C", "catch_all(int n) -> int", 10), ("_C", "tagged(Tensor x) -> ()", 11),
        ("_C_cache_ops", "swap(Tensor a) -> ()", 15)]
    assert [(i.namespace, i.op, i.key) for i in found.implementations] == [
        ("_C", "joined", "XPU"), ("_C", "catch_all", "CompositeImplicitAutograd"), ("_C", "tagged", "CUDA"),
        ("_C_cache_ops", "swap", "CPU"), ("_C", "tagged", "CompositeExplicitAutograd")]
    unknown = cpp.registrations(source, "csrc/b.cpp", ())
    assert unknown.unresolved == ("csrc/b.cpp:4", "csrc/b.cpp:14")


def test_cmake_maps_sources_to_extension_targets(tmp_path: Path) -> None:
    (tmp_path / "cmake").mkdir()
    (tmp_path / "csrc" / "moe").mkdir(parents=True)
    for name in ("a.cpp", "b.cpp", "moe/m1.cpp", "moe/m2.cpp"):
        (tmp_path / "csrc" / name).write_text("")
    (tmp_path / "CMakeLists.txt").write_text(
        'set(EXT_SRC\n  "csrc/a.cpp")  # a comment with "csrc/b.cpp"\nif(X)\n  list(APPEND EXT_SRC "csrc/b.cpp")\n'
        "endif()\ndefine_gpu_extension_target(\n  _C\n  DESTINATION pkg\n  SOURCES ${EXT_SRC}\n  USE_SABI 3)\n"
        "include(${CMAKE_CURRENT_LIST_DIR}/cmake/moe.cmake)\n")
    (tmp_path / "cmake" / "moe.cmake").write_text(
        'file(GLOB MOE_SRC "csrc/moe/*.cpp")\ndefine_extension_target(_moe_C SOURCES ${MOE_SRC} WITH_SOABI)\n')
    assert cmake.extension_targets(tmp_path) == {"csrc/a.cpp": ("_C",), "csrc/b.cpp": ("_C",),
                                                 "csrc/moe/m1.cpp": ("_moe_C",), "csrc/moe/m2.cpp": ("_moe_C",)}


def test_python_call_sites_aliases_probes_and_platform_branches(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "ops.py").write_text('''import torch as th
from vllm.platforms import current_platform

ops = th.ops._C


def a(x):
    th.ops._C.plain(x, 1, mode="m")
    ops.aliased(*x)
    if hasattr(th.ops._C, "probed"):
        th.ops._C.probed(x)
    th.ops._C_cache_ops.cached.default(x)


def b(x):
    if current_platform.is_xpu():
        th.ops._C.on_xpu(x)
    else:
        th.ops._C.off_in_else(x)
    if current_platform.is_cuda():
        th.ops._C.off_in_cuda_branch(x)
    if x and current_platform.is_xpu():
        pass
    elif x:
        th.ops._C.off_in_elif(x)
    if current_platform.is_xpu():
        return th.ops._C.on_xpu_return(x)
    th.ops._C.off_after_return(x)
''')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_x.py").write_text("import torch\ntorch.ops._C.from_a_test()\n")
    sites, broken = pycalls.call_sites(tmp_path)
    assert broken == []
    got = {s.op: (s.namespace, s.line, s.probe, s.off_xpu, s.positional, s.keywords) for s in sites}
    assert got["plain"] == ("_C", 8, False, False, 2, ("mode",))
    assert got["aliased"] == ("_C", 9, False, False, None, ())
    assert got["probed"][2] is False and [s.probe for s in sites if s.op == "probed"] == [True, False]
    assert got["cached"] == ("_C_cache_ops", 12, False, False, 1, ())
    assert not got["on_xpu"][3] and not got["on_xpu_return"][3]
    assert all(got[op][3] for op in ("off_in_else", "off_in_cuda_branch", "off_in_elif", "off_after_return"))
    assert "from_a_test" not in got and {s.module for s in sites} == {"pkg.ops"}
