#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/skinny_gemm.h"
#include "backend/cuda/pdl.cuh"

namespace folio::cuda {
namespace {

constexpr int kWarps = 8;  // warps per block, each on its own R rows of w

// 16 bytes of weights, read once: no L1 allocation, which stays with x.
__device__ __forceinline__ uint4 load_weights(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <typename T>
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = to_float(e[i]);
}

// y[M, n] (+)= x[M, k] · w[n, k]^T. Grid: ceil(n / (kWarps R)) blocks; warp w of block b owns rows
// j = (b kWarps + w) R .. + R - 1 of w, over all of k. Lane l reads 16-byte packs l, l + 32, ...
// of each of its rows (each warp load: 512 contiguous bytes of one row) and the same packs of x
// (through L1: every warp of the SM reads the same x). U packs per row are in flight while the
// previous U are consumed (register double buffering). The first U are issued before pdl_wait:
// under programmatic dependent launch (pdl.cuh) the weight stream starts while the kernel that
// writes x is still running. fp32 FMAs, a warp reduction per (row, x row), one rounding to OutT
// (y's old value added first when accumulate).
// kGated (the SwiGLU MLP's gate_up, w = [gate; up], each [n, k]): a warp's R rows are R / 2 gate
// rows and the same R / 2 up rows, and it stores y[m, j] = silu(g) * u for its R / 2 outputs,
// with g and u rounded to T first: bit for bit what gate_up then silu_and_mul.cu computes (the
// same per-row summation order and rounding points), without the [m, 2n] intermediate and the
// activation launch.
template <typename T, typename OutT, int M, int R, int U, bool kGated = false>
__global__ void __launch_bounds__(32 * kWarps)
    skinny_kernel(const T* __restrict__ x, const T* __restrict__ w, OutT* __restrict__ y, int n,
                  int k, bool accumulate) {
  static_assert(!kGated || (R % 2 == 0 && sizeof(OutT) == sizeof(T)), "gated: R even, dtype out");
  constexpr int kOutRows = kGated ? R / 2 : R;  // outputs per warp
  const int lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * kWarps + threadIdx.x / 32) * kOutRows;
  const int packs = k / 8;
  if (row0 >= n) {  // warp-uniform
    pdl_wait();
    pdl_launch_dependents();
    return;
  }
  const uint4* wr[R];  // rows past n read row n - 1; their outputs are never stored
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int out_row = min(row0 + r % kOutRows, n - 1);
    const int w_row = kGated && r >= kOutRows ? n + out_row : out_row;  // up rows follow gate's
    wr[r] = reinterpret_cast<const uint4*>(w + static_cast<int64_t>(w_row) * k);
  }
  auto load = [&](uint4 (&v)[U][R], int p) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r)
        v[u][r] = p + 32 * u < packs ? load_weights(wr[r] + p + 32 * u) : make_uint4(0, 0, 0, 0);
  };
  uint4 cur[U][R];
  load(cur, lane);
  pdl_wait();                // x (and y, when accumulating) come from earlier kernels
  pdl_launch_dependents();  // the next kernel may be scheduled as our blocks retire

  const uint4* xp[M];
#pragma unroll
  for (int m = 0; m < M; ++m) xp[m] = reinterpret_cast<const uint4*>(x + static_cast<int64_t>(m) * k);
  float acc[R][M] = {};
  for (int p = lane; p < packs; p += 32 * U) {
    uint4 nxt[U][R];
    load(nxt, p + 32 * U);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int q = p + 32 * u;
      if (q >= packs) break;
      float xf[M][8];
#pragma unroll
      for (int m = 0; m < M; ++m) unpack8<T>(__ldg(xp[m] + q), xf[m]);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float wf[8];
        unpack8<T>(cur[u][r], wf);
#pragma unroll
        for (int m = 0; m < M; ++m)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r][m] = fmaf(wf[e], xf[m][e], acc[r][m]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) cur[u][r] = nxt[u][r];
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = warp_sum(acc[r][m]);
  if constexpr (kGated) {  // lane r * M + m stores (row0 + r, m)
#pragma unroll
    for (int r = 0; r < kOutRows; ++r)
#pragma unroll
      for (int m = 0; m < M; ++m)
        if (lane == r * M + m && row0 + r < n) {
          const float g = to_float(from_float<T>(acc[r][m]));
          const float u = to_float(from_float<T>(acc[r + kOutRows][m]));
          y[static_cast<int64_t>(m) * n + row0 + r] = from_float<T>(g / (1.f + __expf(-g)) * u);
        }
  } else {  // lane r * M + m stores (row0 + r, m)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < M; ++m)
        if (lane == r * M + m && row0 + r < n) {
          OutT* out = y + static_cast<int64_t>(m) * n + row0 + r;
          float v = acc[r][m];
          if constexpr (sizeof(OutT) == sizeof(float)) {
            *out = v;
          } else {
            if (accumulate) v += to_float(*out);
            *out = from_float<OutT>(v);
          }
        }
  }
}

// FOLIO_SKINNY_VARIANT (r4u2, r2u4, r1u4, r1u8) replaces kDefault everywhere: for timing the
// variants in place (B3), where the figures differ from the isolated benchmark's.
SkinnyVariant variant_from_env() {
  static const SkinnyVariant v = [] {
    const char* e = std::getenv("FOLIO_SKINNY_VARIANT");
    const std::string s = e ? e : "";
    if (s == "r4u2") return SkinnyVariant::kRows4Unroll2;
    if (s == "r2u4") return SkinnyVariant::kRows2Unroll4;
    if (s == "r1u4") return SkinnyVariant::kRows1Unroll4;
    if (s == "r1u8") return SkinnyVariant::kRows1Unroll8;
    return SkinnyVariant::kDefault;
  }();
  return v;
}

