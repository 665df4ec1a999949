#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/rms_norm.h"

namespace folio::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

// One warp per row. Pass 1 (optionally adding x into the residual) sums squares; pass 2 rereads
// the row (each lane its own elements, so in place is safe) and writes y.
// Lane l sums elements l*N + j*32*N (+0..N-1) in order of j then element, then warp_sum: qkv_post
// (qkv_post.cu) reproduces exactly this order; change both together.
template <typename T, int N, bool kAdd>
__global__ void rms_norm_warp_kernel(const T* x, T* residual, const T* weight, T* y, int rows,
                                     int dim, float eps) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int64_t base = static_cast<int64_t>(row) * dim;
  const T* src = kAdd ? residual + base : x + base;
  float ss = 0.f;
  for (int i = lane * N; i < dim; i += 32 * N) {
    float v[N];
    load_floats<N>(src + i, v);
    if constexpr (kAdd) {
      float a[N];
      load_floats<N>(x + base + i, a);
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = to_float(from_float<T>(v[j] + a[j]));
      store_floats<N>(residual + base + i, v);
    }
#pragma unroll
    for (int j = 0; j < N; ++j) ss += v[j] * v[j];
  }
  const float inv = rsqrtf(warp_sum(ss) / dim + eps);
  for (int i = lane * N; i < dim; i += 32 * N) {
    float v[N], w[N];
    load_floats<N>(src + i, v);
    load_floats<N>(weight + i, w);
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = v[j] * inv * w[j];
    store_floats<N>(y + base + i, v);
  }
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the total.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  float t = lane < warps ? partial[lane] : 0.f;
  return warp_sum(t);  // every warp reduces the partials itself: no second barrier
}

// One block per row. Thread i owns packs i, i + blockDim, ... (K at most, kept in registers
// between the sum and the scale); K == 0: rows longer than that, reread in the second pass
// (each thread its own elements, so in place stays safe). rms_norm_smem.cuh reproduces the
// N = 8, K = 1 order (the skinny GEMV's fused norm): change both together.
template <typename T, int N, int K, bool kAdd>
__global__ void __launch_bounds__(1024)
    rms_norm_block_kernel(const T* x, T* residual, const T* weight, T* y, int dim, float eps) {
  pdl_wait();  // pdl.cuh: inputs come from the previous kernel
  pdl_launch_dependents();
  const int64_t base = static_cast<int64_t>(blockIdx.x) * dim;
  const T* src = kAdd ? residual + base : x + base;
  const int stride = blockDim.x * N;
  float ss = 0.f;
  if constexpr (K > 0) {
    // With one pack per thread (dim <= 8192) the weights too are loaded up front, so their
    // latency overlaps the row's; more packs would need too many registers for 1024 threads.
    constexpr bool kEarlyW = K == 1;
    float v[K][N], w[kEarlyW ? K : 1][N];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int i = threadIdx.x * N + k * stride;
      if (i < dim) {
        load_floats<N>(src + i, v[k]);
        if constexpr (kEarlyW) load_floats<N>(weight + i, w[k]);
        if constexpr (kAdd) {
          float a[N];
          load_floats<N>(x + base + i, a);
#pragma unroll
          for (int j = 0; j < N; ++j) v[k][j] = to_float(from_float<T>(v[k][j] + a[j]));
          store_floats<N>(residual + base + i, v[k]);
        }
#pragma unroll
        for (int j = 0; j < N; ++j) ss += v[k][j] * v[k][j];
      }
    }
    const float inv = rsqrtf(block_sum(ss) / dim + eps);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int i = threadIdx.x * N + k * stride;
      if (i < dim) {
        if constexpr (!kEarlyW) load_floats<N>(weight + i, w[0]);
        const float* wk = w[kEarlyW ? k : 0];
#pragma unroll
        for (int j = 0; j < N; ++j) v[k][j] = v[k][j] * inv * wk[j];
        store_floats<N>(y + base + i, v[k]);
      }
    }
  } else {
    for (int i = threadIdx.x * N; i < dim; i += stride) {
      float v[N];
      load_floats<N>(src + i, v);
      if constexpr (kAdd) {
        float a[N];
        load_floats<N>(x + base + i, a);
#pragma unroll
        for (int j = 0; j < N; ++j) v[j] = to_float(from_float<T>(v[j] + a[j]));
        store_floats<N>(residual + base + i, v);
      }
#pragma unroll
      for (int j = 0; j < N; ++j) ss += v[j] * v[j];
    }
    const float inv = rsqrtf(block_sum(ss) / dim + eps);
    for (int i = threadIdx.x * N; i < dim; i += stride) {
      float v[N], w[N];
      load_floats<N>(src + i, v);
      load_floats<N>(weight + i, w);
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = v[j] * inv * w[j];
      store_floats<N>(y + base + i, v);
    }
  }
}

