// Block-level building blocks of the GPU sampler (sample_rows.cu, row_logprobs.cu): one thread
// block of kSampleThreads works on one logits row. Only .cu files include this.
#pragma once

#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cstdint>

namespace folio::cuda::sampling {

constexpr int kSampleThreads = 512;
constexpr int kSampleWarps = kSampleThreads / 32;

// A 32-bit key whose unsigned order is the float order (-inf < ... < -0 < +0 < ... < +inf).
// NaN keys are meaningless: callers skip NaN first.
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t b = __float_as_uint(x);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float key_to_float(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// Block-wide sums of N doubles per thread; every thread returns with the totals in `v`.
// `scratch` holds kSampleWarps * N doubles of shared memory.
template <int N>
__device__ __forceinline__ void block_sum(double (&v)[N], double* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v[i] += __shfl_xor_sync(0xffffffffu, v[i], o);
  if (lane == 0)
#pragma unroll
    for (int i = 0; i < N; ++i) scratch[warp * N + i] = v[i];
  __syncthreads();
#pragma unroll
  for (int i = 0; i < N; ++i) {
    double t = 0.0;
    for (int w = 0; w < kSampleWarps; ++w) t += scratch[w * N + i];
    v[i] = t;
  }
  __syncthreads();  // scratch is reused by the next call
}

__device__ __forceinline__ double block_sum1(double v, double* scratch) {
  double a[1] = {v};
  block_sum<1>(a, scratch);
  return a[0];
}

// A candidate for "the best token": higher key first, then the lower id; id == INT_MAX is none.
struct Best {
  float key;
  int32_t id;
};

__device__ __forceinline__ Best no_best() { return {-FLT_MAX, INT_MAX}; }

__device__ __forceinline__ bool better(const Best& a, const Best& b) {
  if (a.id == INT_MAX) return false;
  if (b.id == INT_MAX) return true;
  return a.key > b.key || (a.key == b.key && a.id < b.id);
}

// Block-wide best; every thread returns it. `scratch` holds kSampleWarps Best entries.
__device__ __forceinline__ Best block_best(Best v, Best* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Best other{__shfl_xor_sync(0xffffffffu, v.key, o), __shfl_xor_sync(0xffffffffu, v.id, o)};
    if (better(other, v)) v = other;
  }
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  Best r = scratch[0];
  for (int w = 1; w < kSampleWarps; ++w)
    if (better(scratch[w], r)) r = scratch[w];
  __syncthreads();
  return r;
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < kSampleWarps; ++w) r = fmaxf(r, scratch[w]);
  __syncthreads();
  return r;
}

// Shared memory a sampler kernel needs for the reductions above.
struct SampleShared {
  double sums[kSampleWarps * 16];
  Best best[kSampleWarps];
  float maxes[kSampleWarps];
};

}  // namespace folio::cuda::sampling
