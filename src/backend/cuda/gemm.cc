#include "backend/cuda/gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <map>
#include <tuple>

#include "backend/gemm_tune_cache.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/gemm_autotune.h"
#include "backend/cuda/gemm_sustained_tune.h"
#include "backend/cuda/gemm_wgmma.h"
#include "backend/cuda/skinny_gemm.h"
#include "base/log.h"

namespace folio::cuda {
namespace {

// At m <= the skinny cut, weight matrices up to this stay on cuBLASLt (gemm.h):
// FOLIO_SKINNY_MIN_MIB, default 0 (every matrix on the skinny kernel).
size_t skinny_min_weight_bytes() {
  static const size_t v = [] {
    const char* e = std::getenv("FOLIO_SKINNY_MIN_MIB");
    const long mib = e ? std::strtol(e, nullptr, 10) : 0;
    return static_cast<size_t>(mib >= 0 ? mib : 0) << 20;
  }();
  return v;
}

// Timing scratch: the tuned GEMM's output (m·n elements at most) at its start; all of it is
// rewritten before each timed run to evict the weights from L2 (50 MiB on H100/H200).
constexpr size_t kTuneScratchBytes = 64u << 20;

// The m range gemm_wgmma takes (gemm.h): FOLIO_GEMM_WGMMA=1 turns it on for
// [FOLIO_GEMM_WGMMA_MIN_M (65), FOLIO_GEMM_WGMMA_MAX_M (512)]; off by default.
struct WgmmaRange {
  int min_m = 0, max_m = -1;  // empty: off
};
WgmmaRange wgmma_range_from_env() {
  const char* on = std::getenv("FOLIO_GEMM_WGMMA");
  if (on == nullptr || std::string(on) != "1") return {};
  const auto int_env = [](const char* name, int fallback) {
    const char* e = std::getenv(name);
    return e != nullptr ? std::atoi(e) : fallback;
  };
  return {int_env("FOLIO_GEMM_WGMMA_MIN_M", 65), int_env("FOLIO_GEMM_WGMMA_MAX_M", 512)};
}

using Plan = LtPlan;
using Key = std::tuple<int, int, int, int, bool>;

std::string shape_name(DType dtype, int m, int n, int k, bool accumulate) {
  return std::string(dtype_name(dtype)) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
         " k=" + std::to_string(k) + (accumulate ? " (accumulate)" : "");
}

}  // namespace

struct Gemm::Impl {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  DeviceBuffer tune_scratch;  // empty when autotuning is off
  AutotuneOptions tune;
  std::map<Key, std::unique_ptr<Plan>> plans;
  std::map<Key, cublasLtMatmulAlgo_t> bucket_algos;  // key m = tune_bucket(m): see AutotuneOptions
  std::map<Key, cublasLtMatmulAlgo_t> large_algos;   // key m = 0: the sustained choice (gemm.h)
  std::optional<GemmTuneCache> tune_cache;           // FOLIO_GEMM_TUNE_CACHE, with large_m
  std::string device_name;                           // the cache's key, with cuBLASLt's version
  size_t sustained_timings = 0;
  // m up to this goes to skinny_gemm (FOLIO_SKINNY_GEMM_MAX_M; skinny_gemm.h has the figures).
  int skinny_max_m = 1;
  WgmmaRange wgmma;           // m that goes to gemm_wgmma
  DeviceBuffer wgmma_workspace;  // its flags and partial sums, when the range is not empty

  ~Impl() {
    plans.clear();
    if (handle) cublasLtDestroy(handle);
  }

  bool will_tune(DType dtype, int m, int n) const {
    return tune.enabled && m <= tune.max_m &&
           static_cast<size_t>(m) * n * dtype_size(dtype) <= tune_scratch.bytes();
  }

