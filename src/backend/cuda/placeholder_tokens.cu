#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/placeholder_tokens.h"

namespace folio::cuda {
namespace {

__global__ void resolve_placeholders_kernel(int32_t* ids, int n, const SampleOut* samples,
                                            int num_samples) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const int32_t id = ids[t];
  if (id >= 0) return;
  const int j = -1 - id;
  ids[t] = j < num_samples ? samples[j].token_id : 0;
}

}  // namespace

Status resolve_placeholder_tokens(int32_t* token_ids, int num_tokens, const SampleOut* samples,
                                  int num_samples, void* stream) {
  if (num_tokens == 0) return Status();
  const int threads = 256;
  resolve_placeholders_kernel<<<(num_tokens + threads - 1) / threads, threads, 0,
                                as_stream(stream)>>>(token_ids, num_tokens, samples, num_samples);
  return launch_status("resolve_placeholders_kernel");
}

}  // namespace folio::cuda
