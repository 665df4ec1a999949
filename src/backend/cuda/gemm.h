// GEMM over cuBLASLt for the model's linear layers, Hugging Face Linear layout:
//   y[m, n] = x[m, k] · w[n, k]^T  (+ y when accumulate: the residual add of o_proj/down_proj)
// bf16 or fp16 operands, fp32 accumulation, row-major contiguous tensors.
// One Gemm per stream/thread (it is not thread-safe): it owns the cuBLASLt handle, a workspace,
// and caches the matmul descriptors and the heuristic's algorithm per (dtype, m, n, k), so a
// step's repeated shapes pay for the heuristic once.
#pragma once

#include <cstddef>
#include <memory>

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

class Gemm {
 public:
  static Result<std::unique_ptr<Gemm>> create(size_t workspace_bytes = 32u << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  Status matmul_nt(DType dtype, const void* x, const void* w, void* y, int m, int n, int k,
                   bool accumulate, void* stream);

  size_t cached_plans() const;

 private:
  struct Impl;
  explicit Gemm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace folio::cuda
