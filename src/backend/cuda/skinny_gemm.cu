#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/skinny_gemm.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/rms_norm_smem.cuh"
#include "backend/cuda/skinny_flow.cuh"
#include "backend/cuda/skinny_tiles.h"

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
// kNorm: x is the un-normalised input and every block first writes rms_norm(x, norm_w, eps) for
// its M rows into shared memory (rms_norm_smem.cuh: bit-identical to rms_norm), which the
// product then reads instead of x: the norm's launch and round trip leave the decode step.
// kFlow (SkinnyFlow, skinny_gemm.h; `flow` its counters): kProduce (gated) counts each warp's
// stored outputs per segment of y; kConsume (plain, M 1) takes no pdl_wait but waits for each
// segment of x when its warp's loop first reaches it.
constexpr int kNoFlow = 0, kProduce = 1, kConsume = 2;
constexpr int kProducerOutsPerWarp = 2;  // launch_gated's warps: 4 rows = 2 gate + 2 up
template <typename T, typename OutT, int M, int R, int U, bool kGated = false, bool kNorm = false,
          int kFlow = kNoFlow>
__global__ void __launch_bounds__(32 * kWarps)
    skinny_kernel(const T* __restrict__ x, const T* __restrict__ w, OutT* __restrict__ y, int n,
                  int k, bool accumulate, const T* __restrict__ norm_w, float eps,
                  unsigned long long* flow) {
  static_assert(!kGated || (R % 2 == 0 && sizeof(OutT) == sizeof(T)), "gated: R even, dtype out");
  static_assert(kFlow != kProduce || (kGated && R / 2 == kProducerOutsPerWarp), "producer: gated");
  static_assert(kFlow != kConsume || (!kGated && !kNorm && M == 1), "consumer: plain, m 1");
  constexpr int kOutRows = kGated ? R / 2 : R;  // outputs per warp
  constexpr int kSeg = kSkinnyFlowSegment;
  [[maybe_unused]] unsigned long long flow_round = 0;  // kConsume: this launch's number, from 1
  if constexpr (kFlow == kConsume) {
    __shared__ unsigned long long round_shared;
    if (threadIdx.x == 0)  // launches run one after the other: their atomics never interleave
      round_shared = atomicAdd(flow + (k + kSeg - 1) / kSeg, 1ull) / gridDim.x + 1;
    __syncthreads();
    flow_round = round_shared;
  }
  extern __shared__ uint4 xs_smem[];  // kNorm: the normalised x [M, k]
  const int lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * kWarps + threadIdx.x / 32) * kOutRows;
  const int packs = k / 8;
  const bool live = row0 < n;  // warp-uniform
  if (!kNorm && !live) {  // a kNorm block's warps all join its norm's barriers first
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
  if (live) load(cur, lane);
  // x (and y, when accumulating) come from earlier kernels. A consumer waits per segment below:
  // its producer's predecessors completed before the producer's blocks passed their own wait,
  // which they all did before this grid was launched; y is written only after every segment.
  if constexpr (kFlow != kConsume) pdl_wait();
  pdl_launch_dependents();  // the next kernel may be scheduled as our blocks retire
  [[maybe_unused]] int flow_ready = 0;  // kConsume: segments of x known complete
  if constexpr (kNorm) {
    rms_norm_rows_to_smem<T, M>(x, norm_w, reinterpret_cast<T*>(xs_smem), k, eps);
    if (!live) return;
  }

  const uint4* xp[M];
#pragma unroll
  for (int m = 0; m < M; ++m)
    xp[m] = kNorm ? xs_smem + m * packs
                  : reinterpret_cast<const uint4*>(x + static_cast<int64_t>(m) * k);
  float acc[R][M] = {};
  // A consumer's lanes all run the warp's iterations: flow_wait's ballots need the whole warp, and
  // where packs is not a multiple of 32 U a lane past the end would otherwise leave the loop
  // early (at k 128, lanes 16-31 never entered it and the warp hung). Such a lane loads zeros and
  // reads no x (the u loop below breaks at once).
  const int p_end = kFlow == kConsume ? lane + (packs + 32 * U - 1) / (32 * U) * (32 * U) : packs;
  for (int p = lane; p < p_end; p += 32 * U) {
    uint4 nxt[U][R];
    load(nxt, p + 32 * U);
    if constexpr (kFlow == kConsume) {  // this step's packs [p - lane, + 32 U) of x: warp-uniform
      const int last = (8 * min(p - lane + 32 * U, packs) - 1) / kSeg;
      if (flow_ready <= last) {
        auto warps_in = [&](int j) {  // the producer's warps storing outputs of segment j
          const int outs = min(kSeg, k - j * kSeg);
          return static_cast<unsigned long long>((outs + kProducerOutsPerWarp - 1) /
                                                 kProducerOutsPerWarp);
        };
        flow_wait(flow, (k + kSeg - 1) / kSeg, last, flow_round, warps_in, flow_ready);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int q = p + 32 * u;
      if (q >= packs) break;
      float xf[M][8];
#pragma unroll
      for (int m = 0; m < M; ++m)
        unpack8<T>(kNorm                  ? xp[m][q]
                   : kFlow == kConsume    ? __ldca(xp[m] + q)  // coherent: after flow_wait
                                          : __ldg(xp[m] + q),
                   xf[m]);
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
    if constexpr (kFlow == kProduce) flow_signal(flow + row0 / kSeg, lane);  // all lanes
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

// Shared memory of a launch: the normalised x of kNorm kernels.
template <typename T, int M, bool kNorm>
size_t norm_smem_bytes(int k) {
  return kNorm ? sizeof(T) * M * static_cast<size_t>(k) : 0;
}

template <typename T, typename OutT, int M, int R, int U, bool kNorm, int kFlow = kNoFlow>
Status launch(const SkinnyProblem& pr, void* stream, unsigned long long* flow = nullptr) {
  const int blocks = (pr.n + kWarps * R - 1) / (kWarps * R);
  return launch_pdl(skinny_kernel<T, OutT, M, R, U, false, kNorm, kFlow>, dim3(blocks),
                    dim3(32 * kWarps), norm_smem_bytes<T, M, kNorm>(pr.k), stream,
                    "skinny_kernel", static_cast<const T*>(pr.x), static_cast<const T*>(pr.w),
                    static_cast<OutT*>(pr.y), pr.n, pr.k, pr.accumulate,
                    static_cast<const T*>(pr.norm_weight), pr.norm_eps, flow);
}

// kDefault: 4 rows per warp for dtype outputs (skinny_tiles.h's tile for products of at most
// kSkinnySmallRows rows),
// 2 for fp32 (the lm_head): the fastest on the H100 for the Llama-3-8B shapes (NOTES.md). A fused
// norm always takes 4 (2 for fp32).
template <typename T, typename OutT, int M>
Status dispatch_variant(const SkinnyProblem& pr, SkinnyVariant v, void* stream) {
  constexpr bool kF32 = sizeof(OutT) == sizeof(float);
  if (pr.norm_weight)
    return kF32 ? launch<T, OutT, M, 2, 4, true>(pr, stream)
                : launch<T, OutT, M, 4, 2, true>(pr, stream);
  if (v == SkinnyVariant::kDefault) v = skinny_variant_from_env();
  if (v == SkinnyVariant::kDefault && !kF32 && pr.n <= kSkinnySmallRows) v = skinny_small_tile();
  if (v == SkinnyVariant::kDefault)
    v = kF32 ? SkinnyVariant::kRows2Unroll4 : SkinnyVariant::kRows4Unroll2;
  switch (v) {
    case SkinnyVariant::kRows1Unroll4: return launch<T, OutT, M, 1, 4, false>(pr, stream);
    case SkinnyVariant::kRows1Unroll8: return launch<T, OutT, M, 1, 8, false>(pr, stream);
    case SkinnyVariant::kRows4Unroll2: return launch<T, OutT, M, 4, 2, false>(pr, stream);
    case SkinnyVariant::kRows4Unroll4: return launch<T, OutT, M, 4, 4, false>(pr, stream);
    default: return launch<T, OutT, M, 2, 4, false>(pr, stream);
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

template <typename T, int M, bool kNorm, int kFlow = kNoFlow>
Status launch_gated(const SkinnyProblem& pr, void* stream, unsigned long long* flow = nullptr) {
  constexpr int kR = 4, kOutRows = kR / 2;  // r4u2's loads: 2 gate + 2 up rows per warp
  static_assert(kOutRows == kProducerOutsPerWarp);
  const int blocks = (pr.n + kWarps * kOutRows - 1) / (kWarps * kOutRows);
  return launch_pdl(skinny_kernel<T, T, M, kR, 2, true, kNorm, kFlow>, dim3(blocks),
                    dim3(32 * kWarps), norm_smem_bytes<T, M, kNorm>(pr.k), stream,
                    "skinny_gated_kernel", static_cast<const T*>(pr.x),
                    static_cast<const T*>(pr.w), static_cast<T*>(pr.y), pr.n, pr.k, false,
                    static_cast<const T*>(pr.norm_weight), pr.norm_eps, flow);
}

template <typename T, int M, int kFlow = kNoFlow>
Status dispatch_gated(const SkinnyProblem& pr, void* stream, unsigned long long* flow = nullptr) {
  return pr.norm_weight ? launch_gated<T, M, true, kFlow>(pr, stream, flow)
                        : launch_gated<T, M, false, kFlow>(pr, stream, flow);
}

// The fused norm's limits (rms_norm_smem.cuh), checked before any launch.
Status check_norm(const SkinnyProblem& pr, DType dtype, const char* what) {
  if (!pr.norm_weight) return Status();
  if (!skinny_norm_supported(dtype, pr.m, pr.k, pr.norm_weight))
    return invalid_argument(std::string(what) +
                            ": a fused norm needs k % 8 == 0, k <= 8192, m * k * element "
                            "size <= 47 KiB and a 16-byte aligned norm weight");
  return Status();
}

// skinny_gemm_silu's limits (both overloads), checked before any launch.
Status check_silu(DType dtype, const SkinnyProblem& pr) {
  if (!skinny_gemm_supported(pr.m, pr.k, pr.x, pr.w, pr.y))
    return invalid_argument("skinny_gemm_silu: m must be in [1, " + std::to_string(kSkinnyMaxM) +
                            "], k a multiple of 8, operands aligned");
  if (pr.accumulate || pr.f32_out)
    return invalid_argument("skinny_gemm_silu: dtype output, no accumulate");
  return check_norm(pr, dtype, "skinny_gemm_silu");
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

bool skinny_norm_supported(DType dtype, int m, int k, const void* norm_weight) {
  return m >= 1 && m <= kSmemNormMaxRows && k % 8 == 0 &&
         k <= kSmemNormMaxDim && dtype_size(dtype) * m * k <= kSkinnyNormMaxSmem &&
         reinterpret_cast<uintptr_t>(norm_weight) % 16 == 0;
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
  FOLIO_RETURN_IF_ERROR(check_norm(pr, dtype, "skinny_gemm"));
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

Status skinny_gemm_silu(DType dtype, const SkinnyProblem& pr, void* stream) {
  FOLIO_RETURN_IF_ERROR(check_silu(dtype, pr));
  if (pr.n <= 0) return Status();
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    switch (pr.m) {
      case 1: return dispatch_gated<T, 1>(pr, stream);
      case 2: return dispatch_gated<T, 2>(pr, stream);
      case 3: return dispatch_gated<T, 3>(pr, stream);
      default: return dispatch_gated<T, 4>(pr, stream);
    }
  });
}

Status skinny_gemm_silu(DType dtype, const SkinnyProblem& pr, const SkinnyFlow& flow,
                        void* stream) {
  if (!flow.produce || flow.counters == nullptr || pr.m != 1)
    return invalid_argument("skinny_gemm_silu: a flow's producer needs counters and m 1");
  FOLIO_RETURN_IF_ERROR(check_silu(dtype, pr));
  if (pr.n <= 0) return Status();
  return FOLIO_DISPATCH_DTYPE(
      dtype, T, [&] { return dispatch_gated<T, 1, kProduce>(pr, stream, flow.counters); });
}

Status skinny_gemm_flow(DType dtype, const SkinnyProblem& pr, const SkinnyFlow& flow,
                        void* stream) {
  if (flow.produce || flow.counters == nullptr || pr.m != 1 || pr.f32_out || pr.norm_weight)
    return invalid_argument("skinny_gemm_flow: a flow's consumer needs counters, m 1, dtype "
                            "output and no fused norm");
  if (!skinny_gemm_supported(pr.m, pr.k, pr.x, pr.w, pr.y))
    return invalid_argument("skinny_gemm_flow: k a multiple of 8, operands aligned");
  if (pr.n <= 0) return invalid_argument("skinny_gemm_flow: the consumer must launch (n > 0)");
  // r2u4, skinny_gemm's tile for the small products on the H100, where the flow was measured.
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    return launch<T, T, 1, 2, 4, false, kConsume>(pr, stream, flow.counters);
  });
}

Status skinny_flow_init(unsigned long long* counters, int elems, void* stream) {
  if (counters == nullptr || elems <= 0)
    return invalid_argument("skinny_flow_init: counters and a positive x length");
  return cuda_status(cudaMemsetAsync(counters, 0, 8 * skinny_flow_words(elems),
                                     static_cast<cudaStream_t>(stream)),
                     "skinny_flow_init");
}

Status skinny_gemm_silu(DType dtype, const void* x, const void* w_gate_up, void* act, int m,
                        int inter, int k, void* stream) {
  return skinny_gemm_silu(dtype, SkinnyProblem{x, w_gate_up, act, m, inter, k}, stream);
}

}  // namespace folio::cuda
