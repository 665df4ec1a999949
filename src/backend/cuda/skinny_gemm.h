// Skinny GEMM for decode: y[m, n] (+)= x[m, k] · w[n, k]^T with m <= kSkinnyMaxM, bf16/fp16 in,
// fp32 accumulation, one rounding to the dtype (with accumulate, y's old value is added in fp32
// before it, as cuBLAS does with beta = 1), or fp32 output for the lm_head. At small m the
// product is a stream over the weights, which cuBLASLt's small-m kernels read at only
// 2.2-2.8 TB/s on the H100 (copy: 3.0). Here each warp owns whole rows of w and reads them as
// 512-byte runs with several loads in flight per lane (double-buffered in registers), x through
// L1, fp32 FMAs. It is launched with programmatic dependent launch (pdl.cuh): the first weight
// loads are issued before the wait for the kernel that writes x.
//
// Measured on the H100 (SkinnyGemm.Bench*, L2 evicted by reads), see NOTES.md: at m 1 it streams
// 2.2-3.1 TB/s against cuBLASLt's 2.25-2.8 (faster on every Llama-3-8B shape but o_proj); from
// m 2 the FMAs and x loads make it slower than cuBLASLt, so Gemm sends it m 1 only by default.
// Tried and dropped (H100, B3 = Llama-3-8B batch-1 decode step):
//   - a tensor-core version (w as the mma A operand, 64-byte row pieces per load, k split over
//     warps): cuBLASLt's speed at best, B3 7.01 ms;
//   - x staged in shared memory with silu(gate) * up computed while staging: B3 +0.04 ms;
//   - RMSNorm and silu(gate) * up computed on the fly from x as it is loaded (no separate norm and
//     activation launches, 3 fewer per layer): every warp recomputes the row's norm and the
//     activations, B3 6.73 ms against 6.17 with the separate kernels.
#pragma once

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

inline constexpr int kSkinnyMaxM = 4;

// m up to which Gemm and LogitsGemm send products here: FOLIO_SKINNY_GEMM_MAX_M (0..kSkinnyMaxM;
// 0 = cuBLAS always) when set, else 1. An error for a malformed value.
Result<int> skinny_max_m_from_env();

// Warp tile shapes, for benchmarks: rows of w per warp and 16-byte loads in flight per row.
enum class SkinnyVariant { kDefault, kRows1Unroll4, kRows1Unroll8, kRows4Unroll2, kRows2Unroll4 };


struct SkinnyProblem {
  const void* x;  // [m, k]
  const void* w;  // [n, k]
  void* y;        // [m, n], dtype or fp32
  int m, n, k;
  bool accumulate = false;
  bool f32_out = false;  // fp32 y (no accumulate)
};

// True when skinny_gemm takes this shape: 1 <= m <= kSkinnyMaxM, k % 8 == 0, x and w 16-byte
// aligned, y 4-byte aligned.
bool skinny_gemm_supported(int m, int k, const void* x, const void* w, const void* y);

Status skinny_gemm(DType dtype, const SkinnyProblem& problem, void* stream,
                   SkinnyVariant variant = SkinnyVariant::kDefault);
Status skinny_gemm(DType dtype, const void* x, const void* w, void* y, int m, int n, int k,
                   bool accumulate, void* stream, SkinnyVariant variant = SkinnyVariant::kDefault);

// The same product with fp32 output (the lm_head's logits), no accumulate.
Status skinny_gemm_f32(DType dtype, const void* x, const void* w, float* y, int m, int n, int k,
                       void* stream);

// The SwiGLU MLP's first half at small m: act[m, inter] = silu(x · gate^T) * (x · up^T), where
// w_gate_up = [gate; up] is [2 inter, k]. Bit-identical to skinny_gemm into [m, 2 inter] then
// silu_and_mul (silu_and_mul.h), in one launch and without the intermediate.
Status skinny_gemm_silu(DType dtype, const void* x, const void* w_gate_up, void* act, int m,
                        int inter, int k, void* stream);

}  // namespace folio::cuda
