// A Hopper (sm_90a) GEMM for the mid-batch decode products, y[m, n] = x[m, k] · w[n, k]^T
// (+ y when accumulate), 16-bit operands, fp32 accumulation, row-major contiguous tensors: the
// same contract as Gemm::matmul_nt (gemm.h), which routes to it (FOLIO_GEMM_WGMMA). Design,
// tiles and the stream-K split: gemm_wgmma_kernel.cuh. Results are deterministic for a given
// device (the split depends on the SM count), not bit-identical to cuBLASLt's.
#pragma once

#include <cstddef>

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

// Whether gemm_wgmma takes the product: a 16-bit dtype, n a multiple of 128, k of 64, m >= 1,
// 16-byte-aligned x, w and y, and a device of compute capability 9.0.
bool gemm_wgmma_fits(DType dtype, int m, int n, int k, const void* x, const void* w,
                     const void* y);

// Device workspace of a launch over at most `blocks` blocks: flags, then fp32 partial sums.
// The flags must be zero before the first launch (gemm_wgmma leaves them zero).
size_t gemm_wgmma_workspace_bytes(int blocks);

// The number of blocks a launch uses on the current device: one per SM (FOLIO_GEMM_WGMMA_BLOCKS
// overrides it, for measuring), capped by the product's iterations.
int gemm_wgmma_max_blocks();

// Launches the product on `stream`; workspace: gemm_wgmma_workspace_bytes(gemm_wgmma_max_blocks())
// bytes, its flags zero. Checks gemm_wgmma_fits first. Capture-safe (the tensor maps are
// encoded on the host, cached per operand, and passed by value).
Status gemm_wgmma(DType dtype, const void* x, const void* w, void* y, int m, int n, int k,
                  bool accumulate, void* workspace, size_t workspace_bytes, void* stream);

}  // namespace folio::cuda
