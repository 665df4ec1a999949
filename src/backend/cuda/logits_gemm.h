// The lm_head GEMM with fp32 output: logits[m, n] = x[m, k] · w[n, k]^T, x and w bf16/fp16,
// fp32 accumulation and fp32 result. Gemm (gemm.h) writes its output in the operand dtype;
// logits rounded to bf16 lose 0.06-0.25 of absolute precision at the magnitudes models produce
// (16-64), enough to flip greedy choices that fp32 logits would keep, so the last GEMM writes
// fp32 directly (cuBLAS cublasGemmEx). One LogitsGemm per stream/thread; not thread-safe.
#pragma once

#include <memory>

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

class LogitsGemm {
 public:
  static Result<std::unique_ptr<LogitsGemm>> create();
  ~LogitsGemm();
  LogitsGemm(const LogitsGemm&) = delete;
  LogitsGemm& operator=(const LogitsGemm&) = delete;

  Status matmul_nt_f32(DType dtype, const void* x, const void* w, float* y, int m, int n, int k,
                       void* stream);

 private:
  LogitsGemm() = default;
  void* handle_ = nullptr;  // cublasHandle_t
};

}  // namespace folio::cuda
