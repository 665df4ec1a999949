#include "backend/cuda/gemm_sustained_tune.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_events.h"
#include "base/log.h"

namespace folio::cuda {

Result<TuneResult> time_candidates_sustained(
    const LtProblem& p, const std::vector<cublasLtMatmulHeuristicResult_t>& cands,
    const TuneBuffers& buf, float alpha, float beta, cudaStream_t stream) {
  if (cands.empty()) return internal_error("time_candidates_sustained: no candidate algorithm");
  const size_t nc = cands.size();
  CudaEvents events;
  FOLIO_RETURN_IF_ERROR(events.create(kSustainedBurst + 1));
  std::vector<bool> refused(nc, false);
  std::vector<std::vector<float>> ms(nc);
  for (int r = 0; r < kSustainedRounds; ++r) {
    for (size_t c = 0; c < nc; ++c) {
      if (refused[c]) continue;
      FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(events.ev[0], stream));
      for (int b = 0; b < kSustainedBurst && !refused[c]; ++b) {
        refused[c] = cublasLtMatmul(p.handle, p.desc, &alpha, buf.a, p.a, buf.b, p.b, &beta, buf.c,
                                    p.c, buf.c, p.c, &cands[c].algo, buf.workspace,
                                    p.workspace_bytes, stream) != CUBLAS_STATUS_SUCCESS;
        FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(events.ev[b + 1], stream));
      }
      // One candidate's burst at a time, so the next one starts on the clock this one left.
      FOLIO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events.ev[kSustainedBurst]));
      for (int b = 0; r > 0 && !refused[c] && b < kSustainedBurst; ++b) {
        float t = 0.f;
        FOLIO_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&t, events.ev[b], events.ev[b + 1]));
        ms[c].push_back(t);
      }
    }
  }
  FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // a fault surfaces here
  std::vector<float> median_us(nc, std::numeric_limits<float>::infinity());
  for (size_t c = 0; c < nc; ++c) {
    if (refused[c] || ms[c].empty()) continue;
    std::nth_element(ms[c].begin(), ms[c].begin() + ms[c].size() / 2, ms[c].end());
    median_us[c] = 1000.f * ms[c][ms[c].size() / 2];
  }
  return choose_fastest(std::move(median_us), "time_candidates_sustained");
}

Result<TuneResult> pick_algo_sustained(LtPlan& plan, cublasLtHandle_t handle,
                                       size_t workspace_bytes, const TuneBuffers& buf, float beta,
                                       cudaStream_t stream, const std::string& name) {
  const LtProblem prob{handle, plan.desc, plan.a, plan.b, plan.c, workspace_bytes};
  FOLIO_ASSIGN_OR_RETURN(auto cands, heuristic_algos(prob, kSustainedCandidates));
  if (cands.empty()) return unimplemented("cuBLASLt has no algorithm for " + name);
  plan.chosen = 0;
  TuneResult r;
  if (cands.size() > 1) {
    FOLIO_ASSIGN_OR_RETURN(r, time_candidates_sustained(prob, cands, buf, 1.f, beta, stream));
    plan.chosen = r.chosen;
    char line[160];
    std::snprintf(line, sizeof line, "%.1f us (heuristic's first %.1f us), algorithm %d of %zu",
                  r.median_us[r.chosen], r.median_us[0], r.chosen, cands.size());
    log_info("gemm sustained tune " + name + ": " + line + ", " +
             algo_config(cands[plan.chosen].algo));
  }
  plan.tuned = true;
  plan.algo = cands[plan.chosen].algo;
  return r;
}

}  // namespace folio::cuda
