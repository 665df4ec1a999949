// Device helpers for streaming kernels (only .cu files include this): cp.async copies global ->
// shared with zero fill and their group waits (sm_80+), a fast exp2, and unpacking 16 bytes of
// bf16/fp16 into 8 floats.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace folio::cuda {

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 16 bytes global -> shared, asynchronously; fill == false writes 16 zero bytes (src unread).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool fill) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(fill ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Pulls `bytes` (a multiple of 16) from global memory at p (16-byte aligned) into L2, without
// waiting or writing anything: a bulk-copy-engine prefetch (sm_90; a no-op below).
__device__ __forceinline__ void l2_prefetch_bulk(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(reinterpret_cast<uint64_t>(p)),
               "r"(bytes)
               : "memory");
#else
  (void)p, (void)bytes;
#endif
}

// The same through the load path: one prefetch.global.L2 per 128-byte line of [p, p + bytes).
__device__ __forceinline__ void l2_prefetch_lines(const void* p, uint32_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (uint32_t o = 0; o < bytes; o += 128)
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(c + o) : "memory");
}
__device__ __forceinline__ void l2_prefetch(const void* p, uint32_t bytes, bool lines) {
  if (lines)
    l2_prefetch_lines(p, bytes);
  else
    l2_prefetch_bulk(p, bytes);
}

// Eight 16-bit elements packed in 16 bytes (element 2i in the low half of word i).
template <typename T>
__device__ __forceinline__ void unpack8(const uint4& r, float (&f)[8]) {
  const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    } else {
      const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      f[2 * i] = v.x;
      f[2 * i + 1] = v.y;
    }
  }
}

}  // namespace folio::cuda
