#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/split_qkv.h"

namespace folio::cuda {
namespace {

// One block per token; threads stride over N-element packs of the fused row. With N = 8 the
// segment sizes are multiples of 8, so no pack straddles q/k/v.
template <typename T, int N>
__global__ void split_qkv_kernel(const T* qkv, const T* bias, T* q, T* k, T* v, int q_size,
                                 int kv_size) {
  const int t = blockIdx.x;
  const int width = q_size + 2 * kv_size;
  const T* row = qkv + static_cast<int64_t>(t) * width;
  for (int i = threadIdx.x * N; i < width; i += blockDim.x * N) {
    float x[N];
    load_floats<N>(row + i, x);
    if (bias) {
      float b[N];
      load_floats<N>(bias + i, b);
#pragma unroll
      for (int j = 0; j < N; ++j) x[j] += b[j];
    }
    T* dst;
    if (i < q_size)
      dst = q + static_cast<int64_t>(t) * q_size + i;
    else if (i < q_size + kv_size)
      dst = k + static_cast<int64_t>(t) * kv_size + (i - q_size);
    else
      dst = v + static_cast<int64_t>(t) * kv_size + (i - q_size - kv_size);
    store_floats<N>(dst, x);
  }
}

}  // namespace

Status split_qkv(DType dtype, const void* qkv, const void* bias, void* q, void* k, void* v,
                 int num_tokens, int q_size, int kv_size, void* stream) {
  if (num_tokens == 0) return Status();
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    auto go = [&](auto kernel) {
      kernel<<<num_tokens, 256, 0, as_stream(stream)>>>(
          static_cast<const T*>(qkv), static_cast<const T*>(bias), static_cast<T*>(q),
          static_cast<T*>(k), static_cast<T*>(v), q_size, kv_size);
    };
    if (pack8_ok(q_size, {qkv, bias, q, k, v}) && kv_size % 8 == 0)
      go(split_qkv_kernel<T, 8>);
    else
      go(split_qkv_kernel<T, 1>);
    return launch_status("split_qkv_kernel");
  });
}

}  // namespace folio::cuda
