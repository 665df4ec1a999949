// Skinny GEMM for decode: y[m, n] (+)= x[m, k] · w[n, k]^T with m <= kSkinnyMaxM, bf16/fp16 in,
// fp32 accumulation, one rounding to the dtype (with accumulate, y's old value is added in fp32
// before it, as cuBLAS does with beta = 1), or fp32 output for the lm_head. At small m the
// product is a stream over the weights, which cuBLASLt's small-m kernels read at only
// 2.2-2.8 TB/s on the H100 (copy: 3.0). Here each warp owns whole rows of w and reads them as
// 512-byte runs with several loads in flight per lane (double-buffered in registers), x through
// L1, fp32 FMAs. It is launched with programmatic dependent launch (pdl.cuh): the first weight
// loads are issued before the wait for the kernel that writes x.
//
// Measured on the H100 (SkinnyGemm.Bench*, L2 evicted by reads), see NOTES.md: at m 1 it streams
// 2.2-3.1 TB/s against cuBLASLt's 2.25-2.8 (faster on every Llama-3-8B shape but o_proj); from
// m 2 the FMAs and x loads make it slower than cuBLASLt, so Gemm sends it m 1 only by default.
// Tried and dropped (H100, B3 = Llama-3-8B batch-1 decode step):
//   - a tensor-core version (w as the mma A operand, 64-byte row pieces per load, k split over
//     warps): cuBLASLt's speed at best, B3 7.01 ms;
//   - x staged in shared memory with silu(gate) * up computed while staging: B3 +0.04 ms;
//   - RMSNorm and silu(gate) * up computed on the fly from x as it is loaded (no separate norm and
//     activation launches, 3 fewer per layer): every warp recomputes the row's norm and the
//     activations, B3 6.73 ms against 6.17 with the separate kernels.
//   - (session 9) the per-block fused norm (norm_weight below) on gate_up as well as qkv: gate_up's
//     896 blocks each pay the norm's prologue, B3 5.85 ms against 5.79 with qkv's alone (which
//     beats the separate launch: 5.82), so the executor fuses qkv's norm only by default.
#pragma once

#include <cstddef>

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

inline constexpr int kSkinnyMaxM = 4;

// m up to which Gemm and LogitsGemm send products here: FOLIO_SKINNY_GEMM_MAX_M (0..kSkinnyMaxM;
// 0 = cuBLAS always) when set, else 1. An error for a malformed value.
Result<int> skinny_max_m_from_env();

// Warp tile shapes, for benchmarks: rows of w per warp and 16-byte loads in flight per row.
enum class SkinnyVariant {
  kDefault,
  kRows1Unroll4,
  kRows1Unroll8,
  kRows4Unroll2,
  kRows2Unroll4,
  kRows4Unroll4,
};


struct SkinnyProblem {
  const void* x;  // [m, k]
  const void* w;  // [n, k]
  void* y;        // [m, n], dtype or fp32
  int m, n, k;
  bool accumulate = false;
  bool f32_out = false;  // fp32 y (no accumulate)
  // Set: x is the un-normalised input and the product uses rms_norm(x, norm_weight, norm_eps),
  // bit for bit what rms_norm (rms_norm.h) writes, computed by every block into shared memory
  // (rms_norm_smem.cuh) instead of by a launch of its own (skinny_norm_supported says where).
  const void* norm_weight = nullptr;  // [k], the dtype
  float norm_eps = 0.f;
};

// Shared memory a fused norm's rows may take: the default per-block limit (48 KiB, no opt-in
// needed) less 1 KiB for the kernel's static shared memory (the norm's partial sums).
inline constexpr size_t kSkinnyNormMaxSmem = 47 * 1024;

// True when a product of m rows and depth k can take a fused norm: m <= 4,
// k % 8 == 0, k <= 8192 (rms_norm's one-pack-per-thread block kernel, whose order it
// reproduces), m k elements within kSkinnyNormMaxSmem, norm_weight 16-byte aligned. The bits
// match rms_norm's block kernel, which rms_norm runs at dim > 512 unless FOLIO_RMS_NORM=warp.
bool skinny_norm_supported(DType dtype, int m, int k, const void* norm_weight);

