// Per-shape algorithm choice for cuBLASLt matmuls (internal to backend/cuda: it includes
// cublasLt.h). cuBLASLt's heuristic ranks algorithms by a model, and its first choice is far from
// the best for the memory-bound skinny GEMMs of decode (m = batch 1..512: measured 1.6-2.7 TB/s of
// weight bytes on an H100 that copies at 3.0). So a plan asks for up to `max_candidates`
// algorithms and times each on the real shape with CUDA events, keeping the fastest.
//
// Timing protocol (per candidate): 2 untimed warm-up runs, then kTimedRuns runs, each preceded by
// a write of the `flush` buffer (>= L2 size evicts the weights from L2, as the other layers'
// traffic does in a real forward) and bracketed by its own event pair; the score is the median.
// The heuristic's first choice is kept unless another is faster by more than kMinGain, so noise
// does not flip choices between processes.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace folio::cuda {

struct AutotuneOptions {
  bool enabled = true;      // FOLIO_GEMM_AUTOTUNE=0 turns it off (first heuristic algorithm)
  int max_candidates = 16;  // FOLIO_GEMM_AUTOTUNE_ALGOS (1..64): heuristic results to time
  int max_m = 512;          // FOLIO_GEMM_AUTOTUNE_MAX_M: larger m (prefill) keeps the heuristic
  // FOLIO_GEMM_AUTOTUNE_BUCKETS=0 times every m; by default the first m timed in a bucket
  // (tune_bucket) lends its algorithm to the bucket's other m, so a server meeting every batch
  // size from 1 to 512 times each shape ~20 times, not 512 (each timing stalls the step ~5-30 ms).
  bool bucketed = true;
  // FOLIO_GEMM_TUNE_LARGE_M: from this m the sustained-load timing of gemm_sustained_tune.h
  // chooses the kernel, once per product (gemm.h); 0 (the default) leaves it off.
  int large_m = 0;
  // FOLIO_GEMM_TUNE_CACHE: a file (backend/gemm_tune_cache.h) where the large-m choices are kept
  // and read back, so only the first process on a GPU times them; empty: no file.
  std::string tune_cache;
  // Reads the FOLIO_GEMM_AUTOTUNE* variables; a malformed value is an error, not a silent default.
  static Result<AutotuneOptions> from_env();
};

inline constexpr int kTimedRuns = 5;
inline constexpr float kMinGain = 0.02f;  // 2%

struct LtPlan;

// One in-place matmul D = alpha·op(A)·op(B) + beta·C with D == C, as Gemm/LogitsGemm issue it.
struct LtProblem {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // c is also D's layout
  size_t workspace_bytes = 0;                                    // the most any candidate may use
};

// Up to `max_results` algorithms, cuBLASLt's ranking order (best first); empty when none fits.
Result<std::vector<cublasLtMatmulHeuristicResult_t>> heuristic_algos(const LtProblem& p,
                                                                     int max_results);

// The operands one timing session runs on. a and b are only read; c is overwritten (scratch,
// never the caller's output: an accumulating GEMM reads it). flush is overwritten too.
struct TuneBuffers {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  void* workspace = nullptr;
  void* flush = nullptr;
  size_t flush_bytes = 0;
};

struct TuneResult {
  int chosen = 0;                // index into the candidates
  std::vector<float> median_us;  // per candidate; +inf where the candidate failed to run
};

// The choice from per-candidate medians (+inf: did not run): the fastest, but the heuristic's
// first (index 0) unless the fastest beats it by more than kMinGain. `what` names the error when
// no candidate ran.
Result<TuneResult> choose_fastest(std::vector<float> median_us, const char* what);

// True when cuBLASLt accepts `algo` for the plan's shape within `workspace_bytes`
// (cublasLtMatmulAlgoCheck): an algorithm chosen for another m, or read back from a file.
bool algo_fits(const LtPlan& plan, cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algo,
               size_t workspace_bytes);

// Times every candidate on `stream` (synchronizes it) and picks the fastest (see the header
// comment). A candidate cuBLASLt refuses to run is skipped; an error only when none runs.
Result<TuneResult> time_candidates(const LtProblem& p,
                                   const std::vector<cublasLtMatmulHeuristicResult_t>& cands,
                                   const TuneBuffers& buf, float alpha, float beta,
                                   cudaStream_t stream);

// Descriptors and the chosen algorithm for one row-major y[m, n] = x[m, k] · w[n, k]^T.
// cuBLASLt is column-major: y is the column-major C[n, m] = W · X^T with W the row-major [n, k]
// weight read transposed (op(A) = A^T on a column-major [k, n] buffer) and X^T the column-major
// [k, m] view of x. Inputs of type `in`, C/D of type `out`, fp32 compute and scale.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool tuned = false;   // timed (else cuBLASLt's first heuristic choice)
  int chosen = 0;       // index of the kept algorithm in the heuristic's ranking
  bool reused = false;  // tuned = true by reusing its bucket's algorithm, not timed itself
  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan();
  Status describe_nt(cudaDataType_t in, cudaDataType_t out, int m, int n, int k);
};

// The bucket of m values sharing one tuned algorithm: m itself up to 4, then geometric steps of
// 1.5x/2x (6, 8, 12, 16, 24, 32, 48, ...): returns the bucket's upper end.
int tune_bucket(int m);

// Sets plan.algo (and tuned, chosen) for a described plan: cuBLASLt's first heuristic choice
// when `buf` is null; else `reuse` when given and cuBLASLt accepts it for this shape
// (cublasLtMatmulAlgoCheck); else the fastest of up to `max_candidates` timed on `buf`
// (alpha 1, `beta`). `name` labels errors and the debug log line.
Status pick_algo(LtPlan& plan, cublasLtHandle_t handle, size_t workspace_bytes, int max_candidates,
                 const TuneBuffers* buf, const cublasLtMatmulAlgo_t* reuse, float beta,
                 cudaStream_t stream, const std::string& name);

// "algo 66 tile 209 stages 35 splitK 1 swizzle 0": the cuBLASLt kernel an algorithm names (debug
// log lines, benchmarks).
std::string algo_config(const cublasLtMatmulAlgo_t& algo);

// "cuBLASLt status name (description)" wrapped in a Status naming `what`.
Status lt_status(cublasStatus_t st, const char* what);

// The fail-fast guard of graph capture: plan creation times kernels and allocates, which a stream
// capture must never record. Ok when `stream` is not capturing.
Status check_not_capturing(cudaStream_t stream, const std::string& what);

}  // namespace folio::cuda
