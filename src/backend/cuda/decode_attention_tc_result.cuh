// Decode kernel tc (decode_attention_tc.cuh): a block's result from its warps' O fragments,
// which the warps store to shared memory as they stand (red4[(w * 8 + i) * 32 + lane], float4),
// merged per (m-tile, lane) into the output row or a partition's partial.
#pragma once

#include "backend/cuda/decode_attention_partitions.cuh"
#include "backend/cuda/decode_attention_tc_layout.cuh"

namespace folio::cuda::detail {
namespace {
namespace tc {

// The block's result from its warps' O fragments red4[(w * 8 + i) * 32 + lane] (lane 4g + t:
// heads 2t, 2t + 1 at dims vdim(i, g), vdim_hi(i, g), as o[i] holds them), the warps' running max
// wm[w * kHeads + head] and sum wl (log2 units): the same arithmetic, in the same order, as
// store_block_result (decode_attention_partitions.cuh), so the same bits. Each thread takes one
// (i, g, t) of the heads in use at a time. L: the layout's dims (vdim and vdim_hi).
template <typename T, typename L>
__device__ __forceinline__ void store_result(const V2Args<T>& a, const float4* red4,
                                             const float* wm, const float* wl, int gcount, int h0,
                                             int row, int s, int part, int nparts) {
  const int tcount = (gcount + 1) / 2;
  for (int k = threadIdx.x; k < 8 * 8 * tcount; k += kThreads) {
    const int t = k % tcount, g = (k / tcount) % 8, i = k / (8 * tcount);
    const int d = L::vdim(i, g), d_hi = L::vdim_hi(i, g);
    const float4* frag = red4 + i * 32 + 4 * g + t;
#pragma unroll
    for (int e = 0; e < 2; ++e) {  // head 2t: (x, z) at dims (d, d_hi); head 2t + 1: (y, w)
      const int hg = 2 * t + e;
      if (hg >= gcount) break;
      float M = kNoMax;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) M = fmaxf(M, wm[w * kHeads + hg]);
      float Ls = 0.f, o0 = 0.f, o1 = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float f = fast_exp2(wm[w * kHeads + hg] - M);
        Ls += wl[w * kHeads + hg] * f;
        const float4 v = frag[w * 8 * 32];
        o0 += (e ? v.y : v.x) * f;
        o1 += (e ? v.w : v.z) * f;
      }
      const int h = h0 + hg;
      if (nparts == 1) {
        T* dst = a.out + (static_cast<int64_t>(row) * a.num_heads + h) * kD + d;
        dst[0] = from_float<T>(Ls > 0.f ? o0 / Ls : 0.f);
        dst[d_hi - d] = from_float<T>(Ls > 0.f ? o1 / Ls : 0.f);
      } else {
        const int64_t pi = (static_cast<int64_t>(s) * a.num_heads + h) * a.max_partitions + part;
        a.ws.out[pi * kD + d] = o0;
        a.ws.out[pi * kD + d_hi] = o1;
        if (d == 0) {
          a.ws.m[pi] = M;
          a.ws.l[pi] = Ls;
        }
      }
    }
  }
}

}  // namespace tc
}  // namespace
}  // namespace folio::cuda::detail
