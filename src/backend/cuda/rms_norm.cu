#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/rms_norm.h"

namespace folio::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

// One warp per row. Pass 1 (optionally adding x into the residual) sums squares; pass 2 rereads
// the row (each lane its own elements, so in place is safe) and writes y.
template <typename T, int N, bool kAdd>
__global__ void rms_norm_kernel(const T* x, T* residual, const T* weight, T* y, int rows, int dim,
                                float eps) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int64_t base = static_cast<int64_t>(row) * dim;
  const T* src = kAdd ? residual + base : x + base;
  float ss = 0.f;
  for (int i = lane * N; i < dim; i += 32 * N) {
    float v[N];
    load_floats<N>(src + i, v);
    if constexpr (kAdd) {
      float a[N];
      load_floats<N>(x + base + i, a);
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = to_float(from_float<T>(v[j] + a[j]));
      store_floats<N>(residual + base + i, v);
    }
#pragma unroll
    for (int j = 0; j < N; ++j) ss += v[j] * v[j];
  }
  const float inv = rsqrtf(warp_sum(ss) / dim + eps);
  for (int i = lane * N; i < dim; i += 32 * N) {
    float v[N], w[N];
    load_floats<N>(src + i, v);
    load_floats<N>(weight + i, w);
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = v[j] * inv * w[j];
    store_floats<N>(y + base + i, v);
  }
}

template <typename T, bool kAdd>
Status launch(const void* x, void* residual, const void* weight, void* y, int rows, int dim,
              float eps, void* stream) {
  const int blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const int threads = 32 * kWarpsPerBlock;
  auto go = [&](auto kernel) {
    kernel<<<blocks, threads, 0, as_stream(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(residual), static_cast<const T*>(weight),
        static_cast<T*>(y), rows, dim, eps);
  };
  if (pack8_ok(dim, {x, residual, weight, y}))
    go(rms_norm_kernel<T, 8, kAdd>);
  else
    go(rms_norm_kernel<T, 1, kAdd>);
  return launch_status("rms_norm_kernel");
}

}  // namespace

Status rms_norm(DType dtype, const void* x, const void* weight, void* y, int rows, int dim,
                float eps, void* stream) {
  if (rows == 0) return Status();
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    return launch<T, false>(x, nullptr, weight, y, rows, dim, eps, stream);
  });
}

Status add_rms_norm(DType dtype, void* residual, const void* x, const void* weight, void* y,
                    int rows, int dim, float eps, void* stream) {
  if (rows == 0) return Status();
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    return launch<T, true>(x, residual, weight, y, rows, dim, eps, stream);
  });
}

}  // namespace folio::cuda
