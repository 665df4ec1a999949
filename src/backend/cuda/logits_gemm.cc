#include "backend/cuda/logits_gemm.h"

#include <cublas_v2.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/gemm_autotune.h"
#include "backend/cuda/skinny_gemm.h"

namespace folio::cuda {
namespace {

Status blas_status(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status();
  const StatusCode code =
      st == CUBLAS_STATUS_ALLOC_FAILED ? StatusCode::kResourceExhausted : StatusCode::kInternal;
  return Status(code, std::string(what) + ": " + cublasGetStatusName(st) + " (" +
                          cublasGetStatusString(st) + ")");
}

constexpr size_t kWorkspaceBytes = 32u << 20;

Result<LogitsGemmPath> path_from_env() {
  const char* e = std::getenv("FOLIO_LOGITS_GEMM");
  const std::string v = e ? e : "";
  if (v == "lt") return LogitsGemmPath::kLt;
  if (v.empty() || v == "gemmex") return LogitsGemmPath::kGemmEx;
  return invalid_argument("FOLIO_LOGITS_GEMM=" + v + " (expected lt or gemmex)");
}

std::string shape_name(DType dtype, int m, int n, int k) {
  return std::string(dtype_name(dtype)) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
         " k=" + std::to_string(k) + " (fp32 out)";
}

}  // namespace

struct LogitsGemm::Impl {
  LogitsGemmPath path = LogitsGemmPath::kLt;
  int skinny_max_m = 1;  // m up to this runs skinny_gemm_f32 on either path
  cublasHandle_t blas = nullptr;  // gemmex path
  cublasLtHandle_t lt = nullptr;  // lt path
  DeviceBuffer workspace;         // lt path
  AutotuneOptions tune;
  std::map<std::tuple<int, int, int, int>, std::unique_ptr<LtPlan>> plans;
  std::map<std::tuple<int, int, int, int>, cublasLtMatmulAlgo_t> bucket_algos;  // by tune_bucket(m)

  ~Impl() {
    plans.clear();
    if (lt) cublasLtDestroy(lt);
    if (blas) cublasDestroy(blas);
  }

  LtPlan* find(DType dtype, int m, int n, int k) {
    auto it = plans.find({static_cast<int>(dtype), m, n, k});
    return it == plans.end() ? nullptr : it->second.get();
  }

