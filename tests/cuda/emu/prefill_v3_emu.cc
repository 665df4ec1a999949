// Runs the v3 / v3p / v3pq (wgmma) prefill kernels' own source (prefill_attention_v3.cu, rewritten
// for the host by scripts/emu-prefill-v3.sh) on the SIMT emulator, with wgmma emulated from the PTX
// ISA's descriptor and fragment definitions (shim/backend/cuda/wgmma_ptx.cuh), against a
// double-precision reference: head_dim 64 and 128 in bf16 and fp16, block sizes 1 / 3 / 16 / 24,
// GQA 4 / 8 / MHA / MQA, query lengths around the 128-row block and 64-row warpgroup edges (a
// warpgroup of padding rows only), chunked prefill over a cached prefix, decode rows, contexts
// of several key tiles, and one head_dim (80) that falls back to v2. Exits non-zero on any miss.
// Optional argument: run only case N (0-based).
// clang-format off
#include "simt_emu.h"  // first: the kernel sources' headers use its shims
#include "prefill_attention_v2_emu.inc"
#include "prefill_attention_v3_emu.inc"
#include "prefill_emu_case.h"
// clang-format on

#include <cstdlib>

int main(int argc, char** argv) {
  using folio::cuda::DType;
  using folio::cuda::emu_case::Case;
  const DType bf = DType::kBF16, fp = DType::kFP16;
  const std::vector<Case> cases = {
      {bf, 8, 2, 128, 16, 0, {{130, 130}, {300, 100}, {5, 1}}},
      {fp, 8, 2, 128, 16, 0, {{130, 130}, {300, 100}, {5, 1}}},
      {bf, 3, 3, 64, 1, 0, {{129, 129}, {66, 1}, {200, 64}}},
      {fp, 3, 3, 64, 1, 0, {{129, 129}, {66, 1}, {200, 64}}},
      {bf, 32, 8, 128, 16, 0, {{64, 64}, {40, 33}, {1, 1}}},
      {bf, 12, 1, 128, 8, 0, {{100, 40}, {17, 17}}},
      {fp, 4, 2, 128, 3, 0, {{90, 90}, {65, 2}}},
      {bf, 16, 2, 64, 24, 0, {{150, 150}, {257, 20}}},
      {bf, 4, 4, 128, 32, 0, {{1, 1}, {5, 1}, {64, 1}, {65, 1}, {63, 63}}},
      {fp, 8, 1, 64, 16, 0, {{400, 150}, {129, 2}}},
      {bf, 8, 2, 80, 16, 0, {{100, 70}}},  // falls back to v2x2
  };
  const int only = argc > 1 ? std::atoi(argv[1]) : -1;
  int failures = 0;
  using folio::cuda::prefill_detail::V3Variant;
  for (const V3Variant variant :
       {V3Variant::kPlain, V3Variant::kPipelined, V3Variant::kPipelinedQRegs}) {
    const folio::cuda::emu_case::Launcher launch = [variant](const Case&, const auto& p,
                                                             const auto& plan) {
      return folio::cuda::prefill_detail::launch_v3(p, plan, variant, nullptr);
    };
    std::mt19937 rng(1);
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      if (only >= 0 && static_cast<int>(i) != only) continue;
      const double err = c.dt == bf ? folio::cuda::emu_case::run_case<__nv_bfloat16>(c, launch, rng)
                                    : folio::cuda::emu_case::run_case<__half>(c, launch, rng);
      const double tol = c.dt == bf ? 1e-2 : 3e-3;
      failures += !(err < tol);
      std::printf(
          "%s %s case %zu %s h%d kv%d d%d bs%d: rel err %.3g\n", err < tol ? "ok  " : "FAIL",
          variant == V3Variant::kPlain       ? "v3  "
          : variant == V3Variant::kPipelined ? "v3p "
                                             : "v3pq",
          i, c.dt == bf ? "bf16" : "fp16", c.heads, c.kv_heads, c.head_dim, c.block_size, err);
      std::fflush(stdout);
    }
  }
  return failures == 0 ? 0 : 1;
}
