// CudaLlamaExecutor's asynchronous steps (Executor::launch_sampled / collect_samples, the engine's
// async scheduling): a launched step's placeholder tokens resolved on the device from the step
// launched before, its samples copied to pinned memory behind an event (enqueue_samples and
// collect_launched, in cuda_llama_sampling.cc beside the samples' layout), collected oldest first.
// Every call is on the legacy stream, so a launched step runs after everything issued before it.
#include <algorithm>

#include "backend/cuda/placeholder_tokens.h"
#include "model/cuda_llama_executor_impl.h"

namespace folio {

// Under tensor parallelism every rank launches the step (CudaTpExecutor); rank 0 samples and
// shares the samples, and only rank 0's are collected.
bool CudaLlamaExecutor::launches_async() const {
  return !impl_->timer;  // stage times synchronize every step
}

Status CudaLlamaExecutor::launch_sampled(const ForwardBatch& batch,
                                         const DeviceSamplingBatch& sampling) {
  Impl& m = *impl_;
  if (!m.deferred.ok()) return m.deferred;
  if (!launches_async()) return unimplemented("this executor does not launch steps asynchronously");
  // A step may sample nothing (only prompt chunks): its collect returns no samples.
  if (!sampling.host_rows.empty() || batch.num_tokens() == 0)
    return internal_error("launch_sampled: a step with tokens and no host rows");
  if (m.launched.size() >= 2) return internal_error("launch_sampled: two steps uncollected");
  LogitsRequest req;
  req.sampling = &sampling;
  req.launch_only = true;
  m.placeholder_rows = m.launch_rows;
  Status st = m.forward(batch, m.cache, req);
  m.placeholder_rows = -1;
  m.launch_rows = st.ok() ? static_cast<int>(sampling.rows.size()) : -1;
  return st;
}

Status CudaLlamaExecutor::collect_samples(std::vector<DeviceSample>& samples) {
  return impl_->collect_launched(samples);
}

Status CudaLlamaExecutor::Impl::resolve_placeholders(const ForwardBatch& b, int32_t* ids) {
  if (placeholder_rows <= 0 ||
      std::none_of(b.token_ids.begin(), b.token_ids.end(), [](int32_t id) { return id < 0; }))
    return Status();
  return cuda::resolve_placeholder_tokens(ids, b.num_tokens(), sample_out.as<cuda::SampleOut>(),
                                          placeholder_rows, nullptr);
}

}  // namespace folio
