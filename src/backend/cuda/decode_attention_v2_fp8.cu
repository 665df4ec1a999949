// Decode kernel v2 over an fp8 e4m3 cache (kv_dtype kFp8E4m3): the v2 kernel of
// decode_attention_v2.cuh with 8-byte chunks of e4m3 codes in place of 16-byte chunks of bf16 or
// fp16 (same lanes, same elements per lane, half the bytes), decoded exactly to floats; q, out
// and the arithmetic as for a 16-bit cache.
#include "backend/cuda/decode_attention_v2_launch.cuh"

namespace folio::cuda::detail {

Status launch_decode_v2_fp8(const PagedAttentionParams& p, const DecodePlan& plan,
                            const DecodeWorkspace& ws, void* stream) {
  return launch_v2<true>(p, plan, ws, stream);
}

}  // namespace folio::cuda::detail
