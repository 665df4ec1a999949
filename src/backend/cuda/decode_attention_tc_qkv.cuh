// Decode kernel tc's fused prologue (PagedAttentionParams::qkv_post): what qkv_post (qkv_post.cu)
// would have done for a decode step, done by the attention blocks themselves. Each block ropes
// its own q heads from the raw qkv row; the block holding a sequence's last partition ropes the
// new token's k and writes the new K and V into the cache. The arithmetic is qkv_post's, step by
// step: the bias added in fp32 and rounded to T (split_qkv), cos/sin by rope_cos_sin, rope_lo /
// rope_hi, the result rounded to T (and, for an fp8 cache, that T value encoded as e4m3). No q/k
// norm: models with one keep qkv_post. head_dim 128, kThreads 128.
#pragma once

#include "backend/cuda/decode_attention_partitions.cuh"
#include "backend/cuda/fp8_e4m3.cuh"
#include "backend/cuda/rope_math.cuh"

namespace folio::cuda::detail {
namespace {
namespace tc {

constexpr int kHalf = 64;  // head_dim / 2: rope pairs (i, i + 64)
static_assert(kThreads == 2 * kHalf, "one thread per K pair and per V pair");

// Element `col` of token `row`'s qkv row, with the bias as split_qkv adds it.
template <typename T>
__device__ __forceinline__ float qkv_value(const V2Args<T>& a, const T* row_qkv, int col) {
  const float v = to_float(row_qkv[col]);
  const T* bias = static_cast<const T*>(a.qkv_post.bias);
  return bias ? to_float(from_float<T>(v + to_float(bias[col]))) : v;
}

template <typename T>
__device__ __forceinline__ const T* qkv_row(const V2Args<T>& a, int row) {
  return static_cast<const T*>(a.qkv_post.qkv) +
         static_cast<int64_t>(row) * (a.num_heads + 2 * a.num_kv_heads) * 128;
}

// cs[i] = cos, cs[kHalf + i] = sin of position positions[row] at frequency i (all threads; the
// caller syncs). Reads only the host's upload: may run before pdl_wait.
template <typename T>
__device__ __forceinline__ void rope_table(const V2Args<T>& a, int row, float* cs) {
  const int32_t pos = a.qkv_post.positions[row];
  for (int i = threadIdx.x; i < kHalf; i += blockDim.x)
    rope_cos_sin(pos, a.qkv_post.inv_freq[i], &cs[i], &cs[kHalf + i]);
}

// Writes KV head kvh's K (roped) and V of token `row` into cache slot `slot` (< 0: none, as
// qkv_post skips such rows). C: the cache element (T, or uint8_t e4m3 codes).
template <typename T, typename C>
__device__ __forceinline__ void write_new_kv(const V2Args<T>& a, int row, int kvh, const float* cs,
                                             int64_t slot) {
  if (slot < 0) return;
  const int q_size = a.num_heads * 128, kv_size = a.num_kv_heads * 128;
  const T* src = qkv_row(a, row);
  const int64_t off = slot * kv_size + static_cast<int64_t>(kvh) * 128;
  // The caches are read-only to attention everywhere else; here they take this step's token.
  auto put = [&](const void* cache_ro, int d, float v) {  // v is a T value
    void* cache = const_cast<void*>(cache_ro);
    if constexpr (sizeof(C) == 1) {
      const float in[1] = {v};
      store_e4m3<1>(static_cast<uint8_t*>(cache) + off + d, in);
    } else {
      static_cast<T*>(cache)[off + d] = from_float<T>(v);
    }
  };
  const int i = threadIdx.x;
  if (i < kHalf) {
    const int col = q_size + kvh * 128;
    const float lo = qkv_value(a, src, col + i), hi = qkv_value(a, src, col + kHalf + i);
    const float c = cs[i], s = cs[kHalf + i];
    put(a.k_cache, i, to_float(from_float<T>(rope_lo(lo, hi, c, s))));
    put(a.k_cache, kHalf + i, to_float(from_float<T>(rope_hi(lo, hi, c, s))));
  } else {
    const int col = q_size + kv_size + kvh * 128, d = 2 * (i - kHalf);
    put(a.v_cache, d, qkv_value(a, src, col + d));
    put(a.v_cache, d + 1, qkv_value(a, src, col + d + 1));
  }
}

// Lane (g, t)'s q element of head `head` at dim d < kHalf and its partner d + kHalf, roped and
// rounded to T as qkv_post stores q, as floats.
template <typename T>
__device__ __forceinline__ void roped_q_pair(const V2Args<T>& a, const T* src, int head, int d,
                                             const float* cs, float& lo_out, float& hi_out) {
  const int col = head * 128 + d;
  const float lo = qkv_value(a, src, col), hi = qkv_value(a, src, col + kHalf);
  lo_out = to_float(from_float<T>(rope_lo(lo, hi, cs[d], cs[kHalf + d])));
  hi_out = to_float(from_float<T>(rope_hi(lo, hi, cs[d], cs[kHalf + d])));
}

}  // namespace tc
}  // namespace
}  // namespace folio::cuda::detail