template <typename T, typename OutT, int M, int R, int U>
Status launch(const SkinnyProblem& pr, void* stream) {
  const int blocks = (pr.n + kWarps * R - 1) / (kWarps * R);
  return launch_pdl(skinny_kernel<T, OutT, M, R, U>, dim3(blocks), dim3(32 * kWarps), 0, stream,
                    "skinny_kernel", static_cast<const T*>(pr.x), static_cast<const T*>(pr.w),
                    static_cast<OutT*>(pr.y), pr.n, pr.k, pr.accumulate);
}

// kDefault: 4 rows per warp for dtype outputs, 2 for fp32 (the lm_head): the fastest on the H100
// for the Llama-3-8B shapes (NOTES.md).
template <typename T, typename OutT, int M>
Status dispatch_variant(const SkinnyProblem& pr, SkinnyVariant v, void* stream) {
  if (v == SkinnyVariant::kDefault) v = variant_from_env();
  if (v == SkinnyVariant::kDefault)
    v = sizeof(OutT) == sizeof(float) ? SkinnyVariant::kRows2Unroll4 : SkinnyVariant::kRows4Unroll2;
  switch (v) {
    case SkinnyVariant::kRows1Unroll4: return launch<T, OutT, M, 1, 4>(pr, stream);
    case SkinnyVariant::kRows1Unroll8: return launch<T, OutT, M, 1, 8>(pr, stream);
    case SkinnyVariant::kRows4Unroll2: return launch<T, OutT, M, 4, 2>(pr, stream);
    default: return launch<T, OutT, M, 2, 4>(pr, stream);
  }
}

template <typename T, typename OutT>
Status dispatch_m(const SkinnyProblem& pr, SkinnyVariant v, void* stream) {
  switch (pr.m) {
    case 1: return dispatch_variant<T, OutT, 1>(pr, v, stream);
    case 2: return dispatch_variant<T, OutT, 2>(pr, v, stream);
    case 3: return dispatch_variant<T, OutT, 3>(pr, v, stream);
    default: return dispatch_variant<T, OutT, 4>(pr, v, stream);
  }
}

template <typename T, int M>
Status launch_gated(const void* x, const void* w, void* y, int n, int k, void* stream) {
  constexpr int kR = 4, kOutRows = kR / 2;  // r4u2's loads: 2 gate + 2 up rows per warp
  const int blocks = (n + kWarps * kOutRows - 1) / (kWarps * kOutRows);
  return launch_pdl(skinny_kernel<T, T, M, kR, 2, true>, dim3(blocks), dim3(32 * kWarps), 0,
                    stream, "skinny_gated_kernel", static_cast<const T*>(x),
                    static_cast<const T*>(w), static_cast<T*>(y), n, k, false);
}

}  // namespace

Result<int> skinny_max_m_from_env() {
  const char* e = std::getenv("FOLIO_SKINNY_GEMM_MAX_M");
  if (!e) return 1;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  if (end == e || *end != '\0' || v < 0 || v > kSkinnyMaxM)
    return invalid_argument("FOLIO_SKINNY_GEMM_MAX_M=" + std::string(e) + " (expected 0.." +
                            std::to_string(kSkinnyMaxM) + ")");
  return static_cast<int>(v);
}

bool skinny_gemm_supported(int m, int k, const void* x, const void* w, const void* y) {
  auto aligned = [](const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; };
  return m >= 1 && m <= kSkinnyMaxM && k > 0 && k % 8 == 0 && aligned(x, 16) && aligned(w, 16) &&
         aligned(y, 4);
}

Status skinny_gemm(DType dtype, const SkinnyProblem& pr, void* stream, SkinnyVariant variant) {
  if (!skinny_gemm_supported(pr.m, pr.k, pr.x, pr.w, pr.y))
    return invalid_argument("skinny_gemm: m must be in [1, " + std::to_string(kSkinnyMaxM) +
                            "], k a multiple of 8, operands aligned");
  if (pr.n <= 0) return Status();
  if (pr.f32_out && pr.accumulate)
    return invalid_argument("skinny_gemm: fp32 output does not accumulate");
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    if (pr.f32_out) return dispatch_m<T, float>(pr, variant, stream);
    return dispatch_m<T, T>(pr, variant, stream);
  });
}

Status skinny_gemm(DType dtype, const void* x, const void* w, void* y, int m, int n, int k,
                   bool accumulate, void* stream, SkinnyVariant variant) {
  return skinny_gemm(dtype, SkinnyProblem{x, w, y, m, n, k, accumulate}, stream, variant);
}

Status skinny_gemm_f32(DType dtype, const void* x, const void* w, float* y, int m, int n, int k,
                       void* stream) {
  SkinnyProblem pr{x, w, y, m, n, k, false};
  pr.f32_out = true;
  return skinny_gemm(dtype, pr, stream);
}

Status skinny_gemm_silu(DType dtype, const void* x, const void* w_gate_up, void* act, int m,
                        int inter, int k, void* stream) {
  if (!skinny_gemm_supported(m, k, x, w_gate_up, act))
    return invalid_argument("skinny_gemm_silu: m must be in [1, " + std::to_string(kSkinnyMaxM) +
                            "], k a multiple of 8, operands aligned");
  if (inter <= 0) return Status();
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    switch (m) {
      case 1: return launch_gated<T, 1>(x, w_gate_up, act, inter, k, stream);
      case 2: return launch_gated<T, 2>(x, w_gate_up, act, inter, k, stream);
      case 3: return launch_gated<T, 3>(x, w_gate_up, act, inter, k, stream);
      default: return launch_gated<T, 4>(x, w_gate_up, act, inter, k, stream);
    }
  });
}

}  // namespace folio::cuda
