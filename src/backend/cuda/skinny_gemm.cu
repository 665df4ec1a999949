#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/skinny_gemm.h"

namespace folio::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kUnroll = 4;  // 16-byte weight loads in flight per lane

// grid (ceil(n / kWarps)), kWarps warps: warp w of block b computes output column
// j = b * kWarps + w for every row of x. Lane l reads elements [8 (l + 32 i), +8) of w's row j.
template <typename T, int M>
__global__ void __launch_bounds__(32 * kWarps)
    skinny_gemm_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int n,
                       int k, bool accumulate) {
  const int lane = threadIdx.x % 32;
  const int j = blockIdx.x * kWarps + threadIdx.x / 32;
  if (j >= n) return;
  const T* wr = w + static_cast<int64_t>(j) * k;
  float acc[M];
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = 0.f;
  const int packs = k / 8;
  int p = lane;
  for (; p + 32 * (kUnroll - 1) < packs; p += 32 * kUnroll) {
    float wf[kUnroll][8];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) load_floats<8>(wr + 8 * (p + 32 * u), wf[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < M; ++r) {
        float xf[8];
        load_floats<8>(x + static_cast<int64_t>(r) * k + 8 * (p + 32 * u), xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r] = fmaf(wf[u][e], xf[e], acc[r]);
      }
  }
  for (; p < packs; p += 32) {
    float wf[8];
    load_floats<8>(wr + 8 * p, wf);
#pragma unroll
    for (int r = 0; r < M; ++r) {
      float xf[8];
      load_floats<8>(x + static_cast<int64_t>(r) * k + 8 * p, xf);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[r] = fmaf(wf[e], xf[e], acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = warp_sum(acc[r]);
  if (lane < M) {
    float v = 0.f;
#pragma unroll
    for (int r = 0; r < M; ++r)
      if (r == lane) v = acc[r];
    T* out = y + static_cast<int64_t>(lane) * n + j;
    if (accumulate) v += to_float(*out);
    *out = from_float<T>(v);
  }
}

template <typename T, int M>
Status launch(const void* x, const void* w, void* y, int n, int k, bool accumulate, void* stream) {
  const int blocks = (n + kWarps - 1) / kWarps;
  skinny_gemm_kernel<T, M><<<blocks, 32 * kWarps, 0, as_stream(stream)>>>(
      static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y), n, k, accumulate);
  return launch_status("skinny_gemm_kernel");
}

template <typename T>
Status dispatch_m(int m, const void* x, const void* w, void* y, int n, int k, bool accumulate,
                  void* stream) {
  switch (m) {
    case 1: return launch<T, 1>(x, w, y, n, k, accumulate, stream);
    case 2: return launch<T, 2>(x, w, y, n, k, accumulate, stream);
    case 3: return launch<T, 3>(x, w, y, n, k, accumulate, stream);
    case 4: return launch<T, 4>(x, w, y, n, k, accumulate, stream);
    case 5: return launch<T, 5>(x, w, y, n, k, accumulate, stream);
    case 6: return launch<T, 6>(x, w, y, n, k, accumulate, stream);
    case 7: return launch<T, 7>(x, w, y, n, k, accumulate, stream);
    default: return launch<T, 8>(x, w, y, n, k, accumulate, stream);
  }
}

}  // namespace

bool skinny_gemm_supported(int m, int k, const void* x, const void* w, const void* y) {
  auto aligned = [](const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; };
  return m >= 1 && m <= kSkinnyMaxM && k > 0 && k % 8 == 0 && aligned(x, 16) && aligned(w, 16) &&
         aligned(y, 2);
}

Status skinny_gemm(DType dtype, const void* x, const void* w, void* y, int m, int n, int k,
                   bool accumulate, void* stream) {
  if (!skinny_gemm_supported(m, k, x, w, y))
    return invalid_argument("skinny_gemm: m must be in [1, 8], k a multiple of 8, operands aligned");
  if (n <= 0) return Status();
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    return dispatch_m<T>(m, x, w, y, n, k, accumulate, stream);
  });
}

}  // namespace folio::cuda
