// CudaLlamaExecutor's tensor-parallel pieces: the all-reduce after the embedding, attention and
// the MLP (prefill-sized steps overlap it with the products: cuda_llama_tp_overlap.cc), the
// vocabulary-parallel logits gathered to rank 0, a launched step's samples shared from rank 0, and
// the host-side barrier. Alone (world 1) the all-reduce and the barrier are no-ops and
// compute_logits_tp is not used.
#include <algorithm>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/embedding.h"
#include "backend/cuda/rms_norm.h"
#include "backend/cuda/sample_rows.h"
#include "model/cuda_llama_executor_impl.h"

namespace folio {
namespace {

CommType comm_type(cuda::DType dt) {
  return dt == cuda::DType::kFP16 ? CommType::kFP16 : CommType::kBF16;
}

}  // namespace

Status CudaLlamaExecutor::pending_error() const {
  return impl_->deferred;
}

// Times itself as "all_reduce" under FOLIO_CUDA_STAGE_TIMES, only where it runs: alone there is
// nothing to sum, and an empty stage would only show the timer's own event overhead.
Status CudaLlamaExecutor::Impl::tp_all_reduce(void* buf, size_t elements) {
  if (!tp || shard.world == 1) return Status();
  FOLIO_RETURN_IF_ERROR(all_reduce_on(tp->peer, buf, elements, stream));
  mark("all_reduce");
  return Status();
}

Status CudaLlamaExecutor::Impl::all_reduce_on(const cuda::PeerAllReduceView* peer, void* buf,
                                              size_t elements, void* on) {
  using Form = cuda::PeerAllReduceForm;
  const Form form =
      peer ? cuda::peer_all_reduce_form(*peer, elements * cuda::dtype_size(dt)) : Form::kNone;
  if (form == Form::kOneShot) return cuda::peer_all_reduce_sum(*peer, dt, buf, elements, on);
  if (form == Form::kTwoShot) return cuda::peer_all_reduce_two_shot(*peer, dt, buf, elements, on);
  return tp->comm->all_reduce_sum(buf, elements, comm_type(dt), on);
}

Status CudaLlamaExecutor::Impl::tp_all_reduce_norm(void* x, int rows, const void* weight, void* y,
                                                   bool& normed) {
  normed = false;
  if (!tp || shard.world == 1) return Status();
  const int H = config.hidden_size;
  // The fused one-shot wherever its staging holds x, also past the two-shot's crossover: there
  // the two-shot alone is level with the one-shot (2 MiB: 11.4 against 11.8 us; 4 MiB: 17.5
  // against 20.3) and would need a norm launch after it.
  if (weight && fused_tp_norm && tp->peer && cuda::peer_all_reduce_norm_fits(*tp->peer, rows, H)) {
    FOLIO_RETURN_IF_ERROR(cuda::peer_all_reduce_rms_norm(
        *tp->peer, dt, x, weight, y, rows, H, static_cast<float>(config.rms_norm_eps), stream));
    mark("all_reduce_norm");
    normed = true;
    return Status();
  }
  return tp_all_reduce(x, static_cast<size_t>(rows) * H);
}

Status CudaLlamaExecutor::Impl::tp_barrier(const Status& st) {
  if (!tp) return st;
  return tp->agree(st, 0).status();
}

// Per chunk of rows: gather, final norm (x is the same on every rank after the all-reduce), the
// rank's [n, local_vocab] fp32 logits, an all-gather into [world, n, local_vocab]; rank 0 then
// reorders each rank's block into its columns of [n, vocab] in `logits` (strided device copies,
// the padding columns of the last rank dropped) and delivers the chunk like one GPU would
// (device sampling, host rows): sampling happens once, on rank 0.
Status CudaLlamaExecutor::Impl::compute_logits_tp(const ForwardBatch& b, const StepArrays& d,
                                                  const LogitsRequest& req) {
  const int R = static_cast<int>(b.logits_rows.size()), H = config.hidden_size;
  const int V = config.vocab_size, T = b.num_tokens(), LV = shard.local_vocab, W = shard.world;
  const bool root = shard.rank == 0;
  // A failure that only rank 0 can meet (its sampling rows) is held until the step's collectives
  // are all issued, so the other ranks are never left waiting in one.
  const Status root_st = root ? begin_logits(req, R) : Status();
  FOLIO_RETURN_IF_ERROR(
      ensure_device(gathered, static_cast<size_t>(kLogitsChunkRows) * shard.padded_vocab * 4));
  size_t next_host = 0;
  for (int r0 = 0; r0 < R; r0 += kLogitsChunkRows) {
    const int n = std::min(kLogitsChunkRows, R - r0);
    FOLIO_RETURN_IF_ERROR(
        cuda::embedding(dt, x.data(), d.logits_rows + r0, rows.data(), n, H, T, nullptr));
    FOLIO_RETURN_IF_ERROR(cuda::rms_norm(dt, rows.data(), weights.final_norm, rows_normed.data(), n,
                                         H, static_cast<float>(config.rms_norm_eps), nullptr));
    FOLIO_RETURN_IF_ERROR(logits_gemm->matmul_nt_f32(dt, rows_normed.data(), weights.lm_head,
                                                     logits.as<float>(), n, LV, H, nullptr));
    const size_t block = static_cast<size_t>(n) * LV;
    FOLIO_RETURN_IF_ERROR(
        tp->comm->all_gather(logits.data(), gathered.data(), block, CommType::kF32, nullptr));
    mark("lm_head");
    if (!root || !root_st.ok()) continue;
    for (int w = 0; w < W; ++w) {
      const int cols = std::min(LV, V - w * LV);  // the last rank's slice ends in padding
      if (cols <= 0) continue;
      FOLIO_RETURN_IF_ERROR(cuda::copy_2d(logits.as<float>() + static_cast<size_t>(w) * LV,
                                          sizeof(float) * V, gathered.as<float>() + w * block,
                                          sizeof(float) * LV, sizeof(float) * cols, n));
    }
    FOLIO_RETURN_IF_ERROR(deliver_chunk(req, r0, n, logits.as<float>(), next_host));
  }
  if (req.launch_only) FOLIO_RETURN_IF_ERROR(broadcast_samples(req));
  if (!root_st.ok()) return root_st;
  if (root) return end_logits(req);
  if (req.launch_only) return mark_rank_step_end();
  return cuda::synchronize();
}

// Every rank gets rank 0's SampleOut rows (the tokens; 16 bytes a row) in its sample_out, where
// the next launched step's placeholders are resolved. Each rank got the same sampling rows, so
// the sizes agree; a step that samples nothing broadcasts nothing on every rank.
Status CudaLlamaExecutor::Impl::broadcast_samples(const LogitsRequest& req) {
  const size_t rows = req.sampling ? req.sampling->rows.size() : 0;
  const size_t words = (rows * sizeof(cuda::SampleOut) + 15) / 16 * 4;
  if (words == 0) return Status();
  // On rank 0 upload_sampling sized it already (unless it failed: the broadcast still runs, so
  // the others are not left waiting). Elsewhere growing it here frees the old buffer, which
  // this step's placeholder resolution reads: safe because cudaFree waits for the device (it
  // grows by half again, so rarely).
  if (sample_out.bytes() < words * 4)
    FOLIO_RETURN_IF_ERROR(ensure_device(sample_out, words * 4 * 3 / 2));
  FOLIO_RETURN_IF_ERROR(tp->comm->broadcast(sample_out.data(), words, CommType::kI32, 0, nullptr));
  mark("sample_broadcast");
  return Status();
}

Status CudaLlamaExecutor::Impl::mark_rank_step_end() {
  if (rank_step_done.ev.empty())
    FOLIO_RETURN_IF_ERROR(rank_step_done.create(2, cudaEventDisableTiming));
  FOLIO_CUDA_RETURN_IF_ERROR(
      cudaEventRecord(rank_step_done.ev[static_cast<size_t>(staging)], nullptr));
  rank_step_pending[staging] = true;
  return Status();
}

Status CudaLlamaExecutor::Impl::wait_staging_slot() {
  if (!rank_step_pending[staging]) return Status();
  rank_step_pending[staging] = false;
  FOLIO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(rank_step_done.ev[static_cast<size_t>(staging)]));
  return Status();
}

}  // namespace folio
