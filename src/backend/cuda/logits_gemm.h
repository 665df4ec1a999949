// The lm_head GEMM with fp32 output: logits[m, n] = x[m, k] · w[n, k]^T, x and w bf16/fp16,
// fp32 accumulation and fp32 result. Gemm (gemm.h) writes its output in the operand dtype;
// logits rounded to bf16 lose 0.06-0.25 of absolute precision at the magnitudes models produce
// (16-64), enough to flip greedy choices that fp32 logits would keep, so the last GEMM writes
// fp32 directly. One LogitsGemm per stream/thread; not thread-safe.
//
// m = 1 (batch-1 decode) runs skinny_gemm_f32 (skinny_gemm.h), which streams the weights faster
// than either cuBLAS path (H100: 336 against 377 us for Llama-3-8B's lm_head). Above that, two implementations, FOLIO_LOGITS_GEMM selects (to compare on the GPU):
//   lt: cuBLASLt with a plan per (dtype, m, n, k), autotuned like Gemm (gemm.h; same
//     FOLIO_GEMM_AUTOTUNE* switches) on the caller's operands. Timing writes the caller's y, which
//     the real call then overwrites (beta = 0, so nothing is read from y). Owns a 32 MiB
//     workspace, allocated by create(). No plan is created during a stream capture (an error):
//     prepare() first.
//   gemmex (default): cublasGemmEx (CUBLAS_GEMM_DEFAULT), no plans; capture-safe as is. On the
//     H100 the lt path took 0.95 ms per decode step at batch 128 against 0.46 ms for this one.
#pragma once

#include <memory>

#include "backend/cuda/dtype.h"
#include "backend/cuda/gemm.h"
#include "base/status.h"

namespace folio::cuda {

enum class LogitsGemmPath { kFromEnv, kLt, kGemmEx };

class LogitsGemm {
 public:
  // skinny_max_m: m up to this runs skinny_gemm_f32 on either path (0: never; -1: from
  // FOLIO_SKINNY_GEMM_MAX_M, default 1; skinny_gemm.h).
  static Result<std::unique_ptr<LogitsGemm>> create(LogitsGemmPath path = LogitsGemmPath::kFromEnv,
                                                    GemmAutotune autotune = GemmAutotune::kFromEnv,
                                                    int skinny_max_m = -1);
  ~LogitsGemm();
  LogitsGemm(const LogitsGemm&) = delete;
  LogitsGemm& operator=(const LogitsGemm&) = delete;

  Status matmul_nt_f32(DType dtype, const void* x, const void* w, float* y, int m, int n, int k,
                       void* stream);

  // Creates (and tunes, writing y[m, n]) the plan for a shape; a no-op when it exists or on the
  // gemmex path. Synchronizes `stream`; not during a capture.
  Status prepare(DType dtype, const void* x, const void* w, float* y, int m, int n, int k,
                 void* stream = nullptr);

  LogitsGemmPath path() const;  // kLt or kGemmEx
  size_t cached_plans() const;
  size_t tuned_plans() const;

 private:
  struct Impl;
  explicit LogitsGemm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace folio::cuda
