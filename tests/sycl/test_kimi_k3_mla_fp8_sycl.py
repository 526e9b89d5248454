"""The Kimi-K3 MLA fp8-cache kernels (prefill q/k/v quant + cache insert, decode mqa_q + cache insert), taken from
the kernels patch file, run on a real SYCL device against the PyTorch reference: every E4M3 byte bit-exact.

The inputs carry planted rounding ties, +-448 boundary values, subnormals, NaN and inf; a third of the RoPE tokens
sit at position 0 (cos 1, sin 0), so ties reach the rotated elements too. The quantisers themselves are also run
over every bf16 and fp16 bit pattern.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.sycl import kimi_k3_fp8_reference as fp8
from tests.sycl import kimi_k3_reference as ref
from tests.sycl.kimi_k3_harness import (
    FINITE_SPECIALS,
    INFINITE_SPECIALS,
    MAX_POSITION,
    SUFFIX,
    Case,
    Launcher,
    cases,
    check,
    check_untouched_rows,
    cos_sin,
    is_poison,
    paged_cache,
    patch_file,
    plant,
    poisoned,
    rand,
    scalar,
)

HEADERS = ("csrc/kimi_k3_mla_epilogue.hpp", "csrc/kimi_k3_mla_fp8.hpp")
SPECIALS = FINITE_SPECIALS + INFINITE_SPECIALS

WRAPPERS = r"""
#include "kimi_k3_mla_fp8.hpp"
namespace syclexp = sycl::ext::oneapi::experimental;
namespace kk = kimi_k3_mla;
#define GID sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_linear_id()

#define FP8_WRAPPERS(T, SUFFIX)                                                                      \
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                          \
void fp8_prefill_##SUFFIX(T* q, int64_t q_tok, int64_t q_head, T* k_nope, int64_t kn_tok,            \
    int64_t kn_head, T* k_pe, int64_t kpe_tok, T* kv_c, int64_t kvc_tok, T* v, int64_t v_tok,        \
    int64_t v_head, uint8_t* q_fp8, int64_t qo_tok, int64_t qo_head, uint8_t* k_fp8, int64_t ko_tok, \
    int64_t ko_head, uint8_t* v_fp8, int64_t vo_tok, int64_t vo_head, uint8_t* cache,               \
    int64_t block_stride, int64_t entry_stride, int64_t block_size, int64_t* slots, float* qsi,     \
    float* ksi, float* vsi, float* csi, int64_t* positions, float* cos_sin, int64_t cs_stride,      \
    int64_t num_tokens, int64_t num_heads) {                                                         \
  kk::Fp8PrefillArgs<T> a{q, q_tok, q_head, k_nope, kn_tok, kn_head, k_pe, kpe_tok, kv_c, kvc_tok,   \
      v, v_tok, v_head, q_fp8, qo_tok, qo_head, k_fp8, ko_tok, ko_head, v_fp8, vo_tok, vo_head,      \
      {cache, block_stride, entry_stride, block_size, slots}, qsi, ksi, vsi, csi,                    \
      {positions, cos_sin, cs_stride}, num_tokens, num_heads};                                       \
  kk::fp8_prefill_item(a, GID);                                                                      \
}                                                                                                    \
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                          \
void fp8_decode_##SUFFIX(T* ql_nope, int64_t qn_tok, int64_t qn_head, T* q_pe, int64_t qpe_tok,     \
    int64_t qpe_head, T* kv_c, int64_t kvc_tok, T* k_pe, int64_t kpe_tok, uint8_t* mqa_q,            \
    int64_t mq_tok, int64_t mq_head, uint8_t* cache, int64_t block_stride, int64_t entry_stride,     \
    int64_t block_size, int64_t* slots, float* qsi, float* csi, int64_t* positions, float* cos_sin, \
    int64_t cs_stride, int64_t num_tokens, int64_t num_heads) {                                      \
  kk::Fp8DecodeArgs<T> a{ql_nope, qn_tok, qn_head, q_pe, qpe_tok, qpe_head, kv_c, kvc_tok, k_pe,     \
      kpe_tok, mqa_q, mq_tok, mq_head, {cache, block_stride, entry_stride, block_size, slots}, qsi,  \
      csi, {positions, cos_sin, cs_stride}, num_tokens, num_heads};                                  \
  kk::fp8_decode_item(a, GID);                                                                       \
}                                                                                                    \
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                          \
void quant_probe_##SUFFIX(T* x, uint8_t* sat, uint8_t* scaled, float* inv, uint8_t* tile,           \
    uint32_t* tile_scale, int64_t n) {                                                               \
  const int64_t i = GID;                                                                             \
  if (i >= n) return;                                                                                \
  const float f = static_cast<float>(x[i]);                                                          \
  sat[i] = kk::e4m3_satfinite(f);                                                                    \
  scaled[i] = kk::e4m3_scaled(f, *inv);                                                              \
  const kk::DsScale s = kk::ds_tile_scale(kk::bits_of(f) & kk::kF32Abs);                             \
  tile_scale[i] = s.bits;                                                                            \
  tile[i] = kk::e4m3_tile(1.0f, s);                                                                  \
}                                                                                                    \
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))                          \
void rope_probe_##SUFFIX(T* x, float* table, int64_t* positions, float* f32, uint8_t* e4m3,         \
    T* rounded, float* inv, int64_t rows) {                                                          \
  const int64_t row = GID / kk::kLanes;                                                              \
  const int lane = static_cast<int>(GID % kk::kLanes);                                               \
  if (row >= rows) return;                                                                           \
  const float* cs = table + positions[row] * kk::kRope;                                              \
  const int64_t at = row * kk::kRope;                                                                \
  kk::rotate_f32(x + at, lane, cs, f32[at + 2 * lane], f32[at + 2 * lane + 1]);                      \
  kk::quant_rope(e4m3 + at, x + at, cs, *inv, lane);                                                 \
  kk::rope_pair(rounded + at, x + at, lane, cs);                                                     \
}

