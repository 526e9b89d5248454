"""The fp8 references are themselves checked: against exact rational rounding, against the CUDA clamp's documented
special values, and against an unfused composition of the ops vLLM would run without the fused kernels."""

from __future__ import annotations

import bisect
import itertools
import math
import struct
from fractions import Fraction

import pytest
import torch

from tests.sycl import kimi_k3_fp8_reference as fp8
from tests.sycl import kimi_k3_reference as ref
from tests.sycl.kimi_k3_harness import FINITE_SPECIALS, cos_sin, plant, rand

# Every finite E4M3 magnitude with its byte, ascending: subnormals m * 2^-9, then (8 + m) * 2^(e - 10).
E4M3 = sorted((Fraction(b & 7, 512) if b >> 3 == 0 else Fraction(8 + (b & 7), 8) * Fraction(2) ** ((b >> 3) - 7), b)
              for b in range(0x7F))
MAGNITUDES = [m for m, _ in E4M3]


def exact_e4m3(value: float) -> int:
    """The E4M3 byte of a float by exact rational rounding to nearest, ties to the even byte; saturating."""
    if math.isnan(value):
        return fp8.E4M3_NAN
    sign = 0x80 if math.copysign(1.0, value) < 0 else 0
    mag = Fraction(abs(value)) if math.isfinite(value) else MAGNITUDES[-1]
    i = bisect.bisect_left(MAGNITUDES, mag)
    if i == len(MAGNITUDES):
        return sign | E4M3[-1][1]
    if MAGNITUDES[i] == mag or i == 0:
        return sign | E4M3[i][1]
    below, above = E4M3[i - 1], E4M3[i]
    if mag - below[0] != above[0] - mag:
        return sign | (below if mag - below[0] < above[0] - mag else above)[1]
    return sign | (below if below[1] % 2 == 0 else above)[1]


def test_reference_quantiser_rounds_exactly_at_ties_boundaries_and_subnormals() -> None:
    mids = [float((a + b) / 2) for (a, _), (b, _) in itertools.pairwise(E4M3)]
    near = [math.nextafter(m, d) for m in mids for d in (0.0, math.inf)]
    values = mids + near + [448.0, 456.0, 464.0, math.nextafter(464.0, 0.0), 465.0, 480.0, 1e30, 2.0 ** -10,
                            2.0 ** -11, 1e-40] + list(FINITE_SPECIALS)
    values += [-v for v in values]
    x = torch.tensor(values, dtype=torch.float32)
    want = torch.tensor([exact_e4m3(float(v)) for v in x.tolist()], dtype=torch.uint8)
    assert torch.equal(fp8.e4m3_satfinite(x), want)
    assert torch.equal(fp8.e4m3_scaled(x, torch.tensor([1.0])), want)


def test_reference_specials_follow_the_cuda_clamp() -> None:
    """copyChunk8 clamps with fminf(fmaxf(y, -448), 448): NaN -> -448; the SATFINITE cast keeps NaN as 0x7F."""
    x = torch.tensor([float("nan"), float("inf"), float("-inf"), 1e4, -1e4, -0.0])
    assert fp8.e4m3_scaled(x, torch.tensor([1.0])).tolist() == [0xFE, 0x7E, 0xFE, 0x7E, 0xFE, 0x80]
    assert fp8.e4m3_satfinite(x).tolist() == [0x7F, 0x7E, 0xFE, 0x7E, 0xFE, 0x80]


def _composition_fp8(x32: torch.Tensor, scale_inv: float) -> torch.Tensor:
    """vLLM's unfused per-tensor quant for finite values: clamp, then torch's own E4M3 cast."""
    return torch.clamp(x32 * torch.tensor(scale_inv), -448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)


