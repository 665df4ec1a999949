// The launchers of decode kernel v2 (decode_attention_v2.cuh) for a cache of element type C:
// the lane group, q heads per block and lanes' vector count picked from the plan and shape.
// Included by decode_attention_v2.cu (C = T) and decode_attention_v2_fp8.cu (C = uint8_t).
#pragma once

#include <string>
#include <type_traits>

#include "backend/cuda/decode_attention_v2.cuh"

namespace folio::cuda::detail {
namespace {

template <typename T, typename C, int TG, int GC, int VPL>
Status launch(const V2Args<T>& a, int num_seqs, void* stream) {
  const dim3 grid(a.num_kv_heads * a.num_chunks, num_seqs, a.max_partitions);
  const int smem = smem_bytes<CacheChunk<T, C>::kBytes>(GC, a.head_dim);
  FOLIO_RETURN_IF_ERROR(launch_pdl(decode_v2_kernel<T, C, TG, GC, VPL>, grid, dim3(kThreads), smem,
                                   stream, "decode_v2_kernel", a));
  if (a.max_partitions > 1) {
    const int threads = (a.head_dim + 31) / 32 * 32;
    FOLIO_RETURN_IF_ERROR(launch_pdl(decode_v2_merge_kernel<T>, dim3(a.num_heads, num_seqs),
                                     dim3(threads), 0, stream, "decode_v2_merge_kernel", a));
  }
  return Status();
}

// One vector per lane.
template <typename T, typename C, int TG>
Status launch_tg(const V2Args<T>& a, int num_seqs, int gc, void* stream) {
  switch (gc) {
    case 1:
      return launch<T, C, TG, 1, 1>(a, num_seqs, stream);
    case 2:
      return launch<T, C, TG, 2, 1>(a, num_seqs, stream);
    case 4:
      return launch<T, C, TG, 4, 1>(a, num_seqs, stream);
    default:
      return launch<T, C, TG, 8, 1>(a, num_seqs, stream);
  }
}

// Two vectors per lane (rows of 16..32 vectors, at most 4 q heads per block: with 8 the
// registers would spill).
template <typename T, typename C, int TG>
Status launch_tg_wide(const V2Args<T>& a, int num_seqs, int gc, void* stream) {
  switch (gc) {
    case 1:
      return launch<T, C, TG, 1, 2>(a, num_seqs, stream);
    case 2:
      return launch<T, C, TG, 2, 2>(a, num_seqs, stream);
    default:
      return launch<T, C, TG, 4, 2>(a, num_seqs, stream);
  }
}

bool v2_wide_lanes(const DecodePlan& plan, int head_dim, int gc) {
  return plan.lane_vectors == 2 && head_dim / 8 >= 16 && gc <= 4;
}

// launch_decode_v2 (kFp8 false: the cache holds p.dtype) and launch_decode_v2_fp8 (e4m3 codes).
template <bool kFp8>
Status launch_v2(const PagedAttentionParams& p, const DecodePlan& plan, const DecodeWorkspace& ws,
                 void* stream) {
  if (p.head_dim % 8 != 0 || p.head_dim < 8 || p.head_dim > 256)
    return unimplemented("decode_attention: head_dim " + std::to_string(p.head_dim));
  return FOLIO_DISPATCH_DTYPE(p.dtype, T, [&] {
    using C = std::conditional_t<kFp8, uint8_t, T>;
    const int group = p.num_heads / p.num_kv_heads;
    const int gc = plan.head_chunk > 0 ? plan.head_chunk : decode_head_chunk(group);
    const V2Args<T> a = make_v2_args<T>(p, plan, ws, gc);
    const int vecs = p.head_dim / 8;            // 8-element vectors per row
    if (v2_wide_lanes(plan, p.head_dim, gc)) {  // lane group: next power of two of vecs / 2
      if (vecs <= 16) return launch_tg_wide<T, C, 8>(a, p.num_seqs, gc, stream);
      return launch_tg_wide<T, C, 16>(a, p.num_seqs, gc, stream);
    }
    // One vector per lane: the lane group is the next power of two of vecs.
    if (vecs <= 1) return launch_tg<T, C, 1>(a, p.num_seqs, gc, stream);
    if (vecs <= 2) return launch_tg<T, C, 2>(a, p.num_seqs, gc, stream);
    if (vecs <= 4) return launch_tg<T, C, 4>(a, p.num_seqs, gc, stream);
    if (vecs <= 8) return launch_tg<T, C, 8>(a, p.num_seqs, gc, stream);
    if (vecs <= 16) return launch_tg<T, C, 16>(a, p.num_seqs, gc, stream);
    return launch_tg<T, C, 32>(a, p.num_seqs, gc, stream);
  });
}

}  // namespace
}  // namespace folio::cuda::detail
