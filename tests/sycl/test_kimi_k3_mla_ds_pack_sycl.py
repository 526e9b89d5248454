"""The Kimi-K3 MLA fp8_ds_mla kernels (prefill and decode) and the chunked-context K/V pack kernels, taken from the
kernels patch file, run on a real SYCL device against the PyTorch reference.

ds_mla: q, k_out and mqa_q as the bf16/fp16 ops, and every byte of the 656-byte cache entry, bit-exact (rotated
values as CUDA's build rounds them). Tiles are built to hit the
scale rule's edges: an absmax that is exactly 448 * 2^j, all zeros, all below the 1e-4 floor, huge, inf, NaN.
Pack: every key / value element bit-exact; an fp8 k_pe is copied byte for byte.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
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
)

HEADERS = ("csrc/kimi_k3_mla_epilogue.hpp", "csrc/kimi_k3_mla_fp8.hpp")
DTYPES = pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])

WRAPPERS = r"""
#include "kimi_k3_mla_fp8.hpp"
namespace syclexp = sycl::ext::oneapi::experimental;
namespace kk = kimi_k3_mla;
#define GID sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_linear_id()
#define KERNEL extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>)) void

#define DS_PACK_WRAPPERS(T, SUFFIX)                                                                  \
KERNEL ds_prefill_##SUFFIX(T* q, int64_t q_tok, int64_t q_head, T* k_nope, int64_t kn_tok,           \
    int64_t kn_head, T* k_pe, int64_t kpe_tok, T* kv_c, int64_t kvc_tok, T* k_out, int64_t ko_tok,   \
    int64_t ko_head, uint8_t* cache, int64_t block_stride, int64_t entry_stride, int64_t block_size,\
    int64_t* slots, int64_t* positions, float* cos_sin, int64_t cs_stride, int64_t num_tokens,      \
    int64_t num_heads) {                                                                             \
  kk::DsPrefillArgs<T> a{{q, q_tok, q_head, k_nope, kn_tok, kn_head, k_pe, kpe_tok, kv_c, kvc_tok,   \
      k_out, ko_tok, ko_head, {nullptr, 0, 0, 1, slots}, {positions, cos_sin, cs_stride},            \
      num_tokens, num_heads}, {cache, block_stride, entry_stride, block_size, slots}};               \
  kk::ds_prefill_item(a, GID);                                                                       \
}                                                                                                    \
KERNEL ds_decode_##SUFFIX(T* ql_nope, int64_t qn_tok, int64_t qn_head, T* q_pe, int64_t qpe_tok,     \
    int64_t qpe_head, T* kv_c, int64_t kvc_tok, T* k_pe, int64_t kpe_tok, T* mqa_q, int64_t mq_tok,  \
    int64_t mq_head, uint8_t* cache, int64_t block_stride, int64_t entry_stride, int64_t block_size,\
    int64_t* slots, int64_t* positions, float* cos_sin, int64_t cs_stride, int64_t num_tokens,      \
    int64_t num_heads) {                                                                             \
  kk::DsDecodeArgs<T> a{{ql_nope, qn_tok, qn_head, q_pe, qpe_tok, qpe_head, kv_c, kvc_tok, k_pe,     \
      kpe_tok, mqa_q, mq_tok, mq_head, {nullptr, 0, 0, 1, slots}, {positions, cos_sin, cs_stride},   \
      num_tokens, num_heads}, {cache, block_stride, entry_stride, block_size, slots}};               \
  kk::ds_decode_item(a, GID);                                                                        \
}                                                                                                    \
KERNEL pack_##SUFFIX(T* k_nope, int64_t kn_tok, int64_t kn_head, T* k_pe, int64_t kpe_tok, T* k_out, \
    int64_t ko_tok, int64_t ko_head, int64_t num_tokens, int64_t num_heads) {                        \
  kk::PackArgs<T, T, T> a{k_nope, kn_tok, kn_head, k_pe, kpe_tok, nullptr, 0, 0, k_out, ko_tok,      \
      ko_head, nullptr, 0, 0, num_tokens, num_heads};                                                \
  kk::pack_item(a, GID);                                                                             \
}                                                                                                    \
KERNEL pack_fp8_##SUFFIX(T* k_nope, int64_t kn_tok, int64_t kn_head, T* k_pe, int64_t kpe_tok, T* v, \
    int64_t v_tok, int64_t v_head, uint8_t* k_out, int64_t ko_tok, int64_t ko_head, uint8_t* v_fp8,  \
    int64_t vo_tok, int64_t vo_head, int64_t num_tokens, int64_t num_heads) {                        \
  kk::PackArgs<T, T, uint8_t> a{k_nope, kn_tok, kn_head, k_pe, kpe_tok, v, v_tok, v_head, k_out,     \
      ko_tok, ko_head, v_fp8, vo_tok, vo_head, num_tokens, num_heads};                               \
  kk::pack_item(a, GID);                                                                             \
}                                                                                                    \
KERNEL pack_fp8pe_##SUFFIX(T* k_nope, int64_t kn_tok, int64_t kn_head, uint8_t* k_pe,                \
    int64_t kpe_tok, T* v, int64_t v_tok, int64_t v_head, uint8_t* k_out, int64_t ko_tok,            \
    int64_t ko_head, uint8_t* v_fp8, int64_t vo_tok, int64_t vo_head, int64_t num_tokens,            \
    int64_t num_heads) {                                                                             \
  kk::PackArgs<T, uint8_t, uint8_t> a{k_nope, kn_tok, kn_head, k_pe, kpe_tok, v, v_tok, v_head,      \
      k_out, ko_tok, ko_head, v_fp8, vo_tok, vo_head, num_tokens, num_heads};                        \
  kk::pack_item(a, GID);                                                                             \
}

