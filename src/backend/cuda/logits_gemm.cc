#include "backend/cuda/logits_gemm.h"

#include <cublas_v2.h>

#include <string>

#include "backend/cuda/cuda_check.h"

namespace folio::cuda {
namespace {

Status blas_status(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status();
  const StatusCode code =
      st == CUBLAS_STATUS_ALLOC_FAILED ? StatusCode::kResourceExhausted : StatusCode::kInternal;
  return Status(code, std::string(what) + ": " + cublasGetStatusName(st) + " (" +
                          cublasGetStatusString(st) + ")");
}

}  // namespace

Result<std::unique_ptr<LogitsGemm>> LogitsGemm::create() {
  std::unique_ptr<LogitsGemm> g(new LogitsGemm());
  cublasHandle_t h = nullptr;
  FOLIO_RETURN_IF_ERROR(blas_status(cublasCreate(&h), "cublasCreate"));
  g->handle_ = h;
  return g;
}

LogitsGemm::~LogitsGemm() {
  if (handle_) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

// cuBLAS is column-major: the row-major y[m, n] is the column-major [n, m] = W · X^T, with the
// row-major weight [n, k] read as the transposed column-major [k, n] buffer.
Status LogitsGemm::matmul_nt_f32(DType dtype, const void* x, const void* w, float* y, int m,
                                 int n, int k, void* stream) {
  if (m == 0 || n == 0) return Status();
  auto h = static_cast<cublasHandle_t>(handle_);
  FOLIO_RETURN_IF_ERROR(blas_status(cublasSetStream(h, as_stream(stream)), "cublasSetStream"));
  const cudaDataType_t t = dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  const float alpha = 1.f, beta = 0.f;
  return blas_status(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, t, k, x, t, k,
                                  &beta, y, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx");
}

}  // namespace folio::cuda