// True when skinny_gemm takes this shape: 1 <= m <= kSkinnyMaxM, k % 8 == 0, x and w 16-byte
// aligned, y 4-byte aligned.
bool skinny_gemm_supported(int m, int k, const void* x, const void* w, const void* y);

Status skinny_gemm(DType dtype, const SkinnyProblem& problem, void* stream,
                   SkinnyVariant variant = SkinnyVariant::kDefault);
Status skinny_gemm(DType dtype, const void* x, const void* w, void* y, int m, int n, int k,
                   bool accumulate, void* stream, SkinnyVariant variant = SkinnyVariant::kDefault);

// The same product with fp32 output (the lm_head's logits), no accumulate.
Status skinny_gemm_f32(DType dtype, const void* x, const void* w, float* y, int m, int n, int k,
                       void* stream);

// A flow between two skinny products at m 1: the gated product (gate_up + silu, the producer)
// counts the outputs it has stored per segment of seg_elems, and the next plain product (down,
// the consumer, whose x is that output) waits for each segment of x only when its warps reach
// it, instead of for the producer's whole grid (pdl_wait). The consumer's warps then stream
// their weights while the producer's last blocks finish. Same arithmetic, same bits. Measured
// level with the PDL wait on one GPU's B3 (H100, NOTES.md "B3, session 22"), ahead on small
// products (Llama-3.2-3B, 8B -tp 2): model/skinny_flow_policy.h chooses it.
// `counters` (device, zeroed once by skinny_flow_init, then never reset: CUDA-graph safe) holds
// one cumulative count per segment and the consumer's launch count; its launches are numbered
// from it, so every producer launch with these counters must be followed by exactly one consumer
// launch with them, on the same stream, before the next producer launch. A consumer whose
// producer never ran traps (cudaErrorLaunchFailure after ~10 s) instead of hanging.
struct SkinnyFlow {
  unsigned long long* counters = nullptr;  // skinny_flow_words(x elements) words
  bool produce = false;                    // true: the gated producer; false: the consumer
};
inline constexpr int kSkinnyFlowSegment = 1024;  // elements of x per counter
// Words of counters for a flow whose x has `elems` elements per row.
inline size_t skinny_flow_words(int elems) {
  return static_cast<size_t>((elems + kSkinnyFlowSegment - 1) / kSkinnyFlowSegment) + 1;
}
// Zeroes the counters (before the flow's first launch).
Status skinny_flow_init(unsigned long long* counters, int elems, void* stream);

// The consumer side: y[1, n] (+)= x[1, k] · w[n, k]^T where x is the output of the producer
// launched just before with the same flow.counters (flow.produce false; m 1, dtype output).
Status skinny_gemm_flow(DType dtype, const SkinnyProblem& problem, const SkinnyFlow& flow,
                        void* stream);

// The SwiGLU MLP's first half at small m: act[m, inter] = silu(x · gate^T) * (x · up^T), where
// w_gate_up = [gate; up] is [2 inter, k]. Bit-identical to skinny_gemm into [m, 2 inter] then
// silu_and_mul (silu_and_mul.h), in one launch and without the intermediate.
Status skinny_gemm_silu(DType dtype, const void* x, const void* w_gate_up, void* act, int m,
                        int inter, int k, void* stream);
// The same with the problem's fields: w = w_gate_up, y = act, n = inter; a fused norm allowed
// (no accumulate, no fp32 output).
Status skinny_gemm_silu(DType dtype, const SkinnyProblem& problem, void* stream);
// The producer side of a flow (flow.produce true; m 1): the same launch, counting its outputs.
Status skinny_gemm_silu(DType dtype, const SkinnyProblem& problem, const SkinnyFlow& flow,
                        void* stream);

}  // namespace folio::cuda