DS_PACK_WRAPPERS(sycl::ext::oneapi::bfloat16, bf16)
DS_PACK_WRAPPERS(sycl::half, f16)
"""


def run(launcher: Launcher, run_kernel: Path, env: dict[str, str]) -> None:
    includes = {Path(name).name: patch_file(name) for name in HEADERS}
    launcher.run(run_kernel, env, WRAPPERS, includes)


def ds_latent(tokens: int, dtype: torch.dtype, gen: torch.Generator, strided: bool) -> torch.Tensor:
    """[T, 576 or 640] inputs whose kv_c tiles cycle through the scale rule's edge cases."""
    kv = rand((tokens, 640 if strided else 576), dtype, gen)
    tiles = kv[:, :512].view(tokens, 4, 128)  # a view: the edits below land in kv
    for t in range(tokens):
        for j in range(4):
            kind = (4 * t + j) % 8
            tile = tiles[t, j]
            if kind == 1:
                tile[int(torch.randint(0, 128, (1,), generator=gen))] = -448.0 * 2.0 ** (t % 5 - 2)  # exact power
            elif kind == 2:
                tile.zero_()
            elif kind == 3:
                tile.mul_(0.01)  # absmax below 448 * 1e-4: the floor scale 2^-13
            elif kind == 4:
                tile.mul_(300.0)  # absmax beyond 448: scales above 1, values that saturate nowhere
            elif kind == 5:
                plant(tile, gen, FINITE_SPECIALS, rate=0.2)
            elif kind == 6:
                tile[int(torch.randint(0, 128, (1,), generator=gen))] = float("nan")  # skipped by the absmax
            elif kind == 7 and t % 3 == 0:
                tile[int(torch.randint(0, 128, (1,), generator=gen))] = float("inf")  # an inf scale
    return kv