  // Creates the plan for a shape not in the cache. x and w may be null only when !will_tune.
  Result<Plan*> create_plan(DType dtype, const void* x, const void* w, int m, int n, int k,
                            bool accumulate, cudaStream_t stream) {
    const std::string name = shape_name(dtype, m, n, k, accumulate);
    FOLIO_RETURN_IF_ERROR(check_not_capturing(stream, "Gemm plan for " + name));
    auto p = std::make_unique<Plan>();
    const cudaDataType_t t = dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
    FOLIO_RETURN_IF_ERROR(p->describe_nt(t, t, m, n, k));
    bool large = false;
    if (tune.large_m > 0 && m >= tune.large_m) {
      FOLIO_ASSIGN_OR_RETURN(large, pick_large(*p, dtype, x, w, m, n, k, accumulate, stream, name));
    }
    if (large) return keep(std::move(p), dtype, m, n, k, accumulate);
    const bool timed = will_tune(dtype, m, n) && x && w;
    const TuneBuffers buf{
        w, x, tune_scratch.data(), workspace.data(), tune_scratch.data(), tune_scratch.bytes()};
    const Key bucket{static_cast<int>(dtype), tune_bucket(m), n, k, accumulate};
    const auto lent = bucket_algos.find(bucket);
    const cublasLtMatmulAlgo_t* reuse =
        tune.bucketed && lent != bucket_algos.end() ? &lent->second : nullptr;
    FOLIO_RETURN_IF_ERROR(pick_algo(*p, handle, workspace.bytes(), tune.max_candidates,
                                    timed ? &buf : nullptr, reuse, accumulate ? 1.f : 0.f, stream,
                                    name));
    if (p->tuned && !p->reused) bucket_algos.insert_or_assign(bucket, p->algo);
    return keep(std::move(p), dtype, m, n, k, accumulate);
  }

  Plan* keep(std::unique_ptr<Plan> p, DType dtype, int m, int n, int k, bool accumulate) {
    Plan* raw = p.get();
    plans.emplace(Key{static_cast<int>(dtype), m, n, k, accumulate}, std::move(p));
    return raw;
  }

