// The CPU reference ops: fp32, multi-threaded (OpenMP), OpenBLAS for the matrix products.
// Every CUDA kernel has its reference here, with the same argument layout.
//
// Layouts: activations are row-major [num_tokens, width]. The KV cache of one layer is
// [num_blocks * block_size, num_kv_heads, head_dim] (slot-major), so a token's slot
// (block_id * block_size + offset) indexes its K or V row directly; token mode is block_size 1.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/kv_cache_dtype.h"

namespace folio::cpu {

// y[m, n] = x[m, k] · w[n, k]^T  (w is a Hugging Face Linear weight, [out, in]).
void matmul_nt(const float* x, const float* w, float* y, int m, int n, int k);

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for each of `rows` rows of `dim`.
void rms_norm(const float* x, const float* weight, float* y, int rows, int dim, float eps);
// Fused residual add then norm: residual += x; y = rms_norm(residual).
void add_rms_norm(float* residual, const float* x, const float* weight, float* y, int rows, int dim,
                  float eps);

// Rotary embedding, Hugging Face's rotate_half convention: pairs (i, i + head_dim/2).
// `inv_freq` has head_dim/2 entries (already scaled, e.g. llama3); angles computed in double.
// x: [num_tokens, num_heads, head_dim], rotated in place.
void apply_rope(float* x, const int32_t* positions, int num_tokens, int num_heads, int head_dim,
                std::span<const double> inv_freq);

// out[t, i] = silu(gate_up[t, i]) * gate_up[t, inter + i]; gate_up: [rows, 2 * inter].
void silu_and_mul(const float* gate_up, float* out, int rows, int inter);

// Writes each token's K and V ([num_tokens, num_kv_heads, head_dim]) into its cache slot.
// A negative slot skips the token (padding). kv_dtype kFp8E4m3: each value is stored rounded to
// the nearest e4m3 value (round_to_fp8_e4m3, saturating), still as a float: the reference of
// the CUDA fp8 cache, whose bytes decode to exactly these values.
void reshape_and_cache(const float* k, const float* v, const int64_t* slot_mapping, int num_tokens,
                       int kv_width, float* k_cache, float* v_cache,
                       KvCacheDtype kv_dtype = KvCacheDtype::kAuto);

// Geometry of one attention call, shared by prefill and decode: causal attention of each
// sequence's new tokens over all of its cached tokens, read through its block table.
struct PagedAttentionArgs {
  int num_seqs = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  float scale = 0.f;
  const int32_t* query_start = nullptr;        // [num_seqs + 1]
  const int32_t* context_lens = nullptr;       // [num_seqs]
  const int32_t* block_table_start = nullptr;  // [num_seqs + 1]
  const int32_t* block_table = nullptr;
  int sliding_window = 0;  // > 0: position p attends to (p - sliding_window, p] only
};
// q: [num_tokens, num_heads, head_dim]; out: same shape. Query token i of sequence s (in
// [query_start[s], query_start[s+1])) sits at position context_len - q_len + (i - start) and
// attends to positions [0, that position] (the last sliding_window of them, where set).
void paged_attention(const PagedAttentionArgs& args, const float* q, const float* k_cache,
                     const float* v_cache, float* out);

// Copies block src to block dst for each pair, in a cache of `block_elems` floats per block.
void copy_blocks(float* cache, size_t block_elems, std::span<const int32_t> src,
                 std::span<const int32_t> dst);

}  // namespace folio::cpu
