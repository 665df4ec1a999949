// Runs the v2 prefill kernel's own source (prefill_attention_v2.cu, rewritten for the host by
// scripts/emu-prefill-v2.sh) on the SIMT emulator against a double-precision reference: head dims
// 8..256 (padded ones too), block sizes 1 / 3 / 16 / 24, GQA / MHA / MQA, 16 and 32 rows per
// warp, chunked prefill over a cached prefix and decode rows. Exits non-zero on any miss.
// clang-format off
#include "simt_emu.h"  // first: the kernel source's headers use its shims
#include "prefill_attention_v2_emu.inc"
#include "prefill_emu_case.h"
// clang-format on

int main() {
  using folio::cuda::DType;
  using folio::cuda::emu_case::Case;
  const DType bf = DType::kBF16, fp = DType::kFP16;
  const std::vector<Case> cases = {
      {bf, 4, 2, 16, 16, 16, {{37, 37}, {1, 1}, {70, 65}, {200, 3}}},
      {bf, 4, 2, 16, 16, 32, {{37, 37}, {1, 1}, {70, 65}, {200, 3}}},
      {bf, 8, 2, 128, 16, 16, {{130, 130}, {300, 100}, {5, 1}}},
      {bf, 8, 2, 128, 16, 32, {{130, 130}, {300, 100}, {5, 1}}},
      {fp, 3, 3, 64, 1, 16, {{129, 129}, {66, 1}}},
      {fp, 3, 3, 64, 1, 32, {{129, 129}, {66, 1}}},
      {bf, 12, 1, 80, 8, 32, {{100, 40}, {17, 17}}},
      {bf, 16, 2, 96, 16, 16, {{64, 64}, {65, 1}}},
      {fp, 4, 2, 256, 3, 16, {{90, 90}, {65, 2}}},
      {fp, 6, 3, 40, 24, 32, {{150, 150}}},
      {bf, 4, 2, 8, 16, 16, {{70, 70}}},
      {bf, 4, 4, 32, 32, 32, {{1, 1}, {5, 1}, {64, 1}, {65, 1}}},
      {bf, 8, 1, 64, 16, 32, {{400, 150}, {129, 2}}},
      {fp, 12, 1, 128, 8, 16, {{300, 100}}},
  };
  const folio::cuda::emu_case::Launcher launch = [](const Case& c, const auto& p,
                                                    const auto& plan) {
    return folio::cuda::prefill_detail::launch_v2(p, plan, c.rows_per_warp, nullptr);
  };
  std::mt19937 rng(1);
  int failures = 0;
  for (const Case& c : cases) {
    const double err = c.dt == bf ? folio::cuda::emu_case::run_case<__nv_bfloat16>(c, launch, rng)
                                  : folio::cuda::emu_case::run_case<__half>(c, launch, rng);
    const double tol = c.dt == bf ? 1e-2 : 3e-3;
    failures += !(err < tol);
    std::printf("%s %s h%d kv%d d%d bs%d rows/warp %d: rel err %.3g\n", err < tol ? "ok  " : "FAIL",
                c.dt == bf ? "bf16" : "fp16", c.heads, c.kv_heads, c.head_dim, c.block_size,
                c.rows_per_warp, err);
    std::fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
}