  // m >= tune.large_m: the product's sustained choice, lent when cuBLASLt accepts it for this m,
  // else timed now on x, w and a transient output. False (the caller takes the heuristic's
  // first) without operands or room for the output; the next plan of the product tries again.
  Result<bool> pick_large(Plan& p, DType dtype, const void* x, const void* w, int m, int n, int k,
                          bool accumulate, cudaStream_t stream, const std::string& name) {
    const Key product{static_cast<int>(dtype), 0, n, k, accumulate};
    if (const auto lent = large_algos.find(product); lent != large_algos.end()) {
      if (!algo_fits(p, handle, lent->second, workspace.bytes())) return false;
      p.algo = lent->second;
      p.tuned = p.reused = true;
      return true;
    }
    const GemmTuneKey cache_key{device_name, static_cast<int64_t>(cublasLtGetVersion()),
                                dtype_name(dtype), n, k, accumulate};
    if (auto hit = tune_cache ? tune_cache->find(cache_key) : std::nullopt) {
      cublasLtMatmulAlgo_t algo{};
      static_assert(sizeof algo == sizeof hit->algo);
      std::memcpy(&algo, hit->algo.data(), sizeof algo);
      if (algo_fits(p, handle, algo, workspace.bytes())) {
        p.algo = algo;
        p.tuned = true;
        large_algos.insert_or_assign(product, algo);
        return true;
      }
      log_warn("Gemm: " + tune_cache->path() + "'s kernel for " + name +
               " is refused by this cuBLASLt; timing it again");
    }
    if (!x || !w) return false;
    auto y = DeviceBuffer::allocate(size_t{2} * m * n);
    if (!y.ok()) {
      log_warn("Gemm: no memory for the sustained timing of " + name +
               "; using cuBLASLt's first heuristic choice");
      return false;
    }
    FOLIO_RETURN_IF_ERROR(memset_async(y->data(), 0, y->bytes(), stream));
    const TuneBuffers buf{w, x, y->data(), workspace.data(), nullptr, 0};
    FOLIO_ASSIGN_OR_RETURN(const TuneResult timed,
                           pick_algo_sustained(p, handle, workspace.bytes(), buf,
                                               accumulate ? 1.f : 0.f, stream, name));
    FOLIO_RETURN_IF_ERROR(synchronize(stream));  // before y is freed
    ++sustained_timings;
    large_algos.insert_or_assign(product, p.algo);
    if (tune_cache) {
      GemmTuneEntry e;
      e.key = cache_key;
      std::memcpy(e.algo.data(), &p.algo, sizeof p.algo);
      e.config = algo_config(p.algo);
      if (!timed.median_us.empty()) {
        e.us = timed.median_us[static_cast<size_t>(timed.chosen)];
        e.first_us = timed.median_us[0];
      }
      // The plan stands either way; a cache that cannot be written only costs the next process
      // the timing again.
      if (Status st = tune_cache->put(e); !st.ok()) log_warn("Gemm: " + st.to_string());
    }
    return true;
  }
};

Gemm::Gemm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Gemm::~Gemm() = default;

Result<std::unique_ptr<Gemm>> Gemm::create(size_t workspace_bytes, GemmAutotune autotune,
                                           int skinny_max_m) {
  auto impl = std::make_unique<Impl>();
  FOLIO_ASSIGN_OR_RETURN(impl->tune, AutotuneOptions::from_env());
  if (autotune != GemmAutotune::kFromEnv) impl->tune.enabled = autotune == GemmAutotune::kOn;
  FOLIO_ASSIGN_OR_RETURN(impl->skinny_max_m, skinny_max_m_from_env());
  if (skinny_max_m >= 0) impl->skinny_max_m = std::min(skinny_max_m, kSkinnyMaxM);
  FOLIO_RETURN_IF_ERROR(lt_status(cublasLtCreate(&impl->handle), "cublasLtCreate"));
  FOLIO_ASSIGN_OR_RETURN(impl->workspace, DeviceBuffer::allocate(workspace_bytes));
  if (impl->tune.enabled) {
    FOLIO_ASSIGN_OR_RETURN(impl->tune_scratch, DeviceBuffer::allocate(kTuneScratchBytes));
  }
  if (impl->tune.large_m > 0 && !impl->tune.tune_cache.empty()) {
    FOLIO_ASSIGN_OR_RETURN(impl->tune_cache, GemmTuneCache::load(impl->tune.tune_cache));
    int device = 0;
    FOLIO_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    FOLIO_ASSIGN_OR_RETURN(const DeviceInfo info, device_info(device));
    impl->device_name = info.name;
  }
  impl->wgmma = wgmma_range_from_env();
  if (impl->wgmma.min_m <= impl->wgmma.max_m) {
    const size_t bytes = gemm_wgmma_workspace_bytes(gemm_wgmma_max_blocks());
    FOLIO_ASSIGN_OR_RETURN(impl->wgmma_workspace, DeviceBuffer::allocate(bytes));
    FOLIO_RETURN_IF_ERROR(
        cuda_status(cudaMemset(impl->wgmma_workspace.data(), 0, bytes), "gemm_wgmma flags"));
  }
  return std::unique_ptr<Gemm>(new Gemm(std::move(impl)));
}

bool Gemm::routes_to_skinny(int m, int n, int k, const void* x, const void* w,
                            const void* y) const {
  return m >= 1 && m <= impl_->skinny_max_m && skinny_gemm_supported(m, k, x, w, y) &&
         size_t{2} * n * k > skinny_min_weight_bytes();
}

Status Gemm::matmul_nt(DType dtype, const void* x, const void* w, void* y, int m, int n, int k,
                       bool accumulate, void* stream) {
  if (m < 0 || n < 0 || k < 0) return invalid_argument("matmul_nt: negative dimension");
  if (m == 0 || n == 0) return Status();
  if (k == 0)  // an empty sum: cuBLASLt rejects k = 0
    return accumulate ? Status() : memset_async(y, 0, size_t{2} * m * n, stream);
  if (routes_to_skinny(m, n, k, x, w, y))
    return skinny_gemm(dtype, x, w, y, m, n, k, accumulate, stream);
  if (m >= impl_->wgmma.min_m && m <= impl_->wgmma.max_m &&
      gemm_wgmma_fits(dtype, m, n, k, x, w, y))
    return gemm_wgmma(dtype, x, w, y, m, n, k, accumulate, impl_->wgmma_workspace.data(),
                      impl_->wgmma_workspace.bytes(), stream);
  Plan* p = nullptr;
  if (auto it = impl_->plans.find(Key{static_cast<int>(dtype), m, n, k, accumulate});
      it != impl_->plans.end()) {
    p = it->second.get();
  } else {
    FOLIO_ASSIGN_OR_RETURN(p,
                           impl_->create_plan(dtype, x, w, m, n, k, accumulate, as_stream(stream)));
  }
  const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  return lt_status(cublasLtMatmul(impl_->handle, p->desc, &alpha, w, p->a, x, p->b, &beta, y, p->c,
                                  y, p->c, &p->algo, impl_->workspace.data(),
                                  impl_->workspace.bytes(), as_stream(stream)),
                   "cublasLtMatmul");
}

Status Gemm::prepare(DType dtype, const void* x, const void* w, int m, int n, int k,
                     bool accumulate, void* stream) {
  if (m <= 0 || n <= 0 || k <= 0)
    return invalid_argument("Gemm::prepare: dimensions must be positive, got " +
                            shape_name(dtype, m, n, k, accumulate));
  if (has_plan(dtype, m, n, k, accumulate)) return Status();
  if (impl_->will_tune(dtype, m, n) && (!x || !w))
    return invalid_argument("Gemm::prepare: null operand");
  return impl_->create_plan(dtype, x, w, m, n, k, accumulate, as_stream(stream)).status();
}

Status Gemm::prepare(DType dtype, int m, int n, int k, bool accumulate, void* stream) {
  if (m <= 0 || n <= 0 || k <= 0)
    return invalid_argument("Gemm::prepare: dimensions must be positive, got " +
                            shape_name(dtype, m, n, k, accumulate));
  if (has_plan(dtype, m, n, k, accumulate)) return Status();
  if (!impl_->will_tune(dtype, m, n))
    return impl_->create_plan(dtype, nullptr, nullptr, m, n, k, accumulate, as_stream(stream))
        .status();
  FOLIO_RETURN_IF_ERROR(check_not_capturing(as_stream(stream), "Gemm::prepare"));
  const size_t e = dtype_size(dtype);
  auto x = DeviceBuffer::allocate(static_cast<size_t>(m) * k * e);
  auto w = x.ok() ? DeviceBuffer::allocate(static_cast<size_t>(n) * k * e) : x.status();
  if (!x.ok() || !w.ok()) {  // no room for the stand-ins: keep the heuristic's choice
    log_warn("Gemm::prepare: no memory for timing operands of " +
             shape_name(dtype, m, n, k, accumulate) + "; using cuBLASLt's first heuristic choice");
    return impl_->create_plan(dtype, nullptr, nullptr, m, n, k, accumulate, as_stream(stream))
        .status();
  }
  // 0x3C3C: a small finite value in bf16 (0.0115) and fp16 (1.06); the numbers do not matter.
  FOLIO_RETURN_IF_ERROR(memset_async(x->data(), 0x3C, x->bytes(), stream));
  FOLIO_RETURN_IF_ERROR(memset_async(w->data(), 0x3C, w->bytes(), stream));
  Status st =
      impl_->create_plan(dtype, x->data(), w->data(), m, n, k, accumulate, as_stream(stream))
          .status();
  FOLIO_RETURN_IF_ERROR(synchronize(stream));  // before the stand-ins are freed
  return st;
}

size_t Gemm::sustained_timings() const {
  return impl_->sustained_timings;
}

size_t Gemm::cached_plans() const {
  return impl_->plans.size();
}

bool Gemm::has_plan(DType dtype, int m, int n, int k, bool accumulate) const {
  return impl_->plans.count(Key{static_cast<int>(dtype), m, n, k, accumulate}) > 0;
}

bool Gemm::autotune_enabled() const {
  return impl_->tune.enabled;
}

size_t Gemm::tuned_plans() const {
  size_t c = 0;
  for (const auto& [key, p] : impl_->plans) c += p->tuned;
  return c;
}

size_t Gemm::retuned_plans() const {
  size_t c = 0;
  for (const auto& [key, p] : impl_->plans) c += p->tuned && p->chosen != 0;
  return c;
}

}  // namespace folio::cuda
