#include "backend/cuda/gemm.h"

#include <cublasLt.h>

#include <map>
#include <tuple>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_memory.h"

namespace folio::cuda {
namespace {

Status lt_status(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status();
  return internal_error(std::string(what) + ": " + cublasLtGetStatusName(st) + " (" +
                        cublasLtGetStatusString(st) + ")");
}

#define FOLIO_LT_RETURN_IF_ERROR(expr) FOLIO_RETURN_IF_ERROR(lt_status((expr), #expr))

// Descriptors and the chosen algorithm for one shape. cuBLASLt is column-major: the row-major
// y[m, n] is the column-major C[n, m] = W · X^T with W the row-major [n, k] weight read
// transposed (op(A) = A^T on a column-major [k, n] buffer) and X^T the column-major [k, m] view
// of x.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

}  // namespace

struct Gemm::Impl {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  std::map<std::tuple<int, int, int, int>, std::unique_ptr<Plan>> plans;

  ~Impl() {
    plans.clear();
    if (handle) cublasLtDestroy(handle);
  }

  Result<Plan*> plan_for(DType dtype, int m, int n, int k) {
    const auto key = std::make_tuple(static_cast<int>(dtype), m, n, k);
    if (auto it = plans.find(key); it != plans.end()) return it->second.get();
    auto p = std::make_unique<Plan>();
    const cudaDataType_t t = dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
    FOLIO_LT_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    FOLIO_LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                            &ta, sizeof(ta)));
    FOLIO_LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                            &tb, sizeof(tb)));
    FOLIO_LT_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&p->a, t, k, n, k));
    FOLIO_LT_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&p->b, t, k, m, k));
    FOLIO_LT_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&p->c, t, n, m, n));
    cublasLtMatmulPreference_t pref = nullptr;
    FOLIO_LT_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = workspace.bytes();
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(handle, p->desc, p->a, p->b, p->c, p->c, pref, 1,
                                          &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    FOLIO_RETURN_IF_ERROR(lt_status(st, "cublasLtMatmulAlgoGetHeuristic"));
    if (found == 0)
      return unimplemented("cuBLASLt has no algorithm for " + std::string(dtype_name(dtype)) +
                           " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                           " k=" + std::to_string(k));
    p->algo = result.algo;
    Plan* raw = p.get();
    plans.emplace(key, std::move(p));
    return raw;
  }
};

Gemm::Gemm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Gemm::~Gemm() = default;

Result<std::unique_ptr<Gemm>> Gemm::create(size_t workspace_bytes) {
  auto impl = std::make_unique<Impl>();
  FOLIO_LT_RETURN_IF_ERROR(cublasLtCreate(&impl->handle));
  FOLIO_ASSIGN_OR_RETURN(impl->workspace, DeviceBuffer::allocate(workspace_bytes));
  return std::unique_ptr<Gemm>(new Gemm(std::move(impl)));
}

Status Gemm::matmul_nt(DType dtype, const void* x, const void* w, void* y, int m, int n, int k,
                       bool accumulate, void* stream) {
  if (m < 0 || n < 0 || k < 0) return invalid_argument("matmul_nt: negative dimension");
  if (m == 0 || n == 0) return Status();
  if (k == 0)  // an empty sum: cuBLASLt rejects k = 0
    return accumulate ? Status() : memset_async(y, 0, size_t{2} * m * n, stream);
  FOLIO_ASSIGN_OR_RETURN(Plan * p, impl_->plan_for(dtype, m, n, k));
  const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  return lt_status(cublasLtMatmul(impl_->handle, p->desc, &alpha, w, p->a, x, p->b, &beta, y, p->c,
                                  y, p->c, &p->algo, impl_->workspace.data(),
                                  impl_->workspace.bytes(), as_stream(stream)),
                   "cublasLtMatmul");
}

size_t Gemm::cached_plans() const { return impl_->plans.size(); }

}  // namespace folio::cuda
