// PagedAttentionParams: the geometry and device pointers of one paged attention call on the GPU,
// shared by decode_attention and prefill_attention. Same meaning as cpu::PagedAttentionArgs
// (backend/cpu/cpu_ops.h) and ForwardBatch: query token i of sequence s (rows
// [query_start[s], query_start[s+1])) sits at position context_len - q_len + i and attends
// causally to positions [0, that position], read through the sequence's block table.
#pragma once

#include <cstdint>
#include <string>

#include "backend/cuda/dtype.h"
#include "backend/kv_cache_dtype.h"
#include "base/status.h"

namespace folio::cuda {

// Decode with kernel tc only (decode_fuses_qkv_post, decode_attention.h, says where): q and this
// step's K/V come raw from the qkv projection instead of from qkv_post (qkv_post.h), which then
// does not run. The attention kernel splits the row, adds the bias, ropes q and the new k, and
// writes the new K/V into the cache itself, bit for bit as qkv_post would (same rounding points,
// rope_math.cuh); no q/k norm (Qwen3 keeps qkv_post).
struct FusedQkvPost {
  const void* qkv = nullptr;             // [num_tokens, (num_heads + 2 num_kv_heads) head_dim]
  const void* bias = nullptr;            // [(num_heads + 2 num_kv_heads) head_dim] or null
  const int32_t* positions = nullptr;    // [num_tokens]
  const float* inv_freq = nullptr;       // [head_dim / 2], rope's frequencies
  const int64_t* slot_mapping = nullptr; // [num_tokens], each token's cache slot
};

struct PagedAttentionParams {
  DType dtype = DType::kBF16;     // q, out (and the cache, unless kv_dtype says otherwise)
  KvCacheDtype kv_dtype = KvCacheDtype::kAuto;  // kFp8E4m3: k_cache/v_cache hold e4m3 bytes
  int num_seqs = 0;
  int num_heads = 0;
  int num_kv_heads = 0;           // divides num_heads (MHA, GQA, MQA)
  int head_dim = 0;               // a multiple of 8 in [8, 256]
  int block_size = 0;             // any >= 1; 1 is token mode
  float scale = 0.f;              // usually 1 / sqrt(head_dim)
  // > 0: the query at position p attends to keys (p - sliding_window, p] only (Mistral-7B-v0.1,
  // Qwen2/3 with use_sliding_window). Decode runs it on kernels v2 and tc (v1 refuses it),
  // prefill on v2 whatever the plan says (prefill_attention.h).
  int sliding_window = 0;
  const void* q = nullptr;        // [num_tokens, num_heads, head_dim]
  const void* k_cache = nullptr;  // [num_slots, num_kv_heads, head_dim]
  const void* v_cache = nullptr;  // same layout as k_cache
  void* out = nullptr;            // [num_tokens, num_heads, head_dim]
  // Device int32 arrays in ForwardBatch's layout.
  const int32_t* query_start = nullptr;        // [num_seqs + 1]
  const int32_t* context_lens = nullptr;       // [num_seqs]
  const int32_t* block_table_start = nullptr;  // [num_seqs + 1]
  const int32_t* block_table = nullptr;
  // Decode under a plan with DecodePlan::step_split only (else unused): a device int32, the
  // step's partition size (decode_step_partition, uploaded with the step's lengths); 0 or a size
  // a sequence would need more than max_partitions of keeps the plan's partition_size.
  const int32_t* step_partition = nullptr;
  // qkv_post.qkv set: q above is unused and k_cache/v_cache are written (the new token's slot).
  FusedQkvPost qkv_post;
};

// Shape checks shared by both kernels (user-reachable through a model config).
inline Status check_attention_geometry(int num_heads, int num_kv_heads, int head_dim) {
  if (num_heads <= 0 || num_kv_heads <= 0 || num_heads % num_kv_heads != 0)
    return invalid_argument("attention: num_heads " + std::to_string(num_heads) +
                            " is not a positive multiple of num_kv_heads " +
                            std::to_string(num_kv_heads));
  // Rows move as 16-byte (8-element) vectors; 256 covers the Llama family (16..256).
  if (head_dim % 8 != 0 || head_dim < 8 || head_dim > 256)
    return unimplemented("attention: head_dim " + std::to_string(head_dim) +
                         " (the CUDA kernels support multiples of 8 from 8 to 256)");
  return Status();
}

inline Status check_attention_params(const PagedAttentionParams& p) {
  FOLIO_RETURN_IF_ERROR(check_attention_geometry(p.num_heads, p.num_kv_heads, p.head_dim));
  if (p.block_size <= 0)
    return invalid_argument("attention: block_size " + std::to_string(p.block_size));
  return Status();
}

}  // namespace folio::cuda
