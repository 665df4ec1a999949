#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/rope.h"
#include "backend/cuda/rope_math.cuh"

namespace folio::cuda {
namespace {

// The original kernel: one block per token, scalar elements.
template <typename T>
__global__ void rope_legacy_kernel(T* q, T* k, const int32_t* positions, const float* inv_freq,
                                   int num_heads, int num_kv_heads, int head_dim) {
  extern __shared__ float cs[];  // [half] cos, then [half] sin
  const int half = head_dim / 2;
  const int t = blockIdx.x;
  const float pos = static_cast<float>(positions[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float s, c;
    sincosf(pos * inv_freq[i], &s, &c);  // full-precision: angles reach 1e5 rad
    cs[i] = c;
    cs[half + i] = s;
  }
  __syncthreads();
  const int heads = num_heads + (k ? num_kv_heads : 0);
  for (int idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
    const int h = idx / half, i = idx % half;
    T* v = h < num_heads
               ? q + (static_cast<int64_t>(t) * num_heads + h) * head_dim
               : k + (static_cast<int64_t>(t) * num_kv_heads + (h - num_heads)) * head_dim;
    const float a = to_float(v[i]), b = to_float(v[i + half]);
    v[i] = from_float<T>(a * cs[i] - b * cs[half + i]);
    v[i + half] = from_float<T>(b * cs[i] + a * cs[half + i]);
  }
}

// One block per token. cos/sin once per (token, frequency) into shared memory; then thread task
// (head h, pack p) rotates pairs [p*N, p*N + N) of head h with one N-element load/store per half.
template <typename T, int N>
__global__ void rope_kernel(T* q, T* k, const int32_t* positions, const float* inv_freq,
                            int num_heads, int num_kv_heads, int head_dim) {
  extern __shared__ float cs[];  // [half] cos, then [half] sin
  const int half = head_dim / 2;
  const int t = blockIdx.x;
  const int packs = half / N;
  const int tasks = (num_heads + (k ? num_kv_heads : 0)) * packs;
  auto locate = [&](int idx, T** v, int* i) {
    const int h = idx / packs;
    *i = (idx - h * packs) * N;
    *v = h < num_heads ? q + (static_cast<int64_t>(t) * num_heads + h) * head_dim
                       : k + (static_cast<int64_t>(t) * num_kv_heads + (h - num_heads)) * head_dim;
  };
  // The first task's loads go out before the sincos and the barrier (one task per thread is the
  // common case: their latency then overlaps).
  float a[N], b[N];
  T* v = nullptr;
  int i = 0;
  if (static_cast<int>(threadIdx.x) < tasks) {
    locate(threadIdx.x, &v, &i);
    load_floats<N>(v + i, a);
    load_floats<N>(v + i + half, b);
  }
  const int32_t pos = positions[t];
  for (int f = threadIdx.x; f < half; f += blockDim.x)
    rope_cos_sin(pos, inv_freq[f], &cs[f], &cs[half + f]);
  __syncthreads();
  for (int idx = threadIdx.x; idx < tasks; idx += blockDim.x) {
    if (idx != static_cast<int>(threadIdx.x)) {
      locate(idx, &v, &i);
      load_floats<N>(v + i, a);
      load_floats<N>(v + i + half, b);
    }
    float lo[N], hi[N];
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float c = cs[i + j], s = cs[half + i + j];
      lo[j] = rope_lo(a[j], b[j], c, s);
      hi[j] = rope_hi(a[j], b[j], c, s);
    }
    store_floats<N>(v + i, lo);
    store_floats<N>(v + i + half, hi);
  }
}

bool force_legacy() {
  static const bool forced = [] {
    const char* e = std::getenv("FOLIO_ROPE");
    return e != nullptr && std::strcmp(e, "legacy") == 0;
  }();
  return forced;
}

}  // namespace

Status rope_with(RopeKernel kernel, DType dtype, void* q, void* k, const int32_t* positions,
                 const float* inv_freq, int num_tokens, int num_heads, int num_kv_heads,
                 int head_dim, void* stream) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    return invalid_argument("rope: bad head_dim " + std::to_string(head_dim));
  if (num_tokens < 0 || num_heads < 0 || (k && num_kv_heads < 0))
    return invalid_argument("rope: negative size");
  if (num_tokens == 0) return Status();
  if (kernel == RopeKernel::kAuto && force_legacy()) kernel = RopeKernel::kLegacy;
  const size_t smem = sizeof(float) * head_dim;
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    if (kernel == RopeKernel::kLegacy) {
      rope_legacy_kernel<T><<<num_tokens, 128, smem, as_stream(stream)>>>(
          static_cast<T*>(q), static_cast<T*>(k), positions, inv_freq, num_heads, num_kv_heads,
          head_dim);
      return launch_status("rope_legacy_kernel");
    }
    const int half = head_dim / 2;
    const int heads = num_heads + (k ? num_kv_heads : 0);
    auto go = [&](auto kern, int n) {
      // One task per thread when it fits in 512 threads (at least enough for the sincos).
      const int tasks = std::max(heads * (half / n), half);
      const int threads = std::min(512, (tasks + 31) / 32 * 32);
      kern<<<num_tokens, threads, smem, as_stream(stream)>>>(static_cast<T*>(q), static_cast<T*>(k),
                                                             positions, inv_freq, num_heads,
                                                             num_kv_heads, head_dim);
    };
    if (pack8_ok(half, {q, k}))
      go(rope_kernel<T, 8>, 8);
    else
      go(rope_kernel<T, 1>, 1);
    return launch_status("rope_kernel");
  });
}

Status rope(DType dtype, void* q, void* k, const int32_t* positions, const float* inv_freq,
            int num_tokens, int num_heads, int num_kv_heads, int head_dim, void* stream) {
  return rope_with(RopeKernel::kAuto, dtype, q, k, positions, inv_freq, num_tokens, num_heads,
                   num_kv_heads, head_dim, stream);
}

}  // namespace folio::cuda