def _rotary_f32(positions: torch.Tensor, x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """RotaryEmbedding.forward_native (is_neox=False) without its final cast to x's dtype."""
    cos, sin = table.index_select(0, positions).chunk(2, dim=-1)
    while cos.dim() < x.dim():
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    x1, x2 = x.float()[..., ::2], x.float()[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_fp8_reference_equals_unfused_composition(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(11)
    t, h, block_size = 37, 8, 16
    q, k_nope, v = (plant(rand((t, h, n), dtype, gen), gen, FINITE_SPECIALS) for n in (192, 128, 128))
    kv = plant(rand((t, 576), dtype, gen), gen, FINITE_SPECIALS)
    kv_c, k_pe = kv[:, :512], kv[:, 512:]
    cache = torch.full((6, block_size, 576), 0xFF, dtype=torch.uint8)
    slots = torch.randperm(6 * block_size, generator=gen)[:t]
    slots[3::7] = -1
    positions = torch.randint(0, 300, (t,), generator=gen)
    table, _ = cos_sin(False)
    scales = fp8.Scales(q=1.0, k=1.0, v=2.0, cache=0.37)
    q8, k8, v8, cache8 = fp8.fp8_prefill(q, k_nope, k_pe, kv_c, v, cache, slots, scales, positions, table)

    q_rot = torch.cat([q[..., :128].float(), _rotary_f32(positions, q[..., 128:], table)], dim=-1)
    k_pe_rot = _rotary_f32(positions, k_pe, table)
    assert torch.equal(q8, _composition_fp8(q_rot, 1.0))
    assert torch.equal(k8, _composition_fp8(torch.cat([k_nope.float(), k_pe_rot[:, None].expand(t, h, 64)], -1), 1.0))
    assert torch.equal(v8, _composition_fp8(v.float(), 2.0))
    unfused = cache.clone()
    ref.concat_and_cache_mla(_composition_fp8(kv_c.float(), 0.37), _composition_fp8(k_pe_rot, 0.37), unfused, slots)
    assert torch.equal(cache8, unfused)

    mqa8, dcache8 = fp8.fp8_decode(q[..., :128].repeat(1, 1, 4), q[..., 128:], kv_c, k_pe, cache, slots, 0.5, 0.37,
                                   positions, table)
    want_q = torch.cat([q[..., :128].repeat(1, 1, 4).float(), q_rot[..., 128:]], -1)
    assert torch.equal(mqa8, _composition_fp8(want_q, 0.5))
    assert torch.equal(dcache8, unfused)
    # The order of operations matters: rounding the rotation to bf16/fp16 first changes rotated bytes.
    rounded_first = _composition_fp8(_rotary_f32(positions, q[..., 128:], table).to(dtype).float(), 1.0)
    assert not torch.equal(rounded_first, q8[..., 128:])


def _ds_entry_composition(kv_c: torch.Tensor, k_pe_stored: torch.Tensor) -> bytes:
    """One fp8_ds_mla entry built value by value with Python floats and struct, as its layout is documented."""
    values = [float(v) for v in kv_c.float().tolist()]
    nope, scales = [], []
    for tile in range(4):
        chunk = values[tile * 128:(tile + 1) * 128]
        absmax = max((abs(v) for v in chunk if not math.isnan(v)), default=0.0)
        scale = math.inf if math.isinf(absmax) else 2.0 ** math.ceil(math.log2(max(absmax / 448.0, 1e-4)))
        scales.append(scale)
        nope += [exact_e4m3(v / scale) for v in chunk]
    return bytes(nope) + struct.pack("<4f", *scales) + k_pe_stored.contiguous().view(torch.uint8).numpy().tobytes()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_ds_reference_equals_unfused_composition(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(13)
    kv_c = rand((6, 512), dtype, gen)
    kv_c[0, :128] = 0.0
    kv_c[1, :128] *= 0.01
    kv_c[2, 5] = -448.0 * 4
    kv_c[3, 7] = float("nan")
    kv_c[4, 300] = float("inf")
    kv_c[5] *= 300.0
    k_pe = rand((6, 64), dtype, gen)
    got = fp8.ds_entries(kv_c, k_pe)
    for t in range(6):
        assert got[t].numpy().tobytes() == _ds_entry_composition(kv_c[t], k_pe[t]), f"token {t}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_ds_scale_rule_is_exact_for_every_16bit_absmax(dtype: torch.dtype) -> None:
    """CUDA's fp32 exp2(ceil(log2(max(a / 448, 1e-4)))), the same in float64, and the header's exponent-from-bits
    rule agree for every finite bf16 / fp16 absmax: a / 448 is never within rounding distance of a power of two."""
    bits = torch.arange(0, 1 << 15, dtype=torch.int32).to(torch.int16)
    absmax = bits.view(dtype).float()
    absmax = absmax[torch.isfinite(absmax)]
    fp32_rule = fp8.ds_tile_scales(torch.nn.functional.pad(absmax[:, None], (0, 511)))[:, 0]
    f64_rule = torch.exp2(torch.ceil(torch.log2(torch.clamp(absmax.double() / 448.0, min=1e-4)))).float()
    a = absmax.view(torch.int32)
    exponent = torch.clamp((a >> 23) - 127 - 8 + ((a & 0x7FFFFF) > 0x600000).int(), min=-13)
    exponent = torch.where(a >= 0x00800000, exponent, torch.full_like(exponent, -13))
    bit_rule = ((exponent + 127) << 23).view(torch.float32)
    assert torch.equal(fp32_rule, f64_rule)
    assert torch.equal(fp32_rule, bit_rule)
