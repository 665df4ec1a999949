// Tensor parallelism, prefill-sized steps, FOLIO_TP_OVERLAP_CHUNKS=n (opt-in): each row-parallel
// product (o_proj, down) runs in n chunks of rows on the legacy stream while a second,
// high-priority stream all-reduces the chunks already done, so only the last chunk's all-reduce
// stays exposed (the all-reduces were 9.3% of a 16 x 1024 prefill step of Llama-3-70B at -tp 2).
// Rows are independent in both the product and the sum, so chunk c's sum runs beside chunk
// c + 1's product on other rows of x.
//
// Why opt-in (NOTES.md, session 39, two H200s): alone, the pair hides most of the all-reduce
// (PeerOverlapBench: 70B's down 4.69 ms against 5.34 serial), but in a step that holds the
// power cap the step gains only 1-2% at 16384 tokens, nothing at 8192, and loses 4% at 2048
// (smaller products lose more to chunking). Leaving SMs to the sum (cuBLASLt's SM count
// target) was slower still.
//
// Ordering: the comm stream waits for each chunk's product (an event on the legacy stream), and
// the legacy stream waits for the comm stream's last all-reduce before anything reads x. A
// rank's all-reduce call ends only once every rank is done with its buffer (peer_all_reduce.h),
// so after that wait no peer still reads or writes this rank's x. Every all-reduce of a step
// runs on one stream at a time, in the same order on every rank, as the peer forms require.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "base/env.h"
#include "model/cuda_llama_executor_impl.h"

namespace folio {
namespace {

// Chunk boundaries on multiples of this many rows (whole GEMM tiles).
constexpr int kOverlapRowAlign = 64;

}  // namespace

Status CudaLlamaExecutor::Impl::configure_tp_overlap() {
  FOLIO_ASSIGN_OR_RETURN(tp_overlap_chunks,
                         env_int("FOLIO_TP_OVERLAP_CHUNKS", tp_overlap_chunks, 0, 64));
  FOLIO_ASSIGN_OR_RETURN(tp_overlap_from,
                         env_int("FOLIO_TP_OVERLAP_FROM", tp_overlap_from, 1, 1 << 30));
  FOLIO_ASSIGN_OR_RETURN(tp_overlap_blocks, env_int("FOLIO_TP_OVERLAP_BLOCKS", tp_overlap_blocks, 1,
                                                    cuda::kTwoShotMaxBlocks));
  return Status();
}

bool CudaLlamaExecutor::Impl::tp_overlaps(int tokens) const {
  if (!tp || shard.world == 1 || stream != nullptr || tp_overlap_chunks < 2 ||
      tokens < tp_overlap_from || tokens < 2 * kOverlapRowAlign)
    return false;
  // Where the fused all-reduce + norm takes x, it stays (one launch, no chunks).
  return !(fused_tp_norm && tp->peer &&
           cuda::peer_all_reduce_norm_fits(*tp->peer, tokens, config.hidden_size));
}

Status CudaLlamaExecutor::Impl::row_parallel_overlapped(const void* a, const void* w, int tokens,
                                                        int k, bool residual) {
  if (comm_stream.empty()) {
    FOLIO_RETURN_IF_ERROR(comm_stream.create(/*high=*/true));
    FOLIO_RETURN_IF_ERROR(overlap_events.create(2, cudaEventDisableTiming));
  }
  cuda::PeerAllReduceView view;
  if (tp->peer) {
    view = *tp->peer;  // the same grid on every rank: the same environment
    view.two_shot_blocks = std::min(tp_overlap_blocks, std::max(1, view.two_shot_resident));
  }
  const int H = config.hidden_size;
  const size_t esz = cuda::dtype_size(dt);
  const int per_chunk = (tokens + tp_overlap_chunks - 1) / tp_overlap_chunks;
  const int rows = (per_chunk + kOverlapRowAlign - 1) / kOverlapRowAlign * kOverlapRowAlign;
  const auto* in = static_cast<const char*>(a);
  char* out = x.as<char>();
  cudaEvent_t product_done = overlap_events.ev[0], sums_done = overlap_events.ev[1];
  auto comm = static_cast<cudaStream_t>(comm_stream.get());
  for (int r0 = 0; r0 < tokens; r0 += rows) {
    const int n = std::min(rows, tokens - r0);
    char* chunk = out + static_cast<size_t>(r0) * H * esz;
    FOLIO_RETURN_IF_ERROR(gemm->matmul_nt(dt, in + static_cast<size_t>(r0) * k * esz, w, chunk, n,
                                          H, k, residual, nullptr));
    // Waits take the event's latest record, so one event serves every chunk.
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(product_done, nullptr));
    FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(comm, product_done, 0));
    FOLIO_RETURN_IF_ERROR(
        all_reduce_on(tp->peer ? &view : nullptr, chunk, static_cast<size_t>(n) * H, comm));
  }
  FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(sums_done, comm));
  FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(nullptr, sums_done, 0));
  return Status();
}

}  // namespace folio