  // Timing writes y (the real call overwrites it next) and reads x and w; no L2 flush: an lm_head
  // (vocab·hidden) is far larger than L2, so the runs stream it from memory anyway.
  Result<LtPlan*> create_plan(DType dtype, const void* x, const void* w, float* y, int m, int n,
                              int k, cudaStream_t stream) {
    const std::string name = shape_name(dtype, m, n, k);
    FOLIO_RETURN_IF_ERROR(check_not_capturing(stream, "LogitsGemm plan for " + name));
    auto p = std::make_unique<LtPlan>();
    const cudaDataType_t t = dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
    FOLIO_RETURN_IF_ERROR(p->describe_nt(t, CUDA_R_32F, m, n, k));
    const bool timed = tune.enabled && m <= tune.max_m;
    const TuneBuffers buf{w, x, y, workspace.data(), nullptr, 0};
    const auto bucket = std::make_tuple(static_cast<int>(dtype), tune_bucket(m), n, k);
    const auto lent = bucket_algos.find(bucket);
    const cublasLtMatmulAlgo_t* reuse =
        tune.bucketed && lent != bucket_algos.end() ? &lent->second : nullptr;
    FOLIO_RETURN_IF_ERROR(pick_algo(*p, lt, workspace.bytes(), tune.max_candidates,
                                    timed ? &buf : nullptr, reuse, 0.f, stream, name));
    if (p->tuned && !p->reused) bucket_algos.insert_or_assign(bucket, p->algo);
    LtPlan* raw = p.get();
    plans.emplace(std::make_tuple(static_cast<int>(dtype), m, n, k), std::move(p));
    return raw;
  }
};

LogitsGemm::LogitsGemm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LogitsGemm::~LogitsGemm() = default;

Result<std::unique_ptr<LogitsGemm>> LogitsGemm::create(LogitsGemmPath path, GemmAutotune autotune,
                                                       int skinny_max_m) {
  auto impl = std::make_unique<Impl>();
  FOLIO_ASSIGN_OR_RETURN(impl->skinny_max_m, skinny_max_m_from_env());
  if (skinny_max_m >= 0) impl->skinny_max_m = std::min(skinny_max_m, kSkinnyMaxM);
  if (path == LogitsGemmPath::kFromEnv) {
    FOLIO_ASSIGN_OR_RETURN(impl->path, path_from_env());
  } else {
    impl->path = path;
  }
  if (impl->path == LogitsGemmPath::kGemmEx) {
    FOLIO_RETURN_IF_ERROR(blas_status(cublasCreate(&impl->blas), "cublasCreate"));
  } else {
    FOLIO_ASSIGN_OR_RETURN(impl->tune, AutotuneOptions::from_env());
    if (autotune != GemmAutotune::kFromEnv) impl->tune.enabled = autotune == GemmAutotune::kOn;
    FOLIO_RETURN_IF_ERROR(lt_status(cublasLtCreate(&impl->lt), "cublasLtCreate"));
    FOLIO_ASSIGN_OR_RETURN(impl->workspace, DeviceBuffer::allocate(kWorkspaceBytes));
  }
  return std::unique_ptr<LogitsGemm>(new LogitsGemm(std::move(impl)));
}

// cuBLAS is column-major: the row-major y[m, n] is the column-major [n, m] = W · X^T, with the
// row-major weight [n, k] read as the transposed column-major [k, n] buffer.
Status LogitsGemm::matmul_nt_f32(DType dtype, const void* x, const void* w, float* y, int m, int n,
                                 int k, void* stream) {
  if (m < 0 || n < 0 || k < 0) return invalid_argument("matmul_nt_f32: negative dimension");
  if (m == 0 || n == 0) return Status();
  if (k == 0) return memset_async(y, 0, sizeof(float) * m * n, stream);  // an empty sum
  if (m <= impl_->skinny_max_m && skinny_gemm_supported(m, k, x, w, y))
    return skinny_gemm_f32(dtype, x, w, y, m, n, k, stream);
  const float alpha = 1.f, beta = 0.f;
  if (impl_->path == LogitsGemmPath::kGemmEx) {
    cublasHandle_t h = impl_->blas;
    FOLIO_RETURN_IF_ERROR(blas_status(cublasSetStream(h, as_stream(stream)), "cublasSetStream"));
    const cudaDataType_t t = dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
    return blas_status(
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, t, k, x, t, k, &beta, y,
                     CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
  }
  LtPlan* p = impl_->find(dtype, m, n, k);
  if (!p) {
    FOLIO_ASSIGN_OR_RETURN(p, impl_->create_plan(dtype, x, w, y, m, n, k, as_stream(stream)));
  }
  return lt_status(cublasLtMatmul(impl_->lt, p->desc, &alpha, w, p->a, x, p->b, &beta, y, p->c, y,
                                  p->c, &p->algo, impl_->workspace.data(), impl_->workspace.bytes(),
                                  as_stream(stream)),
                   "cublasLtMatmul (logits)");
}

Status LogitsGemm::prepare(DType dtype, const void* x, const void* w, float* y, int m, int n, int k,
                           void* stream) {
  if (m <= 0 || n <= 0 || k <= 0)
    return invalid_argument("LogitsGemm::prepare: dimensions must be positive, got " +
                            shape_name(dtype, m, n, k));
  if (!x || !w || !y) return invalid_argument("LogitsGemm::prepare: null operand");
  if (impl_->path == LogitsGemmPath::kGemmEx || impl_->find(dtype, m, n, k)) return Status();
  return impl_->create_plan(dtype, x, w, y, m, n, k, as_stream(stream)).status();
}

LogitsGemmPath LogitsGemm::path() const {
  return impl_->path;
}
size_t LogitsGemm::cached_plans() const {
  return impl_->plans.size();
}
size_t LogitsGemm::tuned_plans() const {
  size_t c = 0;
  for (const auto& [key, p] : impl_->plans) c += p->tuned;
  return c;
}

}  // namespace folio::cuda
