// CudaLlamaExecutor: the decode-attention plans of a step (over its lengths) and of the CUDA
// graphs (bounded by max_model_len), with sliding windows.
//
// Under a binding window (max_model_len past the model's sliding_window) a decode row attends
// to at most the window's keys, split from the window's start at token granularity by kernels
// v2 and tc (window_start in decode_attention_partitions.cuh). Until session 57 windowed decode
// ran on v2 only; tc looks every token's slot up as v2 does, so the planner now picks the kernel
// as it does without a window. Where every layer slides the window the plans, and a graph
// step's split, cover the lengths clamped to it; where some layers attend to everything
// (Qwen2/3 from max_window_layers on) they must cover the whole lengths, or those layers'
// partitions would stop at the clamped split, and the windowed layers' later partitions return
// at once.
#include <algorithm>

#include "model/cuda_llama_executor_impl.h"

namespace folio {
namespace {

// v1 attends from position 0: a binding window takes v2 where FOLIO_DECODE_KERNEL asks for v1.
template <typename Replan>
Result<cuda::DecodePlan> windowed_kernel(Result<cuda::DecodePlan> plan, bool window,
                                         const Replan& replan) {
  if (plan.ok() && window && plan->kernel == cuda::DecodeKernel::kV1)
    return replan(cuda::DecodeKernel::kV2);
  return plan;
}

}  // namespace

std::span<const int32_t> CudaLlamaExecutor::Impl::attended_lens(
    std::span<const int32_t> lens, std::vector<int32_t>& scratch) const {
  const int w = plan_window();
  if (!w) return lens;
  scratch.assign(lens.begin(), lens.end());
  for (int32_t& len : scratch) len = std::min(len, w);
  return scratch;
}

Result<cuda::DecodePlan> CudaLlamaExecutor::Impl::plan_decode(std::span<const int32_t> lens) const {
  std::vector<int32_t> scratch;
  lens = attended_lens(lens, scratch);
  auto replan = [&](cuda::DecodeKernel k) {
    return cuda::plan_decode_attention(lens, config.num_heads, config.num_kv_heads, config.head_dim,
                                       info.num_sms, 0, k, decode_cache_format());
  };
  return windowed_kernel(replan(cuda::DecodeKernel::kDefault), binding_window() > 0, replan);
}

Result<cuda::DecodePlan> CudaLlamaExecutor::Impl::plan_decode_bounded(int num_seqs) const {
  const int w = plan_window();
  auto replan = [&](cuda::DecodeKernel k) {
    return cuda::plan_decode_attention_bounded(num_seqs, w ? w : max_model_len, config.num_heads,
                                               config.num_kv_heads, config.head_dim, info.num_sms,
                                               0, k, decode_cache_format());
  };
  return windowed_kernel(replan(cuda::DecodeKernel::kDefault), binding_window() > 0, replan);
}

}  // namespace folio
