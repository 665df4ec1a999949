// Logprobs of the raw logits for the GPU sampler, as sample/logprobs.cc computes them:
// lse = m + log(sum exp(x - m)) in double, logprob = float(x_token - lse), rank = #(x >= x_token),
// and the top K by (value desc, id asc), NaN never ranked. One thread block per row; the top K
// take K arg-max passes, each excluding what the previous passes picked (K is small: <= 64).
#include <cmath>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/row_logprobs.cuh"
#include "backend/cuda/sample_block.cuh"

namespace folio::cuda {
namespace {

using sampling::Best;
using sampling::kSampleThreads;

__global__ void __launch_bounds__(kSampleThreads) row_logprobs_kernel(SampleRowsArgs a) {
  __shared__ sampling::SampleShared sh;
  const DeviceSampleRow& r = a.rows[blockIdx.x];
  const float* x = a.logits + static_cast<int64_t>(r.logits_row - a.logits_row_offset) * a.vocab;
  const int V = a.vocab;
  const int32_t token = a.out[blockIdx.x].token_id;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < V; i += kSampleThreads) m = fmaxf(m, x[i]);
  m = sampling::block_max(m, sh.maxes);
  const float value = x[token];
  double v[2] = {0.0, 0.0};  // sum exp(x - m), rank
  for (int i = threadIdx.x; i < V; i += kSampleThreads) {
    const float xi = x[i];
    if (isfinite(m)) v[0] += expf(xi - m);
    v[1] += xi >= value ? 1.0 : 0.0;
  }
  sampling::block_sum<2>(v, sh.sums);
  const double lse = isfinite(m) ? static_cast<double>(m) + log(v[0]) : static_cast<double>(m);
  const int k = min(max(r.num_logprobs, 0), kMaxDeviceLogprobs);
  TopEntry* top = a.top + static_cast<int64_t>(blockIdx.x) * kMaxDeviceLogprobs;
  Best prev = sampling::no_best();
  int found = 0;
  for (; found < k; ++found) {
    Best best = sampling::no_best();
    for (int i = threadIdx.x; i < V; i += kSampleThreads) {
      const float xi = x[i];
      if (isnan(xi)) continue;
      const Best cand{xi, i};
      if (found > 0 && !sampling::better(prev, cand)) continue;  // ranked at or before prev
      if (sampling::better(cand, best)) best = cand;
    }
    best = sampling::block_best(best, sh.best);
    if (best.id == INT_MAX) break;  // fewer non-NaN tokens than k
    if (threadIdx.x == 0)
      top[found] = {best.id, static_cast<float>(static_cast<double>(best.key) - lse)};
    prev = best;
  }
  if (threadIdx.x == 0) {
    SampleOut& o = a.out[blockIdx.x];
    o.rank = static_cast<int32_t>(v[1]);
    o.logprob = static_cast<float>(static_cast<double>(value) - lse);
    o.num_top = found;
  }
}

}  // namespace

Status launch_row_logprobs(const SampleRowsArgs& a, cudaStream_t stream) {
  row_logprobs_kernel<<<a.num_rows, kSampleThreads, 0, stream>>>(a);
  return launch_status("row_logprobs_kernel");
}

}  // namespace folio::cuda