constexpr int kMaxRegPacks = 4;

template <typename T, int N, bool kAdd>
void launch_block(const void* x, void* residual, const void* weight, void* y, int rows, int dim,
                  float eps, void* stream) {
  const int packs = (dim + N - 1) / N;
  const int threads = std::min(1024, (packs + 31) / 32 * 32);
  const int per_thread = (packs + threads - 1) / threads;
  auto go = [&](auto kernel) {
    (void)launch_pdl(kernel, dim3(rows), dim3(threads), 0, stream, "rms_norm_block_kernel",
                     static_cast<const T*>(x), static_cast<T*>(residual),
                     static_cast<const T*>(weight), static_cast<T*>(y), dim, eps);
  };
  if (per_thread == 1)
    go(rms_norm_block_kernel<T, N, 1, kAdd>);
  else if (per_thread <= kMaxRegPacks)
    go(rms_norm_block_kernel<T, N, kMaxRegPacks, kAdd>);
  else
    go(rms_norm_block_kernel<T, N, 0, kAdd>);
}

template <typename T, bool kAdd>
Status launch(RmsNormKernel kernel, const void* x, void* residual, const void* weight, void* y,
              int rows, int dim, float eps, void* stream) {
  const bool pack8 = pack8_ok(dim, {x, residual, weight, y});
  if (kernel == RmsNormKernel::kBlockPerRow) {
    if (pack8)
      launch_block<T, 8, kAdd>(x, residual, weight, y, rows, dim, eps, stream);
    else
      launch_block<T, 1, kAdd>(x, residual, weight, y, rows, dim, eps, stream);
    return launch_status("rms_norm_block_kernel");
  }
  const int blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const int threads = 32 * kWarpsPerBlock;
  auto go = [&](auto k) {
    k<<<blocks, threads, 0, as_stream(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(residual), static_cast<const T*>(weight),
        static_cast<T*>(y), rows, dim, eps);
  };
  if (pack8)
    go(rms_norm_warp_kernel<T, 8, kAdd>);
  else
    go(rms_norm_warp_kernel<T, 1, kAdd>);
  return launch_status("rms_norm_warp_kernel");
}

bool force_warp_kernel() {
  static const bool forced = [] {
    const char* e = std::getenv("FOLIO_RMS_NORM");
    return e != nullptr && std::strcmp(e, "warp") == 0;
  }();
  return forced;
}

RmsNormKernel resolve(RmsNormKernel k, int dim) {
  if (k != RmsNormKernel::kAuto) return k;
  if (force_warp_kernel()) return RmsNormKernel::kWarpPerRow;
  return dim > 512 ? RmsNormKernel::kBlockPerRow : RmsNormKernel::kWarpPerRow;
}

}  // namespace

bool rms_norm_is_block_pack8(int dim) {
  return resolve(RmsNormKernel::kAuto, dim) == RmsNormKernel::kBlockPerRow && dim % 8 == 0 &&
         dim / 8 <= 1024;
}

Status rms_norm_with(RmsNormKernel kernel, DType dtype, void* residual, const void* x,
                     const void* weight, void* y, int rows, int dim, float eps, void* stream) {
  if (rows < 0 || dim <= 0)
    return invalid_argument("rms_norm: bad shape rows=" + std::to_string(rows) +
                            " dim=" + std::to_string(dim));
  if (rows == 0) return Status();
  kernel = resolve(kernel, dim);
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    return residual ? launch<T, true>(kernel, x, residual, weight, y, rows, dim, eps, stream)
                    : launch<T, false>(kernel, x, nullptr, weight, y, rows, dim, eps, stream);
  });
}

Status rms_norm(DType dtype, const void* x, const void* weight, void* y, int rows, int dim,
                float eps, void* stream) {
  return rms_norm_with(RmsNormKernel::kAuto, dtype, nullptr, x, weight, y, rows, dim, eps, stream);
}

Status add_rms_norm(DType dtype, void* residual, const void* x, const void* weight, void* y,
                    int rows, int dim, float eps, void* stream) {
  return rms_norm_with(RmsNormKernel::kAuto, dtype, residual, x, weight, y, rows, dim, eps, stream);
}

}  // namespace folio::cuda
