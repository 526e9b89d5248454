"""The Kimi-K3 MLA epilogue kernels, taken from the kernels patch file, run on a real SYCL device.

The header is read out of patches/vllm-xpu-kernels (no second copy in this repo), compiled at run time by
the SYCL kernel compiler behind thin free-function wrappers, launched on Intel's OpenCL CPU device through
tests/sycl/run_kernel.cpp, and compared with the PyTorch reference on the CPU: every element bit-exact, rotated
ones included (rounded as vLLM's CUDA build rounds them), every cache element not addressed by a valid slot
unchanged (poisoned first).
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from tests.sycl import kimi_k3_reference as ref
from tests.sycl.kimi_k3_harness import (
    POISON,
    SUFFIX,
    Case,
    Launcher,
    cases,
    check,
    check_untouched_rows,
    paged_cache,
    patch_file,
)
from tests.sycl.kimi_k3_harness import cos_sin as _cos_sin
from tests.sycl.kimi_k3_harness import poisoned as _poisoned
from tests.sycl.kimi_k3_harness import rand as _rand

HEADER = "csrc/kimi_k3_mla_epilogue.hpp"
MAX_POSITION = 300

WRAPPERS = r"""
namespace syclexp = sycl::ext::oneapi::experimental;
namespace kk = kimi_k3_mla;

#define KIMI_K3_WRAPPERS(T, SUFFIX)                                                                  \
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                          \
void kimi_prefill_##SUFFIX(T* q, int64_t q_tok, int64_t q_head, T* k_nope, int64_t kn_tok,           \
    int64_t kn_head, T* k_pe, int64_t kpe_tok, T* kv_c, int64_t kvc_tok, T* k_out, int64_t ko_tok,   \
    int64_t ko_head, T* cache, int64_t block_stride, int64_t entry_stride, int64_t block_size,       \
    int64_t* slots, int64_t* positions, float* cos_sin, int64_t cs_stride, int64_t num_tokens,      \
    int64_t num_heads) {                                                                             \
  kk::PrefillArgs<T> a{q, q_tok, q_head, k_nope, kn_tok, kn_head, k_pe, kpe_tok, kv_c, kvc_tok,      \
      k_out, ko_tok, ko_head, {cache, block_stride, entry_stride, block_size, slots},               \
      {positions, cos_sin, cs_stride}, num_tokens, num_heads};                                       \
  kk::prefill_item(a, sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_linear_id()); \
}                                                                                                    \
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                          \
void kimi_decode_##SUFFIX(T* ql_nope, int64_t qn_tok, int64_t qn_head, T* q_pe, int64_t qpe_tok,    \
    int64_t qpe_head, T* kv_c, int64_t kvc_tok, T* k_pe, int64_t kpe_tok, T* mqa_q, int64_t mq_tok,  \
    int64_t mq_head, T* cache, int64_t block_stride, int64_t entry_stride, int64_t block_size,       \
    int64_t* slots, int64_t* positions, float* cos_sin, int64_t cs_stride, int64_t num_tokens,      \
    int64_t num_heads) {                                                                             \
  kk::DecodeArgs<T> a{ql_nope, qn_tok, qn_head, q_pe, qpe_tok, qpe_head, kv_c, kvc_tok, k_pe,        \
      kpe_tok, mqa_q, mq_tok, mq_head, {cache, block_stride, entry_stride, block_size, slots},      \
      {positions, cos_sin, cs_stride}, num_tokens, num_heads};                                       \
  kk::decode_item(a, sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_linear_id());  \
}

