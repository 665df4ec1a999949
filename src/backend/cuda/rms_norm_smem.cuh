// RMSNorm of M rows into shared memory, inside another kernel (the skinny GEMV, skinny_gemm.cu),
// bit for bit what rms_norm (rms_norm.cu) writes for the same rows: that launch, its round trip
// through global memory and its completion latency leave the batch-1 decode step.
//
// rms_norm's block kernel at dim <= 8192 (8-element packs, one per thread: the K = 1 case) runs
// VT = 32 ceil(dim / 256) threads; thread i sums the squares of pack i in element order, a
// warp_sum per warp of 32, then every warp sums the VT / 32 partials with one more warp_sum.
// Here any block of whole warps plays those VT "virtual threads": warp w of the block takes
// virtual warps w, w + warps, ..., lane l its lane l, so each partial and the final sum see the
// same operands in the same order, and the scale y = x * inv * w rounds once to T as there.
// Change both together (rms_norm.cu says so too).
#pragma once

#include "backend/cuda/cuda_common.cuh"

namespace folio::cuda {

// Rows the prologue normalises at most, and the widest row (packs of 8 per virtual thread).
inline constexpr int kSmemNormMaxRows = 4;
inline constexpr int kSmemNormMaxDim = 8192;

// x [M, dim] (global) -> xs [M, dim] (shared), normalised with weight [dim] and eps, by a group
// of `warps` warps (this thread's warp is `warp` of them) that `sync()` makes wait for each
// other: every thread of the group must call it; xs is complete on return. x is read with plain
// loads (coherent: it may have been written earlier in the same kernel by other blocks).
// dim % 8 == 0, dim <= kSmemNormMaxDim, x and weight 16-byte aligned.
template <typename T, int M, typename Sync>
__device__ __forceinline__ void rms_norm_rows_to_smem_group(const T* x, const T* weight, T* xs,
                                                            int dim, float eps, int warp,
                                                            int warps, Sync sync) {
  static_assert(M >= 1 && M <= kSmemNormMaxRows, "rows");
  __shared__ float partial[M][32];
  const int lane = threadIdx.x % 32;
  const int packs = dim / 8, vwarps = (packs + 31) / 32;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    for (int vw = warp; vw < vwarps; vw += warps) {  // warp-uniform
      const int i = vw * 32 + lane;
      float ss = 0.f;
      if (i < packs) {
        float v[8];
        load_floats<8>(x + static_cast<int64_t>(m) * dim + i * 8, v);
#pragma unroll
        for (int j = 0; j < 8; ++j) ss += v[j] * v[j];
        store_floats<8>(xs + m * dim + i * 8, v);  // exact: v came from T
      }
      ss = warp_sum(ss);
      if (lane == 0) partial[m][vw] = ss;
    }
  }
  sync();
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float t = lane < vwarps ? partial[m][lane] : 0.f;
    const float inv = rsqrtf(warp_sum(t) / dim + eps);
    for (int vw = warp; vw < vwarps; vw += warps) {
      const int i = vw * 32 + lane;
      if (i < packs) {  // each lane rescales the pack it stored: no barrier between
        float v[8], w[8];
        load_floats<8>(xs + m * dim + i * 8, v);
        load_floats<8>(weight + i * 8, w);
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = v[j] * inv * w[j];
        store_floats<8>(xs + m * dim + i * 8, v);
      }
    }
  }
  sync();
}

// The same by the whole block (it has block barriers).
template <typename T, int M>
__device__ __forceinline__ void rms_norm_rows_to_smem(const T* x, const T* weight, T* xs, int dim,
                                                      float eps) {
  rms_norm_rows_to_smem_group<T, M>(x, weight, xs, dim, eps, threadIdx.x / 32, blockDim.x / 32,
                                    [] { __syncthreads(); });
}

}  // namespace folio::cuda