FP8_WRAPPERS(sycl::ext::oneapi::bfloat16, bf16)
FP8_WRAPPERS(sycl::half, f16)
"""

DTYPES = pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
INVERSE_SCALES = (1.0, 2.0, 0.37)  # 1 is what vLLM passes for q/k/v; 0.37 is no power of two


def run(launcher: Launcher, run_kernel: Path, env: dict[str, str]) -> str:
    """Compile the wrappers against both headers exactly as the patch stack creates them, and run."""
    includes = {Path(name).name: patch_file(name) for name in HEADERS}
    return launcher.run(run_kernel, env, WRAPPERS, includes)


def positions_for(case: Case, gen: torch.Generator) -> torch.Tensor | None:
    if not case.rope:
        return None
    positions = torch.randint(0, MAX_POSITION, (case.tokens,), generator=gen)
    positions[::3] = 0  # the identity rotation: planted ties reach the rotated elements unchanged
    return positions


@DTYPES
def test_quantisers_match_reference_on_every_16bit_value(dtype: torch.dtype, tmp_path: Path, run_kernel: Path,
                                                         sycl_env: dict[str, str]) -> None:
    x = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(dtype)
    n = x.numel()
    sat, scaled, tile = (torch.zeros(n, dtype=torch.uint8) for _ in range(3))
    tile_scale = torch.zeros(n, dtype=torch.int32)
    launcher = Launcher(tmp_path)
    inv = scalar(0.37)
    launcher.launch(f"quant_probe_{SUFFIX[dtype]}", n, [launcher.buf(x), launcher.buf(sat), launcher.buf(scaled),
                                                        launcher.buf(inv), launcher.buf(tile),
                                                        launcher.buf(tile_scale), n])
    run(launcher, run_kernel, sycl_env)
    check("e4m3_satfinite", sat, fp8.e4m3_satfinite(x))
    check("e4m3_scaled", scaled, fp8.e4m3_scaled(x, inv))
    # ds_tile_scale takes |x| as a tile's absmax: one value per tile, so the reference tile is x and 127 zeros.
    finite = ~(x.float().isnan())
    want_scale = fp8.ds_tile_scales(torch.nn.functional.pad(x[:, None].float().abs(), (0, fp8.LORA - 1)))[:, 0]
    assert torch.equal(tile_scale[finite].view(torch.float32), want_scale[finite])
    want_tile = fp8.e4m3_satfinite(torch.ones(n) / want_scale)
    check("e4m3_tile(1)", tile[finite], want_tile[finite])


def rotation_inputs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x [rows, 64], positions [rows], table): 2M random rotated values, no identity rotation."""
    rows = 1 << 15
    gen = torch.Generator().manual_seed(64)
    x = rand((rows, 64), dtype, gen)
    positions = torch.randint(1, MAX_POSITION, (rows,), generator=gen)
    return x, positions, cos_sin(False)[0]


def form_differences(dtype: torch.dtype) -> dict[str, dict[str, int]]:
    """On rotation_inputs: how many fp32 values, rounded 16-bit values and E4M3 bytes of the unfused rotation and
    of the other contraction differ from CUDA's FMA form."""
    x, positions, table = rotation_inputs(dtype)
    rows = table[positions]
    forms = {form: ref.rope_f32(x, rows, form) for form in ("cuda", "unfused", "other")}
    result = {}
    for form in ("unfused", "other"):
        got, want = forms[form], forms["cuda"]
        result[form] = {
            "fp32": int((got.view(torch.int32) != want.view(torch.int32)).sum()),
            SUFFIX[dtype]: int((got.to(dtype).view(torch.int16) != want.to(dtype).view(torch.int16)).sum()),
            "e4m3": int((fp8.e4m3_scaled(got, scalar(1.0)) != fp8.e4m3_scaled(want, scalar(1.0))).sum()),
        }
    return result


