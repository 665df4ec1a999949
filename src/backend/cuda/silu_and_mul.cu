#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/silu_and_mul.h"

namespace folio::cuda {
namespace {

// grid (rows, column chunks): each thread handles one N-element pack of one row.
template <typename T, int N>
__global__ void silu_and_mul_kernel(const T* gate_up, T* out, int inter) {
  pdl_wait();  // pdl.cuh: inputs come from the previous kernel
  pdl_launch_dependents();
  const int r = blockIdx.x;
  const int i = (blockIdx.y * blockDim.x + threadIdx.x) * N;
  if (i >= inter) return;
  const T* g = gate_up + static_cast<int64_t>(r) * 2 * inter + i;
  float a[N], b[N], y[N];
  load_floats<N>(g, a);
  load_floats<N>(g + inter, b);
#pragma unroll
  for (int j = 0; j < N; ++j) y[j] = a[j] / (1.f + __expf(-a[j])) * b[j];
  store_floats<N>(out + static_cast<int64_t>(r) * inter + i, y);
}

}  // namespace

Status silu_and_mul(DType dtype, const void* gate_up, void* out, int rows, int inter,
                    void* stream) {
  if (rows == 0 || inter == 0) return Status();
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    const int threads = 256;
    auto go = [&](auto kernel, int n) {
      const dim3 grid(rows, (inter / n + threads - 1) / threads);
      (void)launch_pdl(kernel, grid, dim3(threads), 0, stream, "silu_and_mul_kernel",
                       static_cast<const T*>(gate_up), static_cast<T*>(out), inter);
    };
    if (pack8_ok(inter, {gate_up, out}))
      go(silu_and_mul_kernel<T, 8>, 8);
    else
      go(silu_and_mul_kernel<T, 1>, 1);
    return launch_status("silu_and_mul_kernel");
  });
}

}  // namespace folio::cuda
