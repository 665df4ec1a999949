// SwiGLU activation on the GPU: out[t, i] = silu(gate_up[t, i]) * gate_up[t, inter + i].
// gate_up: [rows, 2 * inter] (the fused gate/up projection), out: [rows, inter]. fp32 math.
#pragma once

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

Status silu_and_mul(DType dtype, const void* gate_up, void* out, int rows, int inter,
                    void* stream);

}  // namespace folio::cuda
