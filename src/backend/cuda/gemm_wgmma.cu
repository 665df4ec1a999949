// Host side of the Hopper GEMM (gemm_wgmma.h); the device side is gemm_wgmma_kernel.cuh.
#include "backend/cuda/gemm_wgmma.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gemm_wgmma_kernel.cuh"
#include "backend/cuda/smem_opt_in.h"
#include "backend/cuda/tensor_map.h"

namespace folio::cuda {
namespace {

using namespace gemm_wgmma_detail;

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_wgmma_kernel(const Args a, const __grid_constant__ Maps maps) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // wgmma and TMA need sm_90a; the build targets it (CMAKE_CUDA_ARCHITECTURES 90a)
#else
  extern __shared__ __align__(128) unsigned char smem_raw[];
  gemm_wgmma_body<T>(a, maps, smem_raw);
#endif
}

// The flags' bytes, rounded up to 256 so that the partial sums after them stay aligned.
constexpr size_t flag_bytes(int blocks) { return (static_cast<size_t>(blocks) * 4 + 255) / 256 * 256; }

int device_sms() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 0;
  return sms;
}

bool device_is_sm90() {
  static const bool v = [] {
    int device = 0, major = 0, minor = 0;
    return cudaGetDevice(&device) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) ==
               cudaSuccess &&
           cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) ==
               cudaSuccess &&
           major == 9 && minor == 0;
  }();
  return v;
}

}  // namespace

bool gemm_wgmma_fits(DType dtype, int m, int n, int k, const void* x, const void* w,
                     const void* y) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return (dtype == DType::kBF16 || dtype == DType::kFP16) && m >= 1 && n > 0 && n % BN == 0 &&
         k > 0 && k % BK == 0 && aligned(x) && aligned(w) && aligned(y) && device_is_sm90();
}

size_t gemm_wgmma_workspace_bytes(int blocks) {
  return flag_bytes(blocks) + static_cast<size_t>(blocks) * kPartialFloats * sizeof(float);
}

int gemm_wgmma_max_blocks() {
  static const int v = [] {
    const char* e = std::getenv("FOLIO_GEMM_WGMMA_BLOCKS");
    const int want = e != nullptr ? std::atoi(e) : 0;
    return want > 0 ? want : device_sms();
  }();
  return v;
}

Status gemm_wgmma(DType dtype, const void* x, const void* w, void* y, int m, int n, int k,
                  bool accumulate, void* workspace, size_t workspace_bytes, void* stream) {
  if (!gemm_wgmma_fits(dtype, m, n, k, x, w, y))
    return invalid_argument("gemm_wgmma: unsupported product (m " + std::to_string(m) + ", n " +
                            std::to_string(n) + ", k " + std::to_string(k) + ")");
  Args a{};
  a.y = y;
  a.m = m;
  a.n = n;
  a.k = k;
  a.accumulate = accumulate ? 1 : 0;
  a.m_tiles = (m + BM - 1) / BM;
  a.k_iters = k / BK;
  a.total_iters = static_cast<int64_t>(a.m_tiles) * (n / BN) * a.k_iters;
  a.x_box_rows = a.m_tiles == 1 ? (m + 63) / 64 * 64 : BM;
  const int blocks =
      static_cast<int>(std::min<int64_t>(gemm_wgmma_max_blocks(), a.total_iters));
  if (blocks <= 0 || workspace == nullptr ||
      workspace_bytes < gemm_wgmma_workspace_bytes(blocks))
    return invalid_argument("gemm_wgmma: workspace too small");
  a.flags = static_cast<int*>(workspace);
  a.partials = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) +
                                        flag_bytes(blocks));
  Maps maps;
  // Rows maps (64 columns x box rows) of x [m, k] and w [n, k], remembered per operand: weights
  // and the executor's activation buffers stay put, so a step encodes nothing after the first.
  FOLIO_RETURN_IF_ERROR(cached_rows_map(&maps.x, dtype, x, m, 1, k, 1, a.x_box_rows));
  FOLIO_RETURN_IF_ERROR(cached_rows_map(&maps.w, dtype, w, n, 1, k, 1, BN));
  const auto run = [&]<typename T>() -> Status {
    FOLIO_RETURN_IF_ERROR(
        opt_in_dynamic_smem(reinterpret_cast<const void*>(gemm_wgmma_kernel<T>), kSmemBytes));
    gemm_wgmma_kernel<T><<<blocks, kThreads, kSmemBytes, as_stream(stream)>>>(a, maps);
    return launch_status("gemm_wgmma_kernel");
  };
  return dtype == DType::kBF16 ? run.template operator()<__nv_bfloat16>()
                               : run.template operator()<__half>();
}

}  // namespace folio::cuda
