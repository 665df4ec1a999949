#include "backend/cuda/gemm_autotune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_events.h"
#include "base/env.h"
#include "base/log.h"

namespace folio::cuda {

// "algo 21 tile 18 stages 9 splitK 1 swizzle 0 cluster 2": the cuBLASLt kernel a plan runs, for
// FOLIO_LOG_LEVEL=debug (to compare the engine's choice with GemmBench's for one shape).
std::string algo_config(const cublasLtMatmulAlgo_t& algo) {
  struct Field {
    const char* name;
    cublasLtMatmulAlgoConfigAttributes_t attr;
  };
  std::string out;
  for (const Field& f : {Field{"algo", CUBLASLT_ALGO_CONFIG_ID},
                         Field{"tile", CUBLASLT_ALGO_CONFIG_TILE_ID},
                         Field{"stages", CUBLASLT_ALGO_CONFIG_STAGES_ID},
                         Field{"splitK", CUBLASLT_ALGO_CONFIG_SPLITK_NUM},
                         Field{"swizzle", CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING},
                         Field{"cluster", CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID}}) {
    uint32_t v = 0;  // every field here is 32 bits wide or narrower; size_t written says which
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, f.attr, &v, sizeof v, &written) !=
        CUBLAS_STATUS_SUCCESS)
      continue;
    if (!out.empty()) out += ' ';
    out += f.name;
    out += ' ';
    out += std::to_string(v);
  }
  return out;
}

Status lt_status(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status();
  const StatusCode code =
      st == CUBLAS_STATUS_ALLOC_FAILED ? StatusCode::kResourceExhausted : StatusCode::kInternal;
  return Status(code, std::string(what) + ": " + cublasLtGetStatusName(st) + " (" +
                          cublasLtGetStatusString(st) + ")");
}

LtPlan::~LtPlan() {
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (desc) cublasLtMatmulDescDestroy(desc);
}

Status LtPlan::describe_nt(cudaDataType_t in, cudaDataType_t out, int m, int n, int k) {
  FOLIO_RETURN_IF_ERROR(lt_status(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                                  "cublasLtMatmulDescCreate"));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  FOLIO_RETURN_IF_ERROR(
      lt_status(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
                "cublasLtMatmulDescSetAttribute(TRANSA)"));
  FOLIO_RETURN_IF_ERROR(
      lt_status(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
                "cublasLtMatmulDescSetAttribute(TRANSB)"));
  FOLIO_RETURN_IF_ERROR(
      lt_status(cublasLtMatrixLayoutCreate(&a, in, k, n, k), "cublasLtMatrixLayoutCreate(A)"));
  FOLIO_RETURN_IF_ERROR(
      lt_status(cublasLtMatrixLayoutCreate(&b, in, k, m, k), "cublasLtMatrixLayoutCreate(B)"));
  FOLIO_RETURN_IF_ERROR(
      lt_status(cublasLtMatrixLayoutCreate(&c, out, n, m, n), "cublasLtMatrixLayoutCreate(C)"));
  return Status();
}

Result<AutotuneOptions> AutotuneOptions::from_env() {
  AutotuneOptions o;
  FOLIO_ASSIGN_OR_RETURN(const int on, env_int("FOLIO_GEMM_AUTOTUNE", 0, 0, 1));
  o.enabled = on == 1;
  FOLIO_ASSIGN_OR_RETURN(o.max_candidates, env_int("FOLIO_GEMM_AUTOTUNE_ALGOS", 16, 1, 64));
  FOLIO_ASSIGN_OR_RETURN(o.max_m, env_int("FOLIO_GEMM_AUTOTUNE_MAX_M", 512, 0, 1 << 30));
  FOLIO_ASSIGN_OR_RETURN(const int buckets, env_int("FOLIO_GEMM_AUTOTUNE_BUCKETS", 1, 0, 1));
  o.bucketed = buckets == 1;
  FOLIO_ASSIGN_OR_RETURN(o.large_m, env_int("FOLIO_GEMM_TUNE_LARGE_M", 0, 0, 1 << 30));
  if (const char* c = std::getenv("FOLIO_GEMM_TUNE_CACHE")) o.tune_cache = c;
  return o;
}

Status check_not_capturing(cudaStream_t stream, const std::string& what) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  const cudaError_t err = cudaStreamIsCapturing(stream, &cs);
  if (err != cudaSuccess) {
    cudaGetLastError();  // the query's error is not sticky; do not leave it for a later check
    return internal_error(what + ": cannot tell whether the stream is capturing (" +
                          cudaGetErrorName(err) + "); plans must be created outside capture");
  }
  if (cs != cudaStreamCaptureStatusNone)
    return internal_error(what +
                          ": no plan for this shape and the stream is capturing a CUDA "
                          "graph; creating a plan times kernels, which capture must not "
                          "record. Call Gemm::prepare (or run the step once) before "
                          "capturing");
  return Status();
}

