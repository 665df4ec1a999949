// Decode kernel "tc" (decode_attention_tc.cuh) over a 16-bit or an fp8 e4m3 cache, head_dim 128;
// a split sequence's partitions merge in decode v2's merge kernel (same workspace layout).
#include <string>

#include "backend/cuda/decode_attention_tc.cuh"

namespace folio::cuda::detail {
namespace {

template <typename T, typename C>
Status launch_tc(const V2Args<T>& a, int num_seqs, void* stream) {
  const dim3 grid(a.num_kv_heads * a.num_chunks, num_seqs, a.max_partitions);
  FOLIO_RETURN_IF_ERROR(launch_pdl(decode_tc_kernel<T, C>, grid, dim3(kThreads), 0, stream,
                                   "decode_tc_kernel", a));
  if (a.max_partitions > 1) {
    FOLIO_RETURN_IF_ERROR(launch_pdl(decode_v2_merge_kernel<T>, dim3(a.num_heads, num_seqs),
                                     dim3(tc::kD), 0, stream, "decode_v2_merge_kernel", a));
  }
  return Status();
}

}  // namespace

Status launch_decode_tc(const PagedAttentionParams& p, const DecodePlan& plan,
                        const DecodeWorkspace& ws, void* stream) {
  if (p.head_dim != tc::kD)
    return unimplemented("decode_attention: kernel tc takes head_dim 128, not " +
                         std::to_string(p.head_dim));
  return FOLIO_DISPATCH_DTYPE(p.dtype, T, [&] {
    const V2Args<T> a = make_v2_args<T>(p, plan, ws, tc::kHeads);
    if (p.kv_dtype == KvCacheDtype::kFp8E4m3) return launch_tc<T, uint8_t>(a, p.num_seqs, stream);
    return launch_tc<T, T>(a, p.num_seqs, stream);
  });
}

}  // namespace folio::cuda::detail
