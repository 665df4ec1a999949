// Splits the fused QKV projection's output [num_tokens, q_size + 2 * kv_size] into contiguous
// q [num_tokens, q_size], k and v [num_tokens, kv_size], adding the bias ([q_size + 2 * kv_size],
// or nullptr for none; Qwen2 has one) on the way. fp32 add, one rounding.
#pragma once

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

Status split_qkv(DType dtype, const void* qkv, const void* bias, void* q, void* k, void* v,
                 int num_tokens, int q_size, int kv_size, void* stream);

}  // namespace folio::cuda
