"""Pure-PyTorch references for the Kimi-K3 MLA epilogue ops, and the unfused composition they must equal."""

from __future__ import annotations

import math

import torch

NOPE, ROPE, LORA = 128, 64, 512
HALF = ROPE // 2


def fma_f32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """fp32 fma(a, b, c) with one rounding (math.fma needs Python 3.13).

    a * b of two fp32 values is exact in float64 (48 significant bits). The sum with c may not be, and rounding it
    to float64 and then to fp32 can round twice. So the float64 sum is rounded to odd instead: TwoSum gives the
    exact error e of s = RN(p + c); when e != 0 and s's last bit is even, the odd neighbour of s towards e is taken.
    A round-to-odd value with at least two more bits than fp32 (53 >= 24 + 2) rounds to fp32 exactly as the exact
    sum does (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums", 2008). Infinite or NaN sums are
    what float64 gives, as an FMA gives them.
    """
    p, t = a.double() * b.double(), c.double()
    s = p + t
    v = s - p
    e = (p - (s - v)) + (t - v)
    even = (s.view(torch.int64) & 1) == 0
    away = torch.copysign(torch.full_like(s, math.inf), e)
    return torch.where(s.isfinite() & (e != 0) & even, s.nextafter(away), s).float()


def rotate(x: torch.Tensor, y: torch.Tensor, c: torch.Tensor, s: torch.Tensor,
           form: str = "cuda") -> tuple[torch.Tensor, torch.Tensor]:
    """The fp32 GPT-J rotation (x * c - y * s, x * s + y * c) of fp32 x, y, in one of three roundings:

    cuda      vLLM's CUDA build (nvcc's default -fmad=true): fma(x, c, -(y * s)), fma(x, s, y * c) -- the kernels'
    unfused   each product rounded, then the sum rounded
    other     the other contraction: fma(-y, s, x * c), fma(y, c, x * s)
    """
    if form == "cuda":
        return fma_f32(x, c, -(y * s)), fma_f32(x, s, y * c)
    if form == "unfused":
        return x * c - y * s, x * s + y * c
    if form == "other":
        return fma_f32(-y, s, x * c), fma_f32(y, c, x * s)
    raise ValueError(f"unknown rotation form {form!r}")


def rope_f32(x: torch.Tensor, cs: torch.Tensor, form: str = "cuda") -> torch.Tensor:
    """GPT-J RoPE of x[..., 64] with rows cs[..., 64] (cos | sin) in fp32, not rounded to x's dtype."""
    xf = x.float()
    out = torch.empty_like(xf)
    out[..., 0::2], out[..., 1::2] = rotate(xf[..., 0::2], xf[..., 1::2], cs[..., :HALF], cs[..., HALF:], form)
    return out


def rope_gptj(x: torch.Tensor, cs: torch.Tensor) -> torch.Tensor:
    """GPT-J RoPE of x[..., 64] with rows cs[..., 64] (cos | sin): fp32 math as CUDA's, rounded once."""
    return rope_f32(x, cs).to(x.dtype)


def _insert(cache: torch.Tensor, slots: torch.Tensor, rows: torch.Tensor) -> None:
    block_size = cache.shape[1]
    for token, slot in enumerate(slots.tolist()):
        if slot >= 0:
            cache[slot // block_size, slot % block_size] = rows[token]


def prefill(q: torch.Tensor, k_nope: torch.Tensor, k_pe: torch.Tensor, kv_c: torch.Tensor, cache: torch.Tensor,
            slots: torch.Tensor, positions: torch.Tensor | None,
            cos_sin: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(q after in-place RoPE, k_out, cache after insert) of fused_kimi_k3_mla_key_concat_kv_cache_insert."""
    q, cache = q.clone(), cache.clone()
    if positions is not None and cos_sin is not None:
        rows = cos_sin[positions]
        q[..., NOPE:] = rope_gptj(q[..., NOPE:], rows[:, None, :])
        k_pe = rope_gptj(k_pe, rows)
    tokens, heads = k_nope.shape[:2]
    k_out = torch.cat([k_nope, k_pe[:, None, :].expand(tokens, heads, ROPE)], dim=-1)
    _insert(cache, slots, torch.cat([kv_c, k_pe], dim=-1))
    return q, k_out, cache


def decode(ql_nope: torch.Tensor, q_pe: torch.Tensor, kv_c: torch.Tensor, k_pe: torch.Tensor, cache: torch.Tensor,
           slots: torch.Tensor, positions: torch.Tensor | None,
           cos_sin: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(mqa_q, cache after insert) of fused_kimi_k3_mla_decode_q_concat_kv_cache_insert; inputs unchanged."""
    cache = cache.clone()
    if positions is not None and cos_sin is not None:
        rows = cos_sin[positions]
        q_pe = rope_gptj(q_pe, rows[:, None, :])
        k_pe = rope_gptj(k_pe, rows)
    mqa_q = torch.cat([ql_nope, q_pe], dim=-1)
    _insert(cache, slots, torch.cat([kv_c, k_pe], dim=-1))
    return mqa_q, cache


# The composition vLLM would run without the fused op: RoPE (as RotaryEmbedding.forward_native, is_neox=False,
# written out, with its rotation rounded as CUDA's build rounds the fused op's), then cat, then a
# concat_and_cache_mla-style scatter.


def rotary_native(positions: torch.Tensor, x: torch.Tensor, cos_sin: torch.Tensor) -> torch.Tensor:
    cos, sin = cos_sin.index_select(0, positions).chunk(2, dim=-1)
    while cos.dim() < x.dim():
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    x1, x2 = x.float()[..., ::2], x.float()[..., 1::2]
    return torch.stack(rotate(x1, x2, cos, sin), dim=-1).flatten(-2).to(x.dtype)


def concat_and_cache_mla(kv_c: torch.Tensor, k_pe: torch.Tensor, cache: torch.Tensor, slots: torch.Tensor) -> None:
    valid = slots >= 0
    block_size = cache.shape[1]
    cache[slots[valid] // block_size, slots[valid] % block_size] = torch.cat([kv_c[valid], k_pe[valid]], dim=-1)
