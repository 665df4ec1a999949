// Choosing cuBLASLt's kernel for the large-m products (prefill) by timing under sustained load
// (internal to backend/cuda: it includes cublasLt.h).
//
// Why: a long prefill step runs its products back to back for hundreds of milliseconds, and the
// H200 then sits at its power cap (700 W; SM clock ~1490 MHz against 1980 in a 16384-token step,
// session 35). cuBLASLt's heuristic ranks its kernels for the unthrottled chip; under the cap
// another of its first 8 ran 3-9% faster per product (GemmBench.LargeMCandidatesSustained) and a
// 16384-token prefill step 2.1% faster (363.3 against 371.1 ms). gemm_autotune's short timing
// (5 launches after an L2 flush) measures the unthrottled chip, so it cannot see this.
//
// Protocol: the heuristic's first kSustainedCandidates kernels, in kSustainedRounds rounds of
// kSustainedBurst launches back to back per candidate, candidates interleaved round by round so
// drift in clock and temperature falls on each alike; the first round is untimed (warm-up) and
// the score is the median launch of the rest. The heuristic's first is kept unless another is
// faster by more than kMinGain.
//
// The choice depends on a timing, so two processes may choose differently when candidates are
// close, and different kernels may round differently: Gemm uses it only when asked
// (FOLIO_GEMM_TUNE_LARGE_M, gemm.h), as vLLM's default stays reproducible run to run;
// FOLIO_GEMM_TUNE_CACHE keeps the choices in a file so later processes run the same kernels.
#pragma once

#include <string>
#include <vector>

#include "backend/cuda/gemm_autotune.h"

namespace folio::cuda {

inline constexpr int kSustainedCandidates = 8;
inline constexpr int kSustainedRounds = 5;
inline constexpr int kSustainedBurst = 4;

// Times every candidate as above on `stream` (synchronizes it). buf.flush is not used. A
// candidate cuBLASLt refuses to run scores +inf; an error only when none runs.
Result<TuneResult> time_candidates_sustained(
    const LtProblem& p, const std::vector<cublasLtMatmulHeuristicResult_t>& cands,
    const TuneBuffers& buf, float alpha, float beta, cudaStream_t stream);

// Sets plan.algo (tuned = true, chosen) from the sustained timing on `buf` (alpha 1, `beta`) and
// returns the timing (median_us empty when cuBLASLt offered one kernel only). `name` labels errors
// and the log line.
Result<TuneResult> pick_algo_sustained(LtPlan& plan, cublasLtHandle_t handle, size_t workspace_bytes,
                           const TuneBuffers& buf, float beta, cudaStream_t stream,
                           const std::string& name);

}  // namespace folio::cuda
