// Device-side helpers shared by this folder's kernels (only .cu files include this): element
// conversions, packed vector loads/stores, warp reductions, and the DType -> C++ type dispatch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dtype.h"

namespace folio::cuda {

template <typename T>
__device__ __forceinline__ float to_float(T v);
template <>
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float(float v) { return __float2bfloat16(v); }
template <>
__device__ __forceinline__ __half from_float(float v) { return __float2half(v); }

// N consecutive elements moved as one aligned access (N = 8 for 16-bit types: 16 bytes).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <int N, typename T>
__device__ __forceinline__ void load_floats(const T* p, float (&out)[N]) {
  const Pack<T, N> pk = *reinterpret_cast<const Pack<T, N>*>(p);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = to_float(pk.v[i]);
}

template <int N, typename T>
__device__ __forceinline__ void store_floats(T* p, const float (&in)[N]) {
  Pack<T, N> pk;
#pragma unroll
  for (int i = 0; i < N; ++i) pk.v[i] = from_float<T>(in[i]);
  *reinterpret_cast<Pack<T, N>*>(p) = pk;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// True when every pointer is 16-byte aligned and `elems` fills whole 8-element packs: the
// condition for the vectorised path of an elementwise kernel.
inline bool pack8_ok(int64_t elems, std::initializer_list<const void*> ptrs) {
  if (elems % 8 != 0) return false;
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

}  // namespace folio::cuda

// Runs `...` with `T` bound to the C++ element type of `dtype`.
#define FOLIO_DISPATCH_DTYPE(dtype, T, ...)          \
  [&]() -> ::folio::Status {                         \
    if ((dtype) == ::folio::cuda::DType::kBF16) {    \
      using T = __nv_bfloat16;                       \
      return __VA_ARGS__();                          \
    } else {                                         \
      using T = __half;                              \
      return __VA_ARGS__();                          \
    }                                                \
  }()
