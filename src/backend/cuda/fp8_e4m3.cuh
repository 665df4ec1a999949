// Device FP8 E4M3 conversions for the fp8 KV cache (backend/kv_cache_dtype.h): the writers
// (reshape_and_cache, qkv_post) encode, the readers (decode attention, dequant_kv_blocks) decode.
// The host codec base/fp8.h is the reference; the GPU tests (tests/cuda/fp8_kv_cache_test.cc)
// compare these bit for bit over every bf16 and fp16 value, the only inputs the kernels encode.
// Only .cu files include this, and the host SIMT emulator through qkv_post.cu
// (scripts/emu-small-ops.sh): cuda_fp8.h's conversions have host versions, so nothing here may
// use a device-only intrinsic (decode v2's 8-byte cp.async lives in decode_attention_v2.cuh).
//
// Both directions are single hardware conversions on sm_89+ (cuda_fp8.h):
//   encode  cvt.rn.satfinite.e4m3x2.f32: round to nearest even, |x| > 448 and +-inf give +-448,
//           NaN gives 0x7F whatever its sign (measured on an H200 over every bf16 and fp16 value:
//           bit-identical to base/fp8.h)
//   decode  cvt.rn.f16x2.e4m3x2: exact (every e4m3 value, subnormals and NaN included, is an
//           fp16 value), then fp16 -> fp32, exact too.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace folio::cuda {

// Two floats -> two e4m3 codes, a in the low byte (the element at the lower address).
__device__ __forceinline__ uint16_t e4m3x2_from_floats(float a, float b) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

// Two e4m3 codes (low byte first) -> two floats, exactly.
__device__ __forceinline__ float2 e4m3x2_to_float2(uint16_t codes) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(codes, __NV_E4M3);
  return __half22float2(__half2(h));
}

// Eight e4m3 codes packed in 8 bytes (element i in byte i) -> 8 floats.
__device__ __forceinline__ void unpack8_e4m3(const uint2& r, float (&f)[8]) {
  const uint32_t w[2] = {r.x, r.y};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float2 lo = e4m3x2_to_float2(static_cast<uint16_t>(w[i] & 0xffffu));
    const float2 hi = e4m3x2_to_float2(static_cast<uint16_t>(w[i] >> 16));
    f[4 * i] = lo.x;
    f[4 * i + 1] = lo.y;
    f[4 * i + 2] = hi.x;
    f[4 * i + 3] = hi.y;
  }
}

// Eight e4m3 codes (element i in byte i) -> eight fp16 values packed in 16 bytes, exactly.
__device__ __forceinline__ uint4 e4m3x8_to_half8(uint2 codes) {
  const uint32_t w[2] = {codes.x, codes.y};
  uint32_t out[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(
        static_cast<__nv_fp8x2_storage_t>(w[i / 2] >> (16 * (i % 2))), __NV_E4M3);
    out[i] = static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// N floats -> N e4m3 codes at p, as one aligned store: N = 8 (8 bytes, p 8-byte aligned), 4
// (4 bytes, 4-byte aligned) or 1.
template <int N>
__device__ __forceinline__ void store_e4m3(uint8_t* p, const float (&in)[N]) {
  static_assert(N == 1 || N == 4 || N == 8, "an 8- or 4-byte pack or a single element");
  if constexpr (N == 1) {
    *p = static_cast<uint8_t>(e4m3x2_from_floats(in[0], 0.f) & 0xffu);
  } else if constexpr (N == 4) {
    *reinterpret_cast<uint32_t*>(p) =
        e4m3x2_from_floats(in[0], in[1]) | (uint32_t{e4m3x2_from_floats(in[2], in[3])} << 16);
  } else {
    uint2 w;
    w.x = e4m3x2_from_floats(in[0], in[1]) | (uint32_t{e4m3x2_from_floats(in[2], in[3])} << 16);
    w.y = e4m3x2_from_floats(in[4], in[5]) | (uint32_t{e4m3x2_from_floats(in[6], in[7])} << 16);
    *reinterpret_cast<uint2*>(p) = w;
  }
}

}  // namespace folio::cuda
