// RMSNorm on the GPU: y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, fp32 accumulation.
// x, y: [rows, dim] (y may alias x: in place is allowed); weight: [dim].
// The per-head q/k norm of Qwen3 is this with rows = num_tokens * num_heads and dim = head_dim.
//
// Two kernels, picked by shape (RmsNormKernel::kAuto):
//  - warp per row (dim <= 512): the original kernel; many short rows (q/k norm) keep every warp
//    busy. Its per-lane summation order is the one qkv_post reproduces for a bit-identical norm.
//  - block per row (dim > 512): a whole block (up to 1024 threads, one 16-byte pack each) on one
//    row, values kept in registers between the sum and the scale, block-wide reduction. A single
//    4096-wide row is latency bound under one warp (16 dependent loads per lane); here each
//    thread issues one load.
// FOLIO_RMS_NORM=warp in the environment forces the warp-per-row kernel everywhere (to compare the
// old path end to end on the GPU).
#pragma once

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

enum class RmsNormKernel { kAuto, kWarpPerRow, kBlockPerRow };

Status rms_norm(DType dtype, const void* x, const void* weight, void* y, int rows, int dim,
                float eps, void* stream);

// Fused residual add then norm: residual += x (rounded to dtype and stored), then
// y = rms_norm(residual). residual, x, y: [rows, dim]; y may alias x.
Status add_rms_norm(DType dtype, void* residual, const void* x, const void* weight, void* y,
                    int rows, int dim, float eps, void* stream);

// The same with an explicit kernel choice (tests and benchmarks). residual == nullptr: plain
// rms_norm; otherwise add_rms_norm.
Status rms_norm_with(RmsNormKernel kernel, DType dtype, void* residual, const void* x,
                     const void* weight, void* y, int rows, int dim, float eps, void* stream);

// True when rms_norm (kAuto) of 16-byte aligned rows of `dim` elements runs the block kernel with
// one 8-element pack per thread (512 < dim <= 8192, dim % 8 == 0, no FOLIO_RMS_NORM=warp): the
// summation order that rms_norm_smem.cuh reproduces inside other kernels (skinny_gemm.h's fused
// norm), so a caller may swap one for the other bit for bit.
bool rms_norm_is_block_pack8(int dim);

}  // namespace folio::cuda
