// GEMM over cuBLASLt for the model's linear layers, Hugging Face Linear layout:
//   y[m, n] = x[m, k] · w[n, k]^T  (+ y when accumulate: the residual add of o_proj/down_proj)
// bf16 or fp16 operands, fp32 accumulation, row-major contiguous tensors.
// One Gemm per stream/thread (it is not thread-safe): it owns the cuBLASLt handle, a workspace,
// and a plan per (dtype, m, n, k, accumulate): the matmul descriptors and the chosen algorithm.
//
// m = 1 (batch-1 decode) goes to skinny_gemm.h's GEMV instead of cuBLASLt (FOLIO_SKINNY_GEMM_MAX_M
// =0..4 moves the m cut; 0: cuBLASLt always). Alone, cuBLASLt's split-k is faster on the
// smallest matrix (H100: o_proj, 4096 x 4096, 12.8 us against 15.9), but in the decode step the
// skinny kernel's programmatic launch overlaps attention's tail and wins (B3 6.01 -> 5.95 ms);
// FOLIO_SKINNY_MIN_MIB=32 keeps matrices up to 32 MiB on cuBLASLt as before.
//
// FOLIO_GEMM_WGMMA=1 sends m in [FOLIO_GEMM_WGMMA_MIN_M (65), FOLIO_GEMM_WGMMA_MAX_M (512)] to
// gemm_wgmma.h's Hopper kernel where it fits (opt-in: on the H100 it is 1.1-2.5x slower than
// cuBLASLt there so far; NOTES.md, session 17).
//
// Algorithm choice (gemm_autotune.h): with autotuning on (FOLIO_GEMM_AUTOTUNE=1; off by default:
// on the H100 it gained at most 1.10x on one decode shape and cost ~25 ms per shape, see
// NOTES.md) a plan for m <= FOLIO_GEMM_AUTOTUNE_MAX_M (512) times up to 16 heuristic algorithms on
// the real operands and keeps the fastest; otherwise it keeps cuBLASLt's first heuristic choice.
// Timing writes only Gemm-owned scratch, never the caller's y.
//
// Large m (prefill), opt-in: FOLIO_GEMM_TUNE_LARGE_M=M (0, the default: off) times cuBLASLt's
// first 8 kernels under sustained load (gemm_sustained_tune.h: the power cap) for the first plan
// of each (dtype, n, k, accumulate) with m >= M, on the caller's x and w and a transient output
// buffer, and lends the winner to every later m >= M of that product (checked by cuBLASLt per
// m). On the H200 with M 4096: a 16384-token prefill step 2.7% faster. Off by default because
// the choice comes from a timing, so runs may differ in rounding (vLLM's default is reproducible).
// FOLIO_GEMM_TUNE_CACHE=FILE keeps the choices (per GPU name, cuBLASLt version and product) in
// FILE and reads them back, so only the first process times them and the rest run the same
// kernels (backend/gemm_tune_cache.h; a malformed FILE fails create()).
//
// Memory: everything is allocated by create() (the workspace, plus a 64 MiB timing scratch when
// autotuning is on), so the executor's profiling forward sees it; plan creation allocates nothing,
// except prepare() without operands and the large-m timing's output (transient, freed before it
// returns; without room for it the plan keeps the heuristic's choice).
//
// CUDA graphs: creating a plan synchronizes the stream and times kernels, so it must not happen
// inside a stream capture. Call prepare() for every shape the captured step uses (or run the step
// once uncaptured) before capturing; matmul_nt on a capturing stream with no plan for its shape
// returns an error instead of creating one. With a plan, matmul_nt is capture-safe (one
// cublasLtMatmul on the caller's stream with the Gemm-owned workspace).
#pragma once

#include <cstddef>
#include <memory>

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

enum class GemmAutotune { kFromEnv, kOff, kOn };

class Gemm {
 public:
  // skinny_max_m: m up to this runs skinny_gemm (0: never; -1: FOLIO_SKINNY_GEMM_MAX_M, default 1).
  static Result<std::unique_ptr<Gemm>> create(size_t workspace_bytes = 32u << 20,
                                              GemmAutotune autotune = GemmAutotune::kFromEnv,
                                              int skinny_max_m = -1);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  Status matmul_nt(DType dtype, const void* x, const void* w, void* y, int m, int n, int k,
                   bool accumulate, void* stream);

  // True when matmul_nt sends this product to skinny_gemm (skinny_gemm.h) rather than cuBLASLt:
  // callers use it to take a fused skinny kernel (skinny_gemm_silu) for the same product.
  bool routes_to_skinny(int m, int n, int k, const void* x, const void* w, const void* y) const;

  // Creates (and tunes) the plan for a shape ahead of time; a no-op when it exists. The first form
  // times on the caller's operands (only read: x[m, k], w[n, k]; the executor's activation buffers
  // and weights), the second on transient device buffers it allocates (m·k + n·k elements) and
  // frees. Both synchronize `stream`; neither may run during a capture.
  Status prepare(DType dtype, const void* x, const void* w, int m, int n, int k, bool accumulate,
                 void* stream = nullptr);
  Status prepare(DType dtype, int m, int n, int k, bool accumulate, void* stream = nullptr);

  size_t cached_plans() const;
  // Sustained-load timings run (FOLIO_GEMM_TUNE_LARGE_M; not counting choices lent or read from
  // the tuning cache).
  size_t sustained_timings() const;
  bool has_plan(DType dtype, int m, int n, int k, bool accumulate) const;
  bool autotune_enabled() const;
  // Of the plans created so far, how many were timed (and how many of those chose an algorithm
  // other than the heuristic's first).
  size_t tuned_plans() const;
  size_t retuned_plans() const;

 private:
  struct Impl;
  explicit Gemm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace folio::cuda
