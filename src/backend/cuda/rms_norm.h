// RMSNorm on the GPU: y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, fp32 accumulation.
// x, y: [rows, dim] (y may alias x: in place is allowed); weight: [dim].
// The per-head q/k norm of Qwen3 is this with rows = num_tokens * num_heads and dim = head_dim.
#pragma once

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

Status rms_norm(DType dtype, const void* x, const void* weight, void* y, int rows, int dim,
                float eps, void* stream);

// Fused residual add then norm: residual += x (rounded to dtype and stored), then
// y = rms_norm(residual). residual, x, y: [rows, dim]; y may alias x.
Status add_rms_norm(DType dtype, void* residual, const void* x, const void* weight, void* y,
                    int rows, int dim, float eps, void* stream);

}  // namespace folio::cuda