@DTYPES
def test_rotation_is_cudas_fma_order_bit_for_bit(dtype: torch.dtype, tmp_path: Path, run_kernel: Path,
                                                 sycl_env: dict[str, str]) -> None:
    """2M rotated values: the fp32 rotation, its E4M3 bytes and its rounded 16-bit values equal CUDA's FMA form
    fma(x, c, -(y * s)), fma(x, s, y * c) bit for bit. On these inputs the unfused form and the other contraction
    differ from it in fp32 and in the rounded 16-bit values, so a kernel computing either fails here."""
    differences = form_differences(dtype)
    for form, counts in differences.items():
        assert counts["fp32"] > 0 and counts[SUFFIX[dtype]] > 0, f"the inputs do not tell {form} apart: {counts}"
    x, positions, table = rotation_inputs(dtype)
    rows = x.shape[0]
    f32 = torch.full((rows, 64), float("nan"))
    e4m3, rounded = poisoned((rows, 64), torch.uint8), poisoned((rows, 64), dtype)
    launcher = Launcher(tmp_path)
    launcher.launch(f"rope_probe_{SUFFIX[dtype]}", rows * 32, [
        launcher.buf(x), launcher.buf(table), launcher.buf(positions), launcher.buf(f32), launcher.buf(e4m3),
        launcher.buf(rounded), launcher.buf(scalar(1.0)), rows])
    run(launcher, run_kernel, sycl_env)
    rotated = fp8.rope_f32(x, table[positions])
    assert torch.equal(f32.view(torch.int32), rotated.view(torch.int32)), \
        f"{int((f32 != rotated).sum())} fp32 rotations differ from fma(x, c, -(y * s)), fma(x, s, y * c)"
    check("E4M3 of rotated values", e4m3, fp8.e4m3_scaled(rotated, scalar(1.0)))
    check("rounded rotated values", rounded, rotated.to(dtype))


@DTYPES
def test_fp8_prefill_kernel_matches_reference(dtype: torch.dtype, tmp_path: Path, run_kernel: Path,
                                              sycl_env: dict[str, str]) -> None:
    gen = torch.Generator().manual_seed(2024)
    launcher = Launcher(tmp_path)
    checks = []
    for index, case in enumerate(cases()):
        t, h = case.tokens, case.heads
        q_owner = plant(rand((t, h, 224 if case.strided else 192), dtype, gen), gen, SPECIALS)
        # vLLM's k_nope and v are the two halves of one kv_b_proj output.
        kvb = plant(rand((t, h, 256), dtype, gen), gen, SPECIALS)
        kv_owner = plant(rand((t, 640 if case.strided else 576), dtype, gen), gen, SPECIALS)
        q = q_owner[..., :192]
        k_nope, v = (kvb[..., :128], kvb[..., 128:]) if case.strided else (kvb[..., :128].clone(),
                                                                          kvb[..., 128:].clone())
        kv_c, k_pe = kv_owner[:, :512], kv_owner[:, 512:576]
        outs = [poisoned((t, h, 192), torch.uint8), poisoned((t, h, 192), torch.uint8),
                poisoned((t, h, 128), torch.uint8)]
        cache, cache_owner, slots = paged_cache(case, torch.uint8, 576, gen)
        scales = fp8.Scales(q=1.0, k=1.0, v=INVERSE_SCALES[index % 3], cache=INVERSE_SCALES[(index + 1) % 3])
        positions = positions_for(case, gen)
        table, table_owner = cos_sin(case.strided)
        want = fp8.fp8_prefill(q, k_nope, k_pe, kv_c, v, cache, slots, scales, positions,
                               table if case.rope else None)
        want_owner = cache_owner.clone()
        want_owner[..., :576] = want[3]
        inputs = [q_owner, k_nope, v, kv_owner]
        before = [x.clone() for x in inputs]
        launcher.launch(f"fp8_prefill_{SUFFIX[dtype]}", t * (h + 1) * 32, [
            launcher.buf(q, q_owner), q.stride(0), q.stride(1),
            launcher.buf(k_nope, kvb if case.strided else None), k_nope.stride(0), k_nope.stride(1),
            launcher.buf(k_pe, kv_owner), k_pe.stride(0), launcher.buf(kv_c, kv_owner), kv_c.stride(0),
            launcher.buf(v, kvb if case.strided else None), v.stride(0), v.stride(1),
            *[arg for out in outs for arg in (launcher.buf(out), out.stride(0), out.stride(1))],
            launcher.buf(cache, cache_owner), cache.stride(0), cache.stride(1), case.block_size,
            launcher.buf(slots), *[launcher.buf(scales.tensor(w)) for w in ("q", "k", "v", "cache")],
            launcher.buf(positions), launcher.buf(table, table_owner) if case.rope else "null", table.stride(0),
            t, h])
        checks.append((case, outs, want, cache_owner, want_owner, slots, inputs, before))
    run(launcher, run_kernel, sycl_env)
    for case, outs, want, cache_owner, want_owner, slots, inputs, before in checks:
        for name, got, expected in zip(("q_fp8", "k_fp8", "v_fp8"), outs, want[:3], strict=True):
            assert not is_poison(got).any(), f"{case.id}: {name} not fully written"
            check(f"{case.id} {name}", got, expected)
        check(f"{case.id} cache", cache_owner, want_owner)
        check_untouched_rows(case, cache_owner, 576, slots)
        for got, was in zip(inputs, before, strict=True):
            assert torch.equal(got.view(torch.int16), was.view(torch.int16)), f"{case.id}: an input was written"