KIMI_K3_WRAPPERS(sycl::ext::oneapi::bfloat16, bf16)
KIMI_K3_WRAPPERS(sycl::half, f16)
"""


def kernel_header() -> str:
    """The header exactly as the kernels patch stack creates it."""
    return patch_file(HEADER)


def _cache(case: Case, dtype: torch.dtype, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return paged_cache(case, dtype, 576, gen)


def _assert_the_issues_matrix(ran: list[Case]) -> None:
    """The kernels ran on every case the issue asks for: 24 cases, RoPE on and off in both layouts, block sizes
    1, 16 and 64."""
    assert len(ran) == 24
    assert {c.block_size for c in ran} == {1, 16, 64} and {c.strided for c in ran} == {True, False}
    assert {(c.rope, c.strided) for c in ran} == {(r, s) for r in (True, False) for s in (True, False)}


def _check_untouched_rows(case: Case, cache_owner: torch.Tensor, slots: torch.Tensor) -> None:
    check_untouched_rows(case, cache_owner, 576, slots)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_prefill_kernel_matches_reference(dtype: torch.dtype, tmp_path: Path, run_kernel: Path,
                                          sycl_env: dict[str, str]) -> None:
    gen = torch.Generator().manual_seed(1234)
    launcher = Launcher(tmp_path)
    checks = []
    for case in cases():
        t, h = case.tokens, case.heads
        q_owner = _rand((t, h, 224 if case.strided else 192), dtype, gen)
        kvb = _rand((t, h, 256 if case.strided else 128), dtype, gen)
        kv_owner = _rand((t, 640 if case.strided else 576), dtype, gen)
        q, k_nope = q_owner[..., :192], kvb[..., :128]
        kv_c, k_pe = kv_owner[:, :512], kv_owner[:, 512:576]
        k_out = _poisoned((t, h, 192), dtype)
        cache, cache_owner, slots = _cache(case, dtype, gen)
        positions = torch.randint(0, MAX_POSITION, (t,), generator=gen) if case.rope else None
        cos_sin, cs_owner = _cos_sin(case.strided)
        expected = ref.prefill(q, k_nope, k_pe, kv_c, cache, slots,
                               positions, cos_sin if case.rope else None)
        expected_owner = cache_owner.clone()
        expected_owner[..., :576] = expected[2]
        q_before = q_owner.clone()
        launcher.launch(f"kimi_prefill_{SUFFIX[dtype]}", t * (h + 1) * 32, [
            launcher.buf(q, q_owner), q.stride(0), q.stride(1), launcher.buf(k_nope, kvb), k_nope.stride(0),
            k_nope.stride(1), launcher.buf(k_pe, kv_owner), k_pe.stride(0), launcher.buf(kv_c, kv_owner),
            kv_c.stride(0), launcher.buf(k_out), k_out.stride(0), k_out.stride(1),
            launcher.buf(cache, cache_owner), cache.stride(0), cache.stride(1), case.block_size,
            launcher.buf(slots), launcher.buf(positions), launcher.buf(cos_sin, cs_owner) if case.rope else "null",
            cos_sin.stride(0), t, h])
        checks.append((case, q_owner, q_before, expected, k_out, cache_owner, expected_owner, slots))
    device = launcher.run(run_kernel, sycl_env, kernel_header() + WRAPPERS)
    assert "device_type cpu" in device.splitlines(), device  # the OpenCL CPU device, whoever made the CPU
    _assert_the_issues_matrix([check[0] for check in checks])
    for case, q_owner, q_before, expected, k_out, cache_owner, expected_owner, slots in checks:
        q_want = q_before.clone()
        q_want[..., :192] = expected[0]
        check(f"{case.id} q", q_owner, q_want)
        assert not (k_out.view(torch.int16) == POISON[dtype]).any(), f"{case.id}: k_out not fully written"
        check(f"{case.id} k_out", k_out, expected[1])
        check(f"{case.id} cache", cache_owner, expected_owner)
        _check_untouched_rows(case, cache_owner, slots)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_decode_kernel_matches_reference(dtype: torch.dtype, tmp_path: Path, run_kernel: Path,
                                         sycl_env: dict[str, str]) -> None:
    gen = torch.Generator().manual_seed(4321)
    launcher = Launcher(tmp_path)
    checks = []
    for case in cases():
        b, h = case.tokens, case.heads
        qn_owner = _rand((b, h, 576 if case.strided else 512), dtype, gen)
        qpe_owner = _rand((b, h, 192 if case.strided else 64), dtype, gen)
        kv_owner = _rand((b, 640 if case.strided else 576), dtype, gen)
        ql_nope = qn_owner[..., :512]
        q_pe = qpe_owner[..., 128:] if case.strided else qpe_owner
        kv_c, k_pe = kv_owner[:, :512], kv_owner[:, 512:576]
        mqa_q = _poisoned((b, h, 576), dtype)
        cache, cache_owner, slots = _cache(case, dtype, gen)
        positions = torch.randint(0, MAX_POSITION, (b,), generator=gen) if case.rope else None
        cos_sin, cs_owner = _cos_sin(case.strided)
        expected = ref.decode(ql_nope, q_pe, kv_c, k_pe, cache, slots, positions, cos_sin if case.rope else None)
        expected_owner = cache_owner.clone()
        expected_owner[..., :576] = expected[1]
        inputs_before = [qn_owner.clone(), qpe_owner.clone(), kv_owner.clone()]
        launcher.launch(f"kimi_decode_{SUFFIX[dtype]}", b * (h + 1) * 32, [
            launcher.buf(ql_nope, qn_owner), ql_nope.stride(0), ql_nope.stride(1), launcher.buf(q_pe, qpe_owner),
            q_pe.stride(0), q_pe.stride(1), launcher.buf(kv_c, kv_owner), kv_c.stride(0),
            launcher.buf(k_pe, kv_owner), k_pe.stride(0), launcher.buf(mqa_q), mqa_q.stride(0), mqa_q.stride(1),
            launcher.buf(cache, cache_owner), cache.stride(0), cache.stride(1), case.block_size,
            launcher.buf(slots), launcher.buf(positions), launcher.buf(cos_sin, cs_owner) if case.rope else "null",
            cos_sin.stride(0), b, h])
        checks.append((case, mqa_q, expected, cache_owner, expected_owner, slots,
                       [qn_owner, qpe_owner, kv_owner], inputs_before))
    launcher.run(run_kernel, sycl_env, kernel_header() + WRAPPERS)
    _assert_the_issues_matrix([check[0] for check in checks])
    for case, mqa_q, expected, cache_owner, expected_owner, slots, inputs, before in checks:
        assert not (mqa_q.view(torch.int16) == POISON[dtype]).any(), f"{case.id}: mqa_q not fully written"
        check(f"{case.id} mqa_q", mqa_q, expected[0])
        check(f"{case.id} cache", cache_owner, expected_owner)
        _check_untouched_rows(case, cache_owner, slots)
        for got, want in zip(inputs, before, strict=True):
            check(f"{case.id} input changed", got, want)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_reference_equals_unfused_composition(dtype: torch.dtype) -> None:
    """The reference is itself checked: RoPE, then cat, then a concat_and_cache_mla-style insert."""
    gen = torch.Generator().manual_seed(7)
    for tokens, heads, block_size in ((1, 1, 1), (37, 8, 16), (256, 16, 64)):
        q = _rand((tokens, heads, 192), dtype, gen)
        k_nope = _rand((tokens, heads, 128), dtype, gen)
        kv = _rand((tokens, 576), dtype, gen)
        kv_c, k_pe = kv[:, :512], kv[:, 512:]
        blocks = math.ceil(2 * tokens / block_size) + 1
        cache = _rand((blocks, block_size, 576), dtype, gen)
        slots = torch.randperm(blocks * block_size, generator=gen)[:tokens]
        slots[3::7] = -1
        positions = torch.randint(0, MAX_POSITION, (tokens,), generator=gen)
        cos_sin, _ = _cos_sin(False)
        q_ref, k_out_ref, cache_ref = ref.prefill(q, k_nope, k_pe, kv_c, cache, slots, positions, cos_sin)
        q_pe_rot = ref.rotary_native(positions, q[..., 128:], cos_sin)
        k_pe_rot = ref.rotary_native(positions, k_pe, cos_sin)
        cache_unfused = cache.clone()
        ref.concat_and_cache_mla(kv_c, k_pe_rot, cache_unfused, slots)
        assert torch.equal(q_ref.view(torch.int16), torch.cat([q[..., :128], q_pe_rot], -1).view(torch.int16))
        k_out_unfused = torch.cat([k_nope, k_pe_rot[:, None, :].expand(tokens, heads, 64)], -1)
        assert torch.equal(k_out_ref.view(torch.int16), k_out_unfused.view(torch.int16))
        assert torch.equal(cache_ref.view(torch.int16), cache_unfused.view(torch.int16))
        ql_nope = _rand((tokens, heads, 512), dtype, gen)
        mqa_ref, _ = ref.decode(ql_nope, q[..., 128:], kv_c, k_pe, cache, slots, positions, cos_sin)
        assert torch.equal(mqa_ref.view(torch.int16), torch.cat([ql_nope, q_pe_rot], -1).view(torch.int16))


def _fp32_of(exact: Fraction) -> float:
    """`exact` rounded once to fp32, nearest even (subnormals included; no overflow in these inputs)."""
    if exact == 0:
        return 0.0
    exponent = max(math.floor(math.log2(abs(exact))), -126)
    while abs(exact) >= Fraction(2) ** (exponent + 1):
        exponent += 1
    while exponent > -126 and abs(exact) < Fraction(2) ** exponent:
        exponent -= 1
    ulp = Fraction(2) ** (exponent - 23)
    return float(round(exact / ulp) * ulp)  # round() of a Fraction is half-to-even; the product is an fp32 value


def test_fma_reference_rounds_once() -> None:
    """ref.fma_f32 equals the exactly computed fma rounded once to fp32, where float64 arithmetic rounds twice:
    a = 2^-24 (1 + 2^-23), b = 1 - 2^-23, c = 1 + 2^-23 make a * b + c = 1 + 2^-23 + 2^-24 - 2^-70, which rounds
    to the fp32 midpoint in float64 and then up (to even); the exact sum rounds down. Also 20k random triples
    with cancellation, and their negations."""
    one = 1.0
    a0, b0, c0 = 2.0 ** -24 * (one + 2.0 ** -23), one - 2.0 ** -23, one + 2.0 ** -23
    triple = [torch.tensor([v], dtype=torch.float32) for v in (a0, b0, c0)]
    assert float((triple[0].double() * triple[1].double() + triple[2].double()).float()) == one + 2.0 ** -22
    assert float(ref.fma_f32(*triple)) == one + 2.0 ** -23
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(20000, generator=gen) * torch.exp2(torch.randint(-30, 30, (20000,), generator=gen).float())
    b = torch.randn(20000, generator=gen)
    c = -(a * b) * (1 + torch.randn(20000, generator=gen) * 2.0 ** -20)  # near-cancellation: the low bits decide
    c[::4] = torch.randn(5000, generator=gen)
    a = torch.cat([a, -a, torch.tensor([one, 2.0 ** -24 * (one + 2.0 ** -23)])])
    b = torch.cat([b, b, torch.tensor([0.0, one - 2.0 ** -23])])
    c = torch.cat([c, -c, torch.tensor([-0.0, -(one + 2.0 ** -23)])])
    got = ref.fma_f32(a, b, c)
    triples = zip(a.tolist(), b.tolist(), c.tolist(), strict=True)
    want = [_fp32_of(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in triples]
    bad = [i for i, (g, w) in enumerate(zip(got.tolist(), want, strict=True)) if g != w]
    assert not bad, f"{len(bad)} wrong, first {a[bad[0]].item()!r} * {b[bad[0]].item()!r} + {c[bad[0]].item()!r}"
    assert math.copysign(1.0, got[-2].item()) == 1.0  # +0 * x + -0 is +0, as an fma gives it