def check_ds_cache(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
    """Every byte exact: [0, 528) the E4M3 tiles and scales, [528, 656) the (rotated) 16-bit RoPE values."""
    check(f"{name} nope+scales", got[..., :528].contiguous(), want[..., :528].contiguous())
    check(f"{name} rope", got[..., 528:656].contiguous(), want[..., 528:656].contiguous())


@DTYPES
def test_ds_prefill_kernel_matches_reference(dtype: torch.dtype, tmp_path: Path, run_kernel: Path,
                                             sycl_env: dict[str, str]) -> None:
    gen = torch.Generator().manual_seed(656)
    launcher = Launcher(tmp_path)
    checks = []
    for case in cases():
        t, h = case.tokens, case.heads
        q_owner = rand((t, h, 224 if case.strided else 192), dtype, gen)
        kvb = plant(rand((t, h, 256 if case.strided else 128), dtype, gen), gen, INFINITE_SPECIALS)  # copied
        kv_owner = ds_latent(t, dtype, gen, case.strided)
        q, k_nope = q_owner[..., :192], kvb[..., :128]
        kv_c, k_pe = kv_owner[:, :512], kv_owner[:, 512:576]
        k_out = poisoned((t, h, 192), dtype)
        cache, cache_owner, slots = paged_cache(case, torch.uint8, 656, gen)
        positions = torch.randint(0, MAX_POSITION, (t,), generator=gen) if case.rope else None
        table, table_owner = cos_sin(case.strided)
        want = fp8.ds_prefill(q, k_nope, k_pe, kv_c, cache, slots, positions, table if case.rope else None)
        want_owner = cache_owner.clone()
        want_owner[..., :656] = want[2]
        q_before = q_owner.clone()
        launcher.launch(f"ds_prefill_{SUFFIX[dtype]}", t * (h + 1) * 32, [
            launcher.buf(q, q_owner), q.stride(0), q.stride(1), launcher.buf(k_nope, kvb), k_nope.stride(0),
            k_nope.stride(1), launcher.buf(k_pe, kv_owner), k_pe.stride(0), launcher.buf(kv_c, kv_owner),
            kv_c.stride(0), launcher.buf(k_out), k_out.stride(0), k_out.stride(1),
            launcher.buf(cache, cache_owner), cache.stride(0), cache.stride(1), case.block_size,
            launcher.buf(slots), launcher.buf(positions), launcher.buf(table, table_owner) if case.rope else "null",
            table.stride(0), t, h])
        checks.append((case, q_owner, q_before, want, k_out, cache_owner, want_owner, slots))
    run(launcher, run_kernel, sycl_env)
    for case, q_owner, q_before, want, k_out, cache_owner, want_owner, slots in checks:
        q_want = q_before.clone()
        q_want[..., :192] = want[0]
        check(f"{case.id} q", q_owner, q_want)
        assert not is_poison(k_out).any(), f"{case.id}: k_out not fully written"
        check(f"{case.id} k_out", k_out, want[1])
        check_ds_cache(f"{case.id} cache", cache_owner, want_owner)
        check_untouched_rows(case, cache_owner, 656, slots)


@DTYPES
def test_ds_decode_kernel_matches_reference(dtype: torch.dtype, tmp_path: Path, run_kernel: Path,
                                            sycl_env: dict[str, str]) -> None:
    gen = torch.Generator().manual_seed(6560)
    launcher = Launcher(tmp_path)
    checks = []
    for case in cases():
        b, h = case.tokens, case.heads
        if case.strided:  # the transposed BMM output: head stride B*512 > token stride 512
            qn_owner = plant(rand((h, b, 512), dtype, gen), gen, INFINITE_SPECIALS)
            ql_nope = qn_owner.transpose(0, 1)
        else:
            qn_owner = ql_nope = plant(rand((b, h, 512), dtype, gen), gen, INFINITE_SPECIALS)
        q_owner = rand((b, h, 192), dtype, gen)
        kv_owner = ds_latent(b, dtype, gen, case.strided)
        q_pe, kv_c, k_pe = q_owner[..., 128:], kv_owner[:, :512], kv_owner[:, 512:576]
        mqa_q = poisoned((b, h, 576), dtype)
        cache, cache_owner, slots = paged_cache(case, torch.uint8, 656, gen)
        positions = torch.randint(0, MAX_POSITION, (b,), generator=gen) if case.rope else None
        table, table_owner = cos_sin(case.strided)
        want_q, want_cache = fp8.ds_decode(ql_nope, q_pe, kv_c, k_pe, cache, slots, positions,
                                           table if case.rope else None)
        want_owner = cache_owner.clone()
        want_owner[..., :656] = want_cache
        inputs = [qn_owner, q_owner, kv_owner]
        before = [x.clone() for x in inputs]
        launcher.launch(f"ds_decode_{SUFFIX[dtype]}", b * (h + 1) * 32, [
            launcher.buf(ql_nope, qn_owner), ql_nope.stride(0), ql_nope.stride(1), launcher.buf(q_pe, q_owner),
            q_pe.stride(0), q_pe.stride(1), launcher.buf(kv_c, kv_owner), kv_c.stride(0),
            launcher.buf(k_pe, kv_owner), k_pe.stride(0), launcher.buf(mqa_q), mqa_q.stride(0), mqa_q.stride(1),
            launcher.buf(cache, cache_owner), cache.stride(0), cache.stride(1), case.block_size,
            launcher.buf(slots), launcher.buf(positions), launcher.buf(table, table_owner) if case.rope else "null",
            table.stride(0), b, h])
        checks.append((case, mqa_q, want_q, cache_owner, want_owner, slots, inputs, before))
    run(launcher, run_kernel, sycl_env)
    for case, mqa_q, want_q, cache_owner, want_owner, slots, inputs, before in checks:
        assert not is_poison(mqa_q).any(), f"{case.id}: mqa_q not fully written"
        check(f"{case.id} mqa_q", mqa_q, want_q)
        check_ds_cache(f"{case.id} cache", cache_owner, want_owner)
        check_untouched_rows(case, cache_owner, 656, slots)
        for got, was in zip(inputs, before, strict=True):
            assert torch.equal(got.view(torch.int16), was.view(torch.int16)), f"{case.id}: an input was written"


@dataclass(frozen=True)
class PackCase:
    tokens: int
    heads: int
    fp8_k_pe: bool
    strided: bool

    @property
    def id(self) -> str:
        return (f"T{self.tokens}-H{self.heads}-{'fp8' if self.fp8_k_pe else 'same'}-kpe-"
                f"{'strided' if self.strided else 'contig'}")


def pack_cases(fp8_k_pe: bool) -> list[PackCase]:
    """Tokens {1, 5, 37, 256} x heads {1, 8, 16} x (with fp8_k_pe) k_pe fp8 or not, else contiguous or strided;
    with fp8_k_pe the layouts alternate per (tokens, heads)."""
    shapes = list(itertools.product((1, 5, 37, 256), (1, 8, 16)))
    if not fp8_k_pe:
        return [PackCase(t, h, False, strided) for t, h in shapes for strided in (False, True)]
    return [PackCase(t, h, kpe, strided=index % 2 == 1) for index, (t, h) in enumerate(shapes) for kpe in (False, True)]


def pack_inputs(case: PackCase, dtype: torch.dtype,
                gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(kv_b_proj output, k_nope, v, workspace, k_pe) as vLLM's chunked-context loop passes them."""
    t, h = case.tokens, case.heads
    specials = FINITE_SPECIALS + INFINITE_SPECIALS
    kvb = plant(rand((t, h, 256), dtype, gen), gen, specials)
    k_nope, v = (kvb[..., :128], kvb[..., 128:]) if case.strided else (kvb[..., :128].clone(), kvb[..., 128:].clone())
    if case.fp8_k_pe:  # a plain fp8 cache gathered as-is: any byte, NaN patterns included
        workspace = torch.randint(0, 256, (t, 576), generator=gen, dtype=torch.int32).to(torch.uint8)
    else:
        workspace = plant(rand((t, 576), dtype, gen), gen, specials)
    k_pe = workspace[:, 512:] if case.strided else workspace[:, 512:].clone()
    return kvb, k_nope, v, workspace, k_pe


@DTYPES
def test_kv_concat_kernel_matches_reference(dtype: torch.dtype, tmp_path: Path, run_kernel: Path,
                                            sycl_env: dict[str, str]) -> None:
    gen = torch.Generator().manual_seed(192)
    launcher = Launcher(tmp_path)
    checks = []
    for case in pack_cases(fp8_k_pe=False):
        kvb, k_nope, _, workspace, k_pe = pack_inputs(case, dtype, gen)
        k_out = poisoned((case.tokens, case.heads, 192), dtype)
        launcher.launch(f"pack_{SUFFIX[dtype]}", case.tokens * case.heads * 32, [
            launcher.buf(k_nope, kvb if case.strided else None), k_nope.stride(0), k_nope.stride(1),
            launcher.buf(k_pe, workspace if case.strided else None), k_pe.stride(0),
            launcher.buf(k_out), k_out.stride(0), k_out.stride(1), case.tokens, case.heads])
        checks.append((case, k_out, fp8.kv_concat(k_nope, k_pe)))
    run(launcher, run_kernel, sycl_env)
    for case, k_out, want in checks:
        assert not is_poison(k_out).any(), f"{case.id}: k_out not fully written"
        check(f"{case.id} k_out", k_out, want)


@DTYPES
def test_kv_concat_quant_fp8_kernel_matches_reference(dtype: torch.dtype, tmp_path: Path, run_kernel: Path,
                                                      sycl_env: dict[str, str]) -> None:
    gen = torch.Generator().manual_seed(1920)
    launcher = Launcher(tmp_path)
    checks = []
    for case in pack_cases(fp8_k_pe=True):
        kvb, k_nope, v, workspace, k_pe = pack_inputs(case, dtype, gen)
        k_fp8, v_fp8 = poisoned((case.tokens, case.heads, 192), torch.uint8), poisoned(v.shape, torch.uint8)
        kernel = f"pack_fp8pe_{SUFFIX[dtype]}" if case.fp8_k_pe else f"pack_fp8_{SUFFIX[dtype]}"
        launcher.launch(kernel, case.tokens * case.heads * 32, [
            launcher.buf(k_nope, kvb if case.strided else None), k_nope.stride(0), k_nope.stride(1),
            launcher.buf(k_pe, workspace if case.strided else None), k_pe.stride(0),
            launcher.buf(v, kvb if case.strided else None), v.stride(0), v.stride(1),
            launcher.buf(k_fp8), k_fp8.stride(0), k_fp8.stride(1), launcher.buf(v_fp8), v_fp8.stride(0),
            v_fp8.stride(1), case.tokens, case.heads])
        checks.append((case, k_fp8, v_fp8, fp8.kv_concat_quant_fp8(k_nope, k_pe, v)))
    run(launcher, run_kernel, sycl_env)
    for case, k_fp8, v_fp8, (want_k, want_v) in checks:
        assert not is_poison(k_fp8).any() or case.fp8_k_pe, f"{case.id}: k_fp8 not fully written"
        check(f"{case.id} k_fp8", k_fp8, want_k)
        assert not is_poison(v_fp8).any(), f"{case.id}: v_fp8 not fully written"
        check(f"{case.id} v_fp8", v_fp8, want_v)


def test_pack_case_matrices_cover_the_issue() -> None:
    plain, quant = pack_cases(fp8_k_pe=False), pack_cases(fp8_k_pe=True)
    assert len(plain) >= 24 and len(quant) >= 24 and len(cases()) >= 24
    assert {c.strided for c in plain} == {False, True}
    assert {(c.fp8_k_pe, c.strided) for c in quant} == set(itertools.product((False, True), repeat=2))


def test_ds_reference_keeps_the_bf16_ops_q_and_key() -> None:
    """The ds references build on the bf16 references: same q and k_out, and the RoPE part is k_out's."""
    gen = torch.Generator().manual_seed(5)
    q, k_nope, kv = rand((4, 2, 192), torch.bfloat16, gen), rand((4, 2, 128), torch.bfloat16, gen), \
        rand((4, 576), torch.bfloat16, gen)
    slots = torch.tensor([0, -1, 2, 1])
    cache = poisoned((1, 4, 656), torch.uint8)
    positions, table = torch.tensor([0, 3, 7, 9]), cos_sin(False)[0]
    q_ds, k_ds, cache_ds = fp8.ds_prefill(q, k_nope, kv[:, 512:], kv[:, :512], cache, slots, positions, table)
    q_bf, k_bf, _ = ref.prefill(q, k_nope, kv[:, 512:], kv[:, :512], torch.zeros(1, 4, 576, dtype=torch.bfloat16),
                                slots, positions, table)
    assert torch.equal(q_ds.view(torch.int16), q_bf.view(torch.int16))
    assert torch.equal(k_ds.view(torch.int16), k_bf.view(torch.int16))
    assert torch.equal(cache_ds[0, 2, 528:].view(torch.bfloat16).view(torch.int16), k_bf[2, 0, 128:].view(torch.int16))
    assert is_poison(cache_ds[0, 3]).all()
