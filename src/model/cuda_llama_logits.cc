// CudaLlamaExecutor's logits: the final norm and lm_head on the rows that need them, delivered
// chunk by chunk (sampled on the device, and/or copied to the host), and the end of a step
// (samples queued down; a synchronous step collects them). Tensor parallelism's form is
// compute_logits_tp (cuda_llama_executor_tp.cc), which shares begin/deliver/end.
#include <algorithm>
#include <vector>

#include "backend/cuda/embedding.h"
#include "backend/cuda/rms_norm.h"
#include "model/cuda_llama_executor_impl.h"

namespace folio {

// Final norm and lm_head on the requested rows only, kLogitsChunkRows at a time: gather the rows
// (the embedding gather with x as the table), norm, fp32 GEMM; each chunk is then delivered.
Status CudaLlamaExecutor::Impl::compute_logits(const ForwardBatch& b, const StepArrays& d,
                                               const LogitsRequest& req) {
  const int R = static_cast<int>(b.logits_rows.size()), H = config.hidden_size;
  const int V = config.vocab_size, T = b.num_tokens();
  FOLIO_RETURN_IF_ERROR(begin_logits(req, R));
  size_t next_host = 0;
  for (int r0 = 0; r0 < R; r0 += kLogitsChunkRows) {
    const int n = std::min(kLogitsChunkRows, R - r0);
    FOLIO_RETURN_IF_ERROR(cuda::embedding(dt, x.data(), d.logits_rows + r0, rows.data(), n, H, T,
                                          nullptr));
    FOLIO_RETURN_IF_ERROR(cuda::rms_norm(dt, rows.data(), weights.final_norm, rows_normed.data(), n,
                                         H, static_cast<float>(config.rms_norm_eps), nullptr));
    FOLIO_RETURN_IF_ERROR(logits_gemm->matmul_nt_f32(dt, rows_normed.data(), weights.lm_head,
                                                     logits.as<float>(), n, V, H, nullptr));
    mark("lm_head");
    FOLIO_RETURN_IF_ERROR(deliver_chunk(req, r0, n, logits.as<float>(), next_host));
  }
  return end_logits(req);
}

Status CudaLlamaExecutor::Impl::begin_logits(const LogitsRequest& req, int R) {
  const DeviceSamplingBatch* s = req.sampling;
  if (s) {
    if ((!s->rows.empty() && s->rows.back().logits_row >= R) ||
        (!s->host_rows.empty() && (s->host_rows.front() < 0 || s->host_rows.back() >= R)))
      return internal_error("DeviceSamplingBatch: a row outside ForwardBatch::logits_rows");
    FOLIO_RETURN_IF_ERROR(upload_sampling(*s));
  }
  const size_t returned = s ? s->host_rows.size() : static_cast<size_t>(R);
  if (req.host_logits) req.host_logits->resize(returned * config.vocab_size);
  return Status();
}

Status CudaLlamaExecutor::Impl::deliver_chunk(const LogitsRequest& req, int r0, int n, float* chunk,
                                              size_t& next_host) {
  const size_t V = static_cast<size_t>(config.vocab_size);
  const DeviceSamplingBatch* s = req.sampling;
  if (s) FOLIO_RETURN_IF_ERROR(sample_chunk(*s, r0, n, chunk));  // edits and restores the rows
  mark("sampling");
  if (!req.host_logits) return Status();
  if (!s)
    return cuda::copy(req.host_logits->data() + static_cast<size_t>(r0) * V, chunk,
                      sizeof(float) * n * V);
  // Runs of consecutive host rows in this chunk, one copy each.
  const std::vector<int32_t>& hr = s->host_rows;
  while (next_host < hr.size() && hr[next_host] < r0 + n) {
    size_t run = 1;
    while (next_host + run < hr.size() && hr[next_host + run] == hr[next_host] + static_cast<int>(run) &&
           hr[next_host + run] < r0 + n)
      ++run;
    FOLIO_RETURN_IF_ERROR(cuda::copy(req.host_logits->data() + next_host * V,
                                     chunk + static_cast<size_t>(hr[next_host] - r0) * V,
                                     sizeof(float) * run * V));
    next_host += run;
  }
  mark("logits_to_host");
  return Status();
}

Status CudaLlamaExecutor::Impl::end_logits(const LogitsRequest& req) {
  // One way down for the samples of both kinds of step: queued to pinned memory behind an
  // event; a launched step returns without waiting (collect_samples takes them), a synchronous
  // one collects them at once.
  if (req.sampling) FOLIO_RETURN_IF_ERROR(enqueue_samples(*req.sampling));
  if (req.launch_only) {
    if (timer) timer->end_step();
    return Status();
  }
  if (req.sampling) FOLIO_RETURN_IF_ERROR(collect_launched(*req.samples));
  mark("samples_to_host");
  if (timer) timer->end_step();
  return cuda::synchronize();  // surfaces any asynchronous kernel error of this step
}

}  // namespace folio
