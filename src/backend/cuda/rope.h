// Rotary embedding on the GPU, Hugging Face's rotate_half convention (pairs (i, i + head_dim/2)),
// applied in place to q [num_tokens, num_heads, head_dim] and k [num_tokens, num_kv_heads,
// head_dim] in one launch. Angles are computed in fp32 as positions[t] * inv_freq[i]; inv_freq
// ([head_dim / 2] fp32, device) is precomputed with any scaling (llama3, linear...) already
// applied. k may be nullptr (num_kv_heads ignored) to rotate q alone.
//
// One block per token: the token's head_dim/2 cos/sin pairs are computed once into shared memory
// and shared by all heads; threads then own (head, 8-pair) tasks and move 16-byte packs of both
// halves (scalar fallback when head_dim/2 is not a multiple of 8 or a pointer is misaligned).
// RopeKernel::kLegacy (or FOLIO_ROPE=legacy in the environment) selects the original scalar
// kernel, for comparison on the GPU.
#pragma once

#include <cstdint>

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

enum class RopeKernel { kAuto, kLegacy };

Status rope(DType dtype, void* q, void* k, const int32_t* positions, const float* inv_freq,
            int num_tokens, int num_heads, int num_kv_heads, int head_dim, void* stream);

Status rope_with(RopeKernel kernel, DType dtype, void* q, void* k, const int32_t* positions,
                 const float* inv_freq, int num_tokens, int num_heads, int num_kv_heads,
                 int head_dim, void* stream);

}  // namespace folio::cuda