Result<std::vector<cublasLtMatmulHeuristicResult_t>> heuristic_algos(const LtProblem& p,
                                                                     int max_results) {
  cublasLtMatmulPreference_t pref = nullptr;
  FOLIO_RETURN_IF_ERROR(
      lt_status(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate"));
  const size_t ws = p.workspace_bytes;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  std::vector<cublasLtMatmulHeuristicResult_t> results(std::max(max_results, 1));
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(p.handle, p.desc, p.a, p.b, p.c, p.c, pref,
                                        static_cast<int>(results.size()), results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  FOLIO_RETURN_IF_ERROR(lt_status(st, "cublasLtMatmulAlgoGetHeuristic"));
  results.resize(std::max(found, 0));
  // Drop entries cuBLASLt marks unusable (state != success), keeping the order.
  std::erase_if(results, [&](const auto& r) {
    return r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > p.workspace_bytes;
  });
  return results;
}

Result<TuneResult> time_candidates(const LtProblem& p,
                                   const std::vector<cublasLtMatmulHeuristicResult_t>& cands,
                                   const TuneBuffers& buf, float alpha, float beta,
                                   cudaStream_t stream) {
  TuneResult r;
  r.median_us.assign(cands.size(), std::numeric_limits<float>::infinity());
  if (cands.empty()) return internal_error("time_candidates: no candidate algorithm");
  CudaEvents events;
  FOLIO_RETURN_IF_ERROR(events.create(2 * kTimedRuns));
  auto run = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(p.handle, p.desc, &alpha, buf.a, p.a, buf.b, p.b, &beta, buf.c, p.c,
                          buf.c, p.c, &algo, buf.workspace, p.workspace_bytes, stream);
  };
  for (size_t i = 0; i < cands.size(); ++i) {
    bool runs = true;
    for (int w = 0; w < 2 && runs; ++w) runs = run(cands[i].algo) == CUBLAS_STATUS_SUCCESS;
    if (!runs) continue;  // refused at launch (cuBLASLt checks the algo against the problem)
    for (int t = 0; t < kTimedRuns && runs; ++t) {
      if (buf.flush)
        FOLIO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buf.flush, t & 1, buf.flush_bytes, stream));
      FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(events.ev[2 * t], stream));
      runs = run(cands[i].algo) == CUBLAS_STATUS_SUCCESS;
      FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(events.ev[2 * t + 1], stream));
    }
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events.ev[2 * kTimedRuns - 1]));
    if (!runs) continue;
    std::vector<float> ms(kTimedRuns);
    for (int t = 0; t < kTimedRuns; ++t)
      FOLIO_CUDA_RETURN_IF_ERROR(
          cudaEventElapsedTime(&ms[t], events.ev[2 * t], events.ev[2 * t + 1]));
    std::nth_element(ms.begin(), ms.begin() + kTimedRuns / 2, ms.end());
    r.median_us[i] = 1000.f * ms[kTimedRuns / 2];
  }
  // A kernel fault during timing would be sticky and reported here rather than later.
  FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return choose_fastest(std::move(r.median_us), "time_candidates");
}

Result<TuneResult> choose_fastest(std::vector<float> median_us, const char* what) {
  TuneResult r;
  r.median_us = std::move(median_us);
  const auto best = std::min_element(r.median_us.begin(), r.median_us.end());
  if (best == r.median_us.end() || !std::isfinite(*best))
    return internal_error(std::string(what) + ": no candidate algorithm ran");
  r.chosen = static_cast<int>(best - r.median_us.begin());
  // Keep the heuristic's choice (index 0) unless the winner is clearly faster.
  if (std::isfinite(r.median_us[0]) && *best > (1.f - kMinGain) * r.median_us[0]) r.chosen = 0;
  return r;
}

bool algo_fits(const LtPlan& plan, cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algo,
               size_t workspace_bytes) {
  cublasLtMatmulHeuristicResult_t check{};
  return cublasLtMatmulAlgoCheck(handle, plan.desc, plan.a, plan.b, plan.c, plan.c, &algo,
                                 &check) == CUBLAS_STATUS_SUCCESS &&
         check.workspaceSize <= workspace_bytes;
}

int tune_bucket(int m) {
  if (m <= 4 || m > (1 << 28)) return m;
  int lo = 4;  // steps 4, 6, 8, 12, 16, 24, ...: lo and 1.5·lo
  while (true) {
    if (m <= lo + lo / 2) return lo + lo / 2;
    if (m <= 2 * lo) return 2 * lo;
    lo *= 2;
  }
}

Status pick_algo(LtPlan& plan, cublasLtHandle_t handle, size_t workspace_bytes, int max_candidates,
                 const TuneBuffers* buf, const cublasLtMatmulAlgo_t* reuse, float beta,
                 cudaStream_t stream, const std::string& name) {
  if (buf && reuse && algo_fits(plan, handle, *reuse, workspace_bytes)) {
    plan.algo = *reuse;
    plan.tuned = plan.reused = true;
    return Status();
  }  // else time this m itself
  const LtProblem prob{handle, plan.desc, plan.a, plan.b, plan.c, workspace_bytes};
  FOLIO_ASSIGN_OR_RETURN(auto cands, heuristic_algos(prob, buf ? max_candidates : 1));
  if (cands.empty()) return unimplemented("cuBLASLt has no algorithm for " + name);
  plan.chosen = 0;
  if (buf && cands.size() > 1) {
    FOLIO_ASSIGN_OR_RETURN(TuneResult r, time_candidates(prob, cands, *buf, 1.f, beta, stream));
    plan.tuned = true;
    plan.chosen = r.chosen;
    char line[160];
    std::snprintf(line, sizeof line, "%.1f us (heuristic's first %.1f us), algorithm %d of %zu",
                  r.median_us[r.chosen], r.median_us[0], r.chosen, cands.size());
    log_debug("gemm autotune " + name + ": " + line);
  }
  plan.algo = cands[plan.chosen].algo;
  if (log_level() <= LogLevel::kDebug)
    log_debug("gemm plan " + name + ": " + algo_config(plan.algo) +
              (plan.tuned ? " (tuned)" : " (heuristic's first)"));
  return Status();
}

}  // namespace folio::cuda
