"""PyTorch references for the Kimi-K3 MLA fp8, fp8_ds_mla and chunked-context ops (vLLM v0.33.0's CUDA semantics).

E4M3 values are returned as uint8 tensors (their bytes). The semantics are written down in the kernels patch's
csrc/kimi_k3_mla_fp8.hpp; every function here computes them with plain PyTorch ops on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tests.sycl import kimi_k3_reference as ref

NOPE, ROPE, LORA, V = ref.NOPE, ref.ROPE, ref.LORA, 128
LATENT = LORA + ROPE
DS_ENTRY, DS_TILE = 656, 128
E4M3_NAN = 0x7F


def rope_f32(x: torch.Tensor, cs: torch.Tensor) -> torch.Tensor:
    """GPT-J RoPE of x[..., 64] in fp32 as CUDA's build rounds it, NOT rounded to x's dtype (what feeds E4M3)."""
    return ref.rope_f32(x, cs)


def e4m3_scaled(x: torch.Tensor, scale_inv: torch.Tensor) -> torch.Tensor:
    """CUDA's copyChunk8: y = x * scale_inv in fp32, fminf(fmaxf(y, -448), 448) (NaN -> -448), nearest-even E4M3."""
    y = x.float() * scale_inv
    y = torch.fmin(torch.fmax(y, torch.tensor(-448.0)), torch.tensor(448.0))
    return y.to(torch.float8_e4m3fn).view(torch.uint8)


def e4m3_satfinite(x: torch.Tensor) -> torch.Tensor:
    """CUDA's SATFINITE cast: nearest-even E4M3, beyond +-448 and +-inf -> +-448, NaN -> 0x7F."""
    y = torch.clamp(x.float(), -448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)
    return torch.where(x.float().isnan(), torch.tensor(E4M3_NAN, dtype=torch.uint8), y)


@dataclass(frozen=True)
class Scales:
    """The four device scalars of the fp8 prefill op (each 1 / scale, fp32)."""

    q: float
    k: float
    v: float
    cache: float

    def tensor(self, which: str) -> torch.Tensor:
        return torch.tensor([getattr(self, which)], dtype=torch.float32)


def _rows(positions: torch.Tensor | None, cos_sin: torch.Tensor | None) -> torch.Tensor | None:
    return None if positions is None or cos_sin is None else cos_sin[positions]


