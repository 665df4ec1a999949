// dequant_kv_blocks (kv_dequant.h): fp8 e4m3 cache blocks -> 16-bit scratch blocks, exactly.
#include <string>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_e4m3.cuh"
#include "backend/cuda/kv_dequant.h"

namespace folio::cuda {
namespace {

constexpr int kThreads = 256;

// Eight e4m3 codes -> eight T values packed in 16 bytes. Exact: every e4m3 value is an fp16 value
// (the hardware conversion goes through fp16) and a bf16 value (3 mantissa bits, exponents
// 2^-9..2^8), NaN stays NaN.
template <typename T>
__device__ __forceinline__ uint4 dequant8(uint2 codes) {
  const uint4 h = e4m3x8_to_half8(codes);
  if constexpr (std::is_same_v<T, __half>) {
    return h;
  } else {
    uint32_t w[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __nv_bfloat162 b =
          __float22bfloat162_rn(__half22float2(*reinterpret_cast<const __half2*>(&w[i])));
      w[i] = *reinterpret_cast<const uint32_t*>(&b);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// grid (num_pairs, 2): block (i, c) converts pair i's block of cache c (0: K, 1: V), each thread
// 8 codes (8 bytes in, 16 bytes out) per step.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    dequant_kv_blocks_kernel(const uint8_t* k_cache, const uint8_t* v_cache, T* k_out, T* v_out,
                             int64_t block_elems, const BlockCopy* pairs) {
  const BlockCopy c = pairs[blockIdx.x];
  const bool v = blockIdx.y == 1;
  const uint2* src = reinterpret_cast<const uint2*>((v ? v_cache : k_cache) + c.src * block_elems);
  uint4* dst = reinterpret_cast<uint4*>((v ? v_out : k_out) + c.dst * block_elems);
  const int64_t vecs = block_elems / 8;
  for (int64_t i = threadIdx.x; i < vecs; i += kThreads) dst[i] = dequant8<T>(src[i]);
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

Status dequant_kv_blocks(DType out_dtype, const void* k_cache, const void* v_cache, void* k_out,
                         void* v_out, int64_t block_elems, const BlockCopy* pairs, int num_pairs,
                         void* stream) {
  if (num_pairs < 0) return invalid_argument("dequant_kv_blocks: negative num_pairs");
  if (num_pairs == 0) return Status();
  if (block_elems <= 0 || block_elems % 8 != 0)
    return invalid_argument("dequant_kv_blocks: block of " + std::to_string(block_elems) +
                            " elements is not a positive multiple of 8");
  if (!aligned16(k_cache) || !aligned16(v_cache) || !aligned16(k_out) || !aligned16(v_out))
    return invalid_argument("dequant_kv_blocks: caches and outputs must be 16-byte aligned");
  return FOLIO_DISPATCH_DTYPE(out_dtype, T, [&] {
    dequant_kv_blocks_kernel<T><<<dim3(num_pairs, 2), kThreads, 0, as_stream(stream)>>>(
        static_cast<const uint8_t*>(k_cache), static_cast<const uint8_t*>(v_cache),
        static_cast<T*>(k_out), static_cast<T*>(v_out), block_elems, pairs);
    return launch_status("dequant_kv_blocks_kernel");
  });
}

}  // namespace folio::cuda
