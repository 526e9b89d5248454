"""vLLM v0.33.0's Kimi-K3 MLA op schemas, as parser input for the contract's tests."""

from __future__ import annotations

# vLLM v0.33.0's Kimi-K3 MLA schemas (csrc/torch_bindings.cpp), joined as C++ joins the literals: parser input.
KIMI = {
    "fused_kimi_k3_mla_key_concat_kv_cache_insert": "Tensor! q, Tensor k_nope, Tensor k_pe, Tensor kv_c_normed, "
    "Tensor! k_out, Tensor! k_cache, Tensor slot_mapping, int cache_block_size, Tensor? position_ids=None, "
    "Tensor? cos_sin_cache=None",
    "fused_kimi_k3_mla_key_concat_ds_mla_insert": "Tensor! q, Tensor k_nope, Tensor k_pe, Tensor kv_c_normed, "
    "Tensor! k_out, Tensor! k_cache, Tensor slot_mapping, int cache_block_size, Tensor? position_ids=None, "
    "Tensor? cos_sin_cache=None",
    "fused_kimi_k3_mla_kv_concat": "Tensor k_nope, Tensor k_pe, Tensor! k_out",
    "fused_kimi_k3_mla_kv_concat_quant_fp8": "Tensor k_nope, Tensor k_pe, Tensor v, Tensor! k_fp8, Tensor! v_fp8",
    "fused_kimi_k3_mla_qkv_quant_kv_cache_fp8_insert": "Tensor q, Tensor k_nope, Tensor k_pe, Tensor kv_c_normed, "
    "Tensor v, Tensor! q_fp8, Tensor! k_fp8, Tensor! v_fp8, Tensor! k_cache, Tensor slot_mapping, "
    "Tensor q_scale_inv, Tensor k_scale_inv, Tensor v_scale_inv, Tensor cache_scale_inv, int cache_block_size, "
    "Tensor? position_ids=None, Tensor? cos_sin_cache=None",
    "fused_kimi_k3_mla_decode_q_concat_kv_cache_insert": "Tensor ql_nope, Tensor q_pe, Tensor kv_c_normed, "
    "Tensor k_pe, Tensor! mqa_q, Tensor! k_cache, Tensor slot_mapping, int cache_block_size, "
    "Tensor? position_ids=None, Tensor? cos_sin_cache=None",
    "fused_kimi_k3_mla_decode_q_concat_kv_cache_fp8_insert": "Tensor ql_nope, Tensor q_pe, Tensor kv_c_normed, "
    "Tensor k_pe, Tensor! mqa_q, Tensor! k_cache, Tensor slot_mapping, Tensor q_scale_inv, "
    "Tensor cache_scale_inv, int cache_block_size, Tensor? position_ids=None, Tensor? cos_sin_cache=None",
    "fused_kimi_k3_mla_decode_q_concat_ds_mla_insert": "Tensor ql_nope, Tensor q_pe, Tensor kv_c_normed, "
    "Tensor k_pe, Tensor! mqa_q, Tensor! k_cache, Tensor slot_mapping, int cache_block_size, "
    "Tensor? position_ids=None, Tensor? cos_sin_cache=None",
}


def kimi(name: str) -> str:
    return f"{name}({KIMI[name]}) -> ()"