def _rope_or_plain(x: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    return x.float() if rows is None else rope_f32(x, rows)


def _insert(cache: torch.Tensor, slots: torch.Tensor, entries: torch.Tensor) -> torch.Tensor:
    out = cache.clone()
    block_size = out.shape[1]
    for token, slot in enumerate(slots.tolist()):
        if slot >= 0:
            out[slot // block_size, slot % block_size] = entries[token]
    return out


def fp8_prefill(q: torch.Tensor, k_nope: torch.Tensor, k_pe: torch.Tensor, kv_c: torch.Tensor, v: torch.Tensor,
                cache: torch.Tensor, slots: torch.Tensor, scales: Scales, positions: torch.Tensor | None,
                cos_sin: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(q_fp8, k_fp8, v_fp8, cache) of fused_kimi_k3_mla_qkv_quant_kv_cache_fp8_insert; cache is uint8 [.., 576]."""
    rows = _rows(positions, cos_sin)
    heads = k_nope.shape[1]
    q32 = q.float()
    q32[..., NOPE:] = _rope_or_plain(q[..., NOPE:], None if rows is None else rows[:, None])
    k_pe32 = _rope_or_plain(k_pe, rows)
    k32 = torch.cat([k_nope.float(), k_pe32[:, None].expand(-1, heads, -1)], dim=-1)
    latent = e4m3_scaled(torch.cat([kv_c.float(), k_pe32], dim=-1), scales.tensor("cache"))
    return (e4m3_scaled(q32, scales.tensor("q")), e4m3_scaled(k32, scales.tensor("k")),
            e4m3_scaled(v, scales.tensor("v")), _insert(cache, slots, latent))


def fp8_decode(ql_nope: torch.Tensor, q_pe: torch.Tensor, kv_c: torch.Tensor, k_pe: torch.Tensor, cache: torch.Tensor,
               slots: torch.Tensor, q_scale_inv: float, cache_scale_inv: float, positions: torch.Tensor | None,
               cos_sin: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(mqa_q, cache) of fused_kimi_k3_mla_decode_q_concat_kv_cache_fp8_insert, both uint8."""
    rows = _rows(positions, cos_sin)
    q32 = torch.cat([ql_nope.float(), _rope_or_plain(q_pe, None if rows is None else rows[:, None])], dim=-1)
    latent = torch.cat([kv_c.float(), _rope_or_plain(k_pe, rows)], dim=-1)
    q_inv = torch.tensor([q_scale_inv], dtype=torch.float32)
    c_inv = torch.tensor([cache_scale_inv], dtype=torch.float32)
    return e4m3_scaled(q32, q_inv), _insert(cache, slots, e4m3_scaled(latent, c_inv))


def ds_tile_scales(kv_c: torch.Tensor) -> torch.Tensor:
    """fp32 [T, 4]: 2^ceil(log2(max(absmax / 448, 1e-4))) per tile of 128, absmax ignoring NaN."""
    mag = kv_c.float().abs().reshape(kv_c.shape[0], LORA // DS_TILE, DS_TILE)
    absmax = torch.where(mag.isnan(), torch.zeros_like(mag), mag).amax(dim=-1)
    return torch.exp2(torch.ceil(torch.log2(torch.fmax(absmax / 448.0, torch.tensor(1e-4)))))


def ds_entries(kv_c: torch.Tensor, k_pe_stored: torch.Tensor) -> torch.Tensor:
    """uint8 [T, 656] fp8_ds_mla entries: E4M3(kv_c / tile scale) | fp32 scales | k_pe's 16-bit values."""
    scales = ds_tile_scales(kv_c)
    tiles = kv_c.float().reshape(kv_c.shape[0], LORA // DS_TILE, DS_TILE) / scales[..., None]
    nope = e4m3_satfinite(tiles).reshape(kv_c.shape[0], LORA)
    return torch.cat([nope, scales.contiguous().view(torch.uint8), k_pe_stored.contiguous().view(torch.uint8)], -1)


def ds_prefill(q: torch.Tensor, k_nope: torch.Tensor, k_pe: torch.Tensor, kv_c: torch.Tensor, cache: torch.Tensor,
               slots: torch.Tensor, positions: torch.Tensor | None,
               cos_sin: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(q, k_out, cache) of fused_kimi_k3_mla_key_concat_ds_mla_insert: the bf16 op's q and k, the ds entry."""
    q_out, k_out, _ = ref.prefill(q, k_nope, k_pe, kv_c, _scratch(kv_c), _no_slots(slots), positions, cos_sin)
    k_pe_stored = k_out[:, 0, NOPE:]
    return q_out, k_out, _insert(cache, slots, ds_entries(kv_c, k_pe_stored))


def ds_decode(ql_nope: torch.Tensor, q_pe: torch.Tensor, kv_c: torch.Tensor, k_pe: torch.Tensor, cache: torch.Tensor,
              slots: torch.Tensor, positions: torch.Tensor | None,
              cos_sin: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(mqa_q, cache) of fused_kimi_k3_mla_decode_q_concat_ds_mla_insert."""
    mqa_q, _ = ref.decode(ql_nope, q_pe, kv_c, k_pe, _scratch(kv_c), _no_slots(slots), positions, cos_sin)
    rows = _rows(positions, cos_sin)
    k_pe_stored = k_pe if rows is None else ref.rope_gptj(k_pe, rows)
    return mqa_q, _insert(cache, slots, ds_entries(kv_c, k_pe_stored))


def _scratch(kv_c: torch.Tensor) -> torch.Tensor:
    """A one-entry bf16/fp16 cache: the bf16 references give q and k; the ds entry is built here."""
    return torch.zeros((1, 1, LATENT), dtype=kv_c.dtype)


def _no_slots(slots: torch.Tensor) -> torch.Tensor:
    return torch.full_like(slots, -1)


def kv_concat(k_nope: torch.Tensor, k_pe: torch.Tensor) -> torch.Tensor:
    """k_out of fused_kimi_k3_mla_kv_concat: [k_nope | k_pe] per head, the input dtype."""
    return torch.cat([k_nope, k_pe[:, None].expand(-1, k_nope.shape[1], -1)], dim=-1)


def kv_concat_quant_fp8(k_nope: torch.Tensor, k_pe: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(k_fp8, v_fp8) of fused_kimi_k3_mla_kv_concat_quant_fp8; an fp8 (uint8) k_pe is copied byte for byte."""
    heads = k_nope.shape[1]
    pe = k_pe if k_pe.dtype == torch.uint8 else e4m3_satfinite(k_pe)
    return torch.cat([e4m3_satfinite(k_nope), pe[:, None].expand(-1, heads, -1)], dim=-1), e4m3_satfinite(v)
