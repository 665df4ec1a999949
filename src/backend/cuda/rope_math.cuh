// Rotary-embedding arithmetic shared by rope.cu and qkv_post.cu. Each operation is pinned
// (explicit fmaf / __fmul_rn) so that the compiler's FMA contraction cannot differ between the
// two kernels: the fused op then matches split_qkv -> rope bit for bit.
#pragma once

#include <cuda_runtime.h>

namespace folio::cuda {

// The angle of frequency `inv_freq` at position `pos`, and its cos/sin (full-range sincosf:
// angles reach 1e5 rad at long context, so no fast-math __sincosf).
__device__ __forceinline__ void rope_cos_sin(int32_t pos, float inv_freq, float* c, float* s) {
  sincosf(__fmul_rn(static_cast<float>(pos), inv_freq), s, c);
}

// rotate_half pairs (a, b) = (x[i], x[i + half]): returns the new x[i] and x[i + half].
__device__ __forceinline__ float rope_lo(float a, float b, float c, float s) {
  return fmaf(a, c, -__fmul_rn(b, s));
}
__device__ __forceinline__ float rope_hi(float a, float b, float c, float s) {
  return fmaf(b, c, __fmul_rn(a, s));
}

}  // namespace folio::cuda