@DTYPES
def test_fp8_decode_kernel_matches_reference(dtype: torch.dtype, tmp_path: Path, run_kernel: Path,
                                             sycl_env: dict[str, str]) -> None:
    gen = torch.Generator().manual_seed(4048)
    launcher = Launcher(tmp_path)
    checks = []
    for index, case in enumerate(cases()):
        b, h = case.tokens, case.heads
        if case.strided:
            # The absorbed query is the BMM output (N, B, L) transposed: head stride B*512 > token stride 512.
            qn_owner = plant(rand((h, b, 512), dtype, gen), gen, SPECIALS)
            ql_nope = qn_owner.transpose(0, 1)
        else:
            qn_owner = ql_nope = plant(rand((b, h, 512), dtype, gen), gen, SPECIALS)
        q_owner = plant(rand((b, h, 192), dtype, gen), gen, SPECIALS)  # q_pe is q[..., 128:]
        kv_owner = plant(rand((b, 640 if case.strided else 576), dtype, gen), gen, SPECIALS)
        q_pe = q_owner[..., 128:]
        kv_c, k_pe = kv_owner[:, :512], kv_owner[:, 512:576]
        mqa_q = poisoned((b, h, 576), torch.uint8)
        cache, cache_owner, slots = paged_cache(case, torch.uint8, 576, gen)
        q_inv, c_inv = INVERSE_SCALES[index % 3], INVERSE_SCALES[(index + 2) % 3]
        positions = positions_for(case, gen)
        table, table_owner = cos_sin(case.strided)
        want_q, want_cache = fp8.fp8_decode(ql_nope, q_pe, kv_c, k_pe, cache, slots, q_inv, c_inv, positions,
                                            table if case.rope else None)
        want_owner = cache_owner.clone()
        want_owner[..., :576] = want_cache
        inputs = [qn_owner, q_owner, kv_owner]
        before = [x.clone() for x in inputs]
        launcher.launch(f"fp8_decode_{SUFFIX[dtype]}", b * (h + 1) * 32, [
            launcher.buf(ql_nope, qn_owner), ql_nope.stride(0), ql_nope.stride(1),
            launcher.buf(q_pe, q_owner), q_pe.stride(0), q_pe.stride(1),
            launcher.buf(kv_c, kv_owner), kv_c.stride(0), launcher.buf(k_pe, kv_owner), k_pe.stride(0),
            launcher.buf(mqa_q), mqa_q.stride(0), mqa_q.stride(1),
            launcher.buf(cache, cache_owner), cache.stride(0), cache.stride(1), case.block_size,
            launcher.buf(slots), launcher.buf(scalar(q_inv)), launcher.buf(scalar(c_inv)),
            launcher.buf(positions), launcher.buf(table, table_owner) if case.rope else "null", table.stride(0),
            b, h])
        checks.append((case, mqa_q, want_q, cache_owner, want_owner, slots, inputs, before))
    run(launcher, run_kernel, sycl_env)
    for case, mqa_q, want_q, cache_owner, want_owner, slots, inputs, before in checks:
        assert not is_poison(mqa_q).any(), f"{case.id}: mqa_q not fully written"
        check(f"{case.id} mqa_q", mqa_q, want_q)
        check(f"{case.id} cache", cache_owner, want_owner)
        check_untouched_rows(case, cache_owner, 576, slots)
        for got, was in zip(inputs, before, strict=True):
            assert torch.equal(got.view(torch.int16), was.view(torch.int16)), f"{case.id}: an input was written"
