// Rotary embedding on the GPU, Hugging Face's rotate_half convention (pairs (i, i + head_dim/2)),
// applied in place to q [num_tokens, num_heads, head_dim] and k [num_tokens, num_kv_heads,
// head_dim] in one launch. Angles are computed in fp32 as positions[t] * inv_freq[i]; inv_freq
// ([head_dim / 2] fp32, device) is precomputed with any scaling (llama3, linear...) already applied.
// k may be nullptr (num_kv_heads ignored) to rotate q alone.
#pragma once

#include <cstdint>

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

Status rope(DType dtype, void* q, void* k, const int32_t* positions, const float* inv_freq,
            int num_tokens, int num_heads, int num_kv_heads, int head_dim, void* stream);

}  // namespace folio::cuda
