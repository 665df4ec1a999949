// Skinny GEMM for decode: y[m, n] (+)= x[m, k] · w[n, k]^T with m <= kSkinnyMaxM, bf16/fp16 in,
// fp32 accumulation, one rounding to the dtype (with accumulate, y's old value is added in fp32
// before it, as cuBLAS does with beta = 1). At m = 1-8 the product is a stream over the weights:
// cuBLASLt's small-m kernels reached 1.5-2.5 TB/s of weight bytes on the H100 (copy: 3.0), so this
// kernel gives each warp one row of w, 16-byte loads with several in flight per lane, x read
// through L1, and a warp reduction. Measured on the H100 (2026-11-22, SkinnyGemm.Bench*): at m 1
// 1.72-2.66 TB/s against cuBLASLt's 1.55-2.51 (5-11% faster); from m 2 the per-load re-reads of
// x cost more than they save (m 8: 0.8-1.6 TB/s), so Gemm sends only m 1 here by default.
#pragma once

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

inline constexpr int kSkinnyMaxM = 8;

// True when skinny_gemm takes this shape: 1 <= m <= kSkinnyMaxM, k % 8 == 0, and x, w, y 16-byte
// aligned (y: 4-byte for the 2-element stores).
bool skinny_gemm_supported(int m, int k, const void* x, const void* w, const void* y);

Status skinny_gemm(DType dtype, const void* x, const void* w, void* y, int m, int n, int k,
                   bool accumulate, void* stream);

}  // namespace folio::cuda
