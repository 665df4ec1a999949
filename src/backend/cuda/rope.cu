#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/rope.h"

namespace folio::cuda {
namespace {

// One block per token: cos/sin of the token's angles go to shared memory once, then threads
// stride over (head, i) pairs of q then k; adjacent threads touch adjacent elements.
template <typename T>
__global__ void rope_kernel(T* q, T* k, const int32_t* positions, const float* inv_freq,
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

}  // namespace

Status rope(DType dtype, void* q, void* k, const int32_t* positions, const float* inv_freq,
            int num_tokens, int num_heads, int num_kv_heads, int head_dim, void* stream) {
  if (head_dim % 2 != 0) return invalid_argument("rope: odd head_dim " + std::to_string(head_dim));
  if (num_tokens == 0) return Status();
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    const size_t smem = sizeof(float) * head_dim;
    rope_kernel<T><<<num_tokens, 128, smem, as_stream(stream)>>>(
        static_cast<T*>(q), static_cast<T*>(k), positions, inv_freq, num_heads, num_kv_heads,
        head_dim);
    return launch_status("rope_kernel");
  });
}

}  // namespace folio::cuda
