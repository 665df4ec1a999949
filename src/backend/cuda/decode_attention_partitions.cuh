// The split-K (flash-decoding) plumbing shared by decode kernels v2 (decode_attention_v2.cuh)
// and tc (decode_attention_tc.cuh): their kernel arguments, a sequence's partition size and
// count, a block's share of the grid, the store of a block's result (the output row, or one
// partition's partial in the workspace) and the kernel that merges a split sequence's partials.
// Included by those kernels' headers only (an anonymous namespace per translation unit).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/paged_kernel_args.cuh"
#include "backend/cuda/decode_attention_impl.h"
#include "backend/cuda/device_pipeline.cuh"

namespace folio::cuda::detail {
namespace {


constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNoMax = -1e30f;  // running max before any token: finite, so exp2(m - m') is 0 or 1

template <typename T>
struct V2Args : PagedPointers<T> {  // k_cache / v_cache point at C elements
  DecodeWorkspace ws;               // scores and maxima in log2 units
  int num_heads, num_kv_heads, head_dim, block_size, num_chunks, partition_size, max_partitions;
  int refine_partitions;  // DecodePlan::refine_partitions
  const int32_t* step_partition;  // DecodePlan::step_split: PagedAttentionParams's; else null
  float scale_log2;       // scale * log2(e)
  int window;             // PagedAttentionParams::sliding_window (v2 only; 0: none)
  int early;              // pdl_early_reads(): tc and the merge read metadata before pdl_wait
  int l2_ahead;           // tc's register forms: K/V prefetched into L2 this many warp steps
                          // ahead (0: none; 1 is the register buffer's own chunk, so >= 2)
  int l2_lines;           // ... as one prefetch.global.L2 per 128-byte line (1) or one bulk
                          // prefetch per row (0); decode_tc_l2_ahead.h says which GPU takes which
  FusedQkvPost qkv_post;  // tc only, fused when qkv_post.qkv is set (decode_attention_tc_qkv.cuh)
};

// A sequence's partition size and count, from its device-side context length: the plan's size,
// or under step_split the step's (where it is a positive multiple of 64 that takes at most
// max_partitions partitions of this sequence), or under refine_partitions the finest halving of
// it (down to kMinRefinedPartition) whose partitions still number at most max_partitions. The
// main kernels and the merge agree on it.
template <typename T>
__device__ __forceinline__ int sequence_partition_size(const V2Args<T>& a, int ctx) {
  if (a.step_partition != nullptr) {
    const int sp = *a.step_partition;
    if (sp > 0 && sp % 64 == 0 && (ctx + sp - 1) / sp <= a.max_partitions) return sp;
  }
  int P = a.partition_size;
  if (a.refine_partitions)
    while (P > kMinRefinedPartition && (ctx + P / 2 - 1) / (P / 2) <= a.max_partitions) P /= 2;
  return P;
}
template <typename T>
__device__ __forceinline__ int sequence_partitions(const V2Args<T>& a, int ctx, int P) {
  return min(max(1, (ctx + P - 1) / P), a.max_partitions);
}
// The first key a sequence of `ctx` tokens attends to: under a sliding window the last `window`
// keys only, so partitions split [window_start, ctx) as they would a context of that length.
template <typename T>
__device__ __forceinline__ int window_start(const V2Args<T>& a, int ctx) {
  return a.window > 0 ? max(0, ctx - a.window) : 0;
}

// The kernel arguments for `p` under `plan`, blocks of `head_chunk` q heads (of each GQA group).
template <typename T>
V2Args<T> make_v2_args(const PagedAttentionParams& p, const DecodePlan& plan,
                       const DecodeWorkspace& ws, int head_chunk) {
  V2Args<T> a{};
  a.set_pointers(p);
  a.ws = ws;
  a.num_heads = p.num_heads;
  a.num_kv_heads = p.num_kv_heads;
  a.head_dim = p.head_dim;
  a.block_size = p.block_size;
  const int group = p.num_heads / p.num_kv_heads;
  a.num_chunks = (group + head_chunk - 1) / head_chunk;
  a.partition_size = plan.partition_size;
  a.max_partitions = plan.max_partitions;
  a.step_partition = plan.step_split ? p.step_partition : nullptr;
  a.refine_partitions = plan.refine_partitions ? 1 : 0;
  a.early = pdl_early_reads() ? 1 : 0;
  a.qkv_post = p.qkv_post;
  a.scale_log2 = p.scale * kLog2e;
  a.window = p.sliding_window;
  return a;
}

// One block's share of the grid (num_kv_heads * num_chunks, num_seqs, max_partitions) with
// `gc` q heads per head chunk: its KV head, sequence, partition (tokens [start, start + n) of
// the context, from window_start on) and q heads h0 .. h0 + gcount - 1. False when the partition
// lies past the sequence's context, which comes from device memory (CUDA-graph plans run past short
// ones).
struct DecodeBlockSpan {
  int kvh, s, part, nparts, start, n, gcount, h0, row;
  const int32_t* table;  // the sequence's block table
};
template <typename T>
__device__ __forceinline__ bool decode_block_span(const V2Args<T>& a, int gc,
                                                  DecodeBlockSpan& b) {
  const int chunk = blockIdx.x % a.num_chunks;
  b.kvh = blockIdx.x / a.num_chunks;
  b.s = blockIdx.y;
  b.part = blockIdx.z;
  const int ctx = a.context_lens[b.s];
  const int first = window_start(a, ctx), len = ctx - first;
  const int P = sequence_partition_size(a, len);
  b.nparts = sequence_partitions(a, len, P);
  if (b.part >= b.nparts) return false;
  b.start = first + b.part * P;
  b.n = max(0, min(ctx - b.start, P));
  const int G = a.num_heads / a.num_kv_heads;
  b.gcount = min(gc, G - chunk * gc);
  b.h0 = b.kvh * G + chunk * gc;
  b.row = a.query_start[b.s];
  b.table = a.block_table + a.block_table_start[b.s];
  return true;
}

// A block's result from its kWarps warps' partials: per q head g < gcount (head h0 + g), the
// warps' running max wm[w * GC + g] and sum wl[w * GC + g] (log2 units) and unnormalised output
// red[(w * GC + g) * D + d] merge into the output row (one partition) or the partition's slot
// of the workspace (a split sequence, merged by decode_v2_merge_kernel). All kThreads threads.
template <typename T, int GC>
__device__ __forceinline__ void store_block_result(const V2Args<T>& a, const float* red,
                                                   const float* wm, const float* wl, int gcount,
                                                   int h0, int row, int s, int part, int nparts) {
  const int D = a.head_dim;
  for (int i = threadIdx.x; i < gcount * D; i += kThreads) {
    const int g = i / D, d = i - g * D, h = h0 + g;
    float M = kNoMax;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, wm[w * GC + g]);
    float L = 0.f, o = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = fast_exp2(wm[w * GC + g] - M);
      L += wl[w * GC + g] * f;
      o += red[(w * GC + g) * D + d] * f;
    }
    if (nparts == 1) {
      a.out[(static_cast<int64_t>(row) * a.num_heads + h) * D + d] =
          from_float<T>(L > 0.f ? o / L : 0.f);
    } else {
      const int64_t pi = (static_cast<int64_t>(s) * a.num_heads + h) * a.max_partitions + part;
      a.ws.out[pi * D + d] = o;
      if (d == 0) {
        a.ws.m[pi] = M;
        a.ws.l[pi] = L;
      }
    }
  }
}

