// qkv_post: everything between the fused QKV GEMM and attention, in one launch. Replaces
//   split_qkv (+ bias) -> [Qwen3: per-head RMSNorm of q and k] -> rope(q, k) -> reshape_and_cache
// with the same rounding points as that chain (to dtype after the bias add, after the norm, after
// rope), the same per-lane summation order as rms_norm's warp-per-row kernel and the same pinned
// rope arithmetic as rope.cu (rope_math.cuh): the results are bit-identical to the chain.
// All-decode steps on decode kernel tc skip it: the attention kernel does the same work itself
// (PagedAttentionParams::qkv_post, decode_attention_tc_qkv.cuh), bit for bit.
//
// Shapes (T = num_tokens, q_size = num_heads * head_dim, kv_size = num_kv_heads * head_dim):
//   qkv          [T, q_size + 2 * kv_size]  the GEMM output, read only
//   bias         [q_size + 2 * kv_size] or nullptr (Qwen2)
//   q_norm, k_norm [head_dim] each, or both nullptr (no qk norm); eps is their RMSNorm epsilon
//   positions    int32 [T]; inv_freq fp32 [head_dim / 2] (scaling already applied, as for rope)
//   slot_mapping int64 [T]; a negative slot skips the token's K/V write (its q is still written)
//   q_out        [T, num_heads, head_dim]  rotated q, for attention
//   k_cache, v_cache [num_slots, num_kv_heads, head_dim]  (the reshape_and_cache layout)
// head_dim must be even and at most 256. All pointers are device pointers.
#pragma once

#include <cstdint>

#include "backend/cuda/dtype.h"
#include "backend/kv_cache_dtype.h"
#include "base/status.h"

namespace folio::cuda {

// How the launch lays the work out; the results are the same bit for bit.
enum class QkvPostForm {
  kAuto,         // kPairs from kQkvPostPairsMinTokens tokens when there is no qk norm, else kHeads
  kHeads,        // a warp per head (the qk norm's sum needs a head's row in one warp)
  kPairs,        // a block per token, a thread per 4 rope pairs (x[i], x[i + head_dim / 2]) of a
                 // head: more loads in flight; no qk norm
};
inline constexpr int kQkvPostPairsMinTokens = 64;

struct QkvPostParams {
  DType dtype = DType::kBF16;
  // kFp8E4m3: k_cache/v_cache hold e4m3 bytes; each K/V value is rounded to dtype as before,
  // then to e4m3 (saturating), so the cache holds what reshape_and_cache would write.
  KvCacheDtype kv_dtype = KvCacheDtype::kAuto;
  int num_tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  float eps = 1e-6f;
  const void* qkv = nullptr;
  const void* bias = nullptr;
  const void* q_norm = nullptr;
  const void* k_norm = nullptr;
  const int32_t* positions = nullptr;
  const float* inv_freq = nullptr;
  const int64_t* slot_mapping = nullptr;
  void* q_out = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  // FOLIO_QKV_POST=heads|pairs overrides kAuto (the same variable set to 0 makes the executor run
  // the unfused chain instead).
  QkvPostForm form = QkvPostForm::kAuto;
};

// The form a launch of p takes.
QkvPostForm qkv_post_form(const QkvPostParams& p);

Status qkv_post(const QkvPostParams& p, void* stream);

}  // namespace folio::cuda
