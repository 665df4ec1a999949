// Decode kernel v2 over a 16-bit cache (the cache holds p.dtype, like q and out). The kernel is
// in decode_attention_v2.cuh and its launchers in decode_attention_v2_launch.cuh, shared with the
// fp8 cache's instantiations (decode_attention_v2_fp8.cu).
#include "backend/cuda/decode_attention_v2_launch.cuh"

namespace folio::cuda::detail {

Status launch_decode_v2(const PagedAttentionParams& p, const DecodePlan& plan,
                        const DecodeWorkspace& ws, void* stream) {
  return launch_v2<false>(p, plan, ws, stream);
}

}  // namespace folio::cuda::detail