// grid (num_heads, num_seqs): merges the partitions of the sequences that were split; the
// number of partitions comes from the device-side context length, as in the main kernel.
template <typename T>
__global__ void decode_v2_merge_kernel(V2Args<T> a) {
  if (!a.early) pdl_wait();  // FOLIO_PDL_EARLY=0: everything after the wait
  const int h = blockIdx.x, s = blockIdx.y;
  const int D = a.head_dim, ctx = a.context_lens[s];  // the host's upload: read before the wait
  const int len = ctx - window_start(a, ctx);
  const int nparts = sequence_partitions(a, len, sequence_partition_size(a, len));
  pdl_wait();  // pdl.cuh: the partials come from the previous kernel
  pdl_launch_dependents();
  if (nparts <= 1) return;  // the main kernel wrote the output
  const int64_t base = (static_cast<int64_t>(s) * a.num_heads + h) * a.max_partitions;
  const float* m = a.ws.m + base;
  const float* l = a.ws.l + base;
  float M = kNoMax;
  for (int p = 0; p < nparts; ++p) M = fmaxf(M, m[p]);
  const int row = a.query_start[s];
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float L = 0.f, o = 0.f;
    for (int p = 0; p < nparts; ++p) {
      const float w = fast_exp2(m[p] - M);
      L += l[p] * w;
      o += a.ws.out[(base + p) * D + d] * w;
    }
    a.out[(static_cast<int64_t>(row) * a.num_heads + h) * D + d] =
        from_float<T>(L > 0.f ? o / L : 0.f);
  }
}

}  // namespace
}  // namespace folio::cuda::detail
