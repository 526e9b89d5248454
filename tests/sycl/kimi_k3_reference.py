"""Pure-PyTorch references for the Kimi-K3 MLA epilogue ops, and the unfused composition they must equal."""

from __future__ import annotations

import torch

NOPE, ROPE, LORA = 128, 64, 512
HALF = ROPE // 2


def rope_gptj(x: torch.Tensor, cs: torch.Tensor) -> torch.Tensor:
    """GPT-J RoPE of x[..., 64] with rows cs[..., 64] (cos | sin): fp32 math, rounded once."""
    xf = x.float()
    cos, sin = cs[..., :HALF], cs[..., HALF:]
    out = torch.empty_like(xf)
    out[..., 0::2] = xf[..., 0::2] * cos - xf[..., 1::2] * sin
    out[..., 1::2] = xf[..., 0::2] * sin + xf[..., 1::2] * cos
    return out.to(x.dtype)


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


# The unfused composition vLLM would run without the fused op: RoPE (as RotaryEmbedding.forward_native,
# is_neox=False), then cat, then a concat_and_cache_mla-style scatter.


def rotary_native(positions: torch.Tensor, x: torch.Tensor, cos_sin: torch.Tensor) -> torch.Tensor:
    cos, sin = cos_sin.index_select(0, positions).chunk(2, dim=-1)
    while cos.dim() < x.dim():
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    x1, x2 = x.float()[..., ::2], x.float()[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2).to(x.dtype)


def concat_and_cache_mla(kv_c: torch.Tensor, k_pe: torch.Tensor, cache: torch.Tensor, slots: torch.Tensor) -> None:
    valid = slots >= 0
    block_size = cache.shape[1]
    cache[slots[valid] // block_size, slots[valid] % block_size] = torch.cat([kv_c[valid], k_pe[valid]], dim=-1)
