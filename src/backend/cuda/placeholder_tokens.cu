#include <climits>

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

// One block per row: each of phases 2 and 3 may end with a placeholder op; the block looks for
// its resolved token among the phase's other ops and rewrites as the reference does.
__global__ void resolve_placeholder_ops_kernel(const DeviceSampleRow* rows, LogitOp* ops,
                                               const SampleOut* samples, int num_samples) {
  const DeviceSampleRow& r = rows[blockIdx.x];
  __shared__ int named;
  for (int p = 2; p <= 3; ++p) {
    const int begin = r.phase_end[p - 1], end = r.phase_end[p];
    if (end == begin) continue;
    const int32_t id = ops[end - 1].token;
    if (id >= 0) continue;
    const int j = -1 - id;
    const int32_t t = j < num_samples ? samples[j].token_id : 0;
    if (threadIdx.x == 0) named = INT_MAX;
    __syncthreads();
    for (int q = begin + threadIdx.x; q < end - 1; q += blockDim.x)
      if (ops[q].token == t) atomicMin(&named, q);
    __syncthreads();
    if (threadIdx.x == 0) {
      LogitOp& op = ops[end - 1];
      op.token = t;
      if (named != INT_MAX) {
        if (p == 3 && op.a != 0.0f) ops[named].a = op.a * (rintf(ops[named].a / op.a) + 1.0f);
        op.kind = LogitOpKind::kNone;
      }
    }
    __syncthreads();
  }
}

}  // namespace

Status resolve_placeholder_ops(const DeviceSampleRow* rows, int num_rows, LogitOp* ops,
                               const SampleOut* samples, int num_samples, void* stream) {
  if (num_rows == 0) return Status();
  resolve_placeholder_ops_kernel<<<num_rows, 128, 0, as_stream(stream)>>>(rows, ops, samples,
                                                                          num_samples);
  return launch_status("resolve_placeholder_ops_kernel");
}

Status resolve_placeholder_tokens(int32_t* token_ids, int num_tokens, const SampleOut* samples,
                                  int num_samples, void* stream) {
  if (num_tokens == 0) return Status();
  const int threads = 256;
  resolve_placeholders_kernel<<<(num_tokens + threads - 1) / threads, threads, 0,
                                as_stream(stream)>>>(token_ids, num_tokens, samples, num_samples);
  return launch_status("resolve_placeholders_kernel");
}

}  // namespace folio::cuda
