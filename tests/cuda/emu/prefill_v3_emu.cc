// Runs the v3-family (wgmma) prefill kernels' own source (prefill_attention_v3.cu, v3n128, v3pw,
// v3pwpp, v3tma, v3tmap, v3tmapp and v3tmaq, rewritten for the host by scripts/emu-prefill-v3.sh) on the
// SIMT emulator, with wgmma emulated from the PTX ISA's descriptor and fragment definitions
// (shim/backend/cuda/wgmma_ptx.cuh), against a double-precision reference (relative error over
// all outputs, and of the worst (token, head) row): head_dim 64 and 128 in bf16 and fp16, block
// sizes 1 / 3 / 8 / 16 / 24 / 32, GQA 4 / 8 / MHA / MQA, query lengths around the 128-row block
// and 64-row warpgroup edges (a warpgroup of padding rows only), chunked prefill over a cached
// prefix, decode rows, contexts of several key tiles, and one head_dim (80) that falls back to
// v2; the pool holds NaN past each sequence's end. The last cases are for the 128-key tiles
// (every variant runs them): contexts of up to 5 tiles (the 3-stage ring wraps), partial last
// tiles, warpgroups whose rows end in the first or the second half of the diagonal tile (the
// half-tile path and the masked full tile) or exactly on its key 64, chunks over a cached
// prefix, decode rows. v3n128 runs head_dim 64 as v3 (the D 64 cases check that fallback).
// Exits non-zero on any miss. Optional arguments: run only case N (0-based; -1: all), and only
// the variant named (v3, v3p, v3pq, v3n128, v3pw, v3pwpp, v3tma, v3tmap, v3tmapp, v3tmaq). v3pw and
// v3pwpp (producer warp, mbarriers; emu_async.h) and v3tma, v3tmap, v3tmapp and v3tmaq (TMA-filled ring,
// persistent blocks) run every case twice: copies landing as late as the program allows (lazy),
// then at issue (eager) with warpgroup 0 made to lag; both with the happens-before race check
// (emu_race.h). The TMA kernels run where their ring fits (head_dim 128, power-of-two block
// sizes 8..128) and as v3 elsewhere. The others run under the policy of FOLIO_EMU_CP_ASYNC (lazy
// by default: plain copies land at their cp.async.wait_group). The last case has a block with
// one live warpgroup over 8 key tiles (the other one releases stages it never computes, several
// times each); the last two have groups of 16 and 64 q heads per KV head.
// clang-format off
#include "simt_emu.h"  // first: the kernel sources' headers use its shims
#include "prefill_attention_v2_emu.inc"
#include "prefill_attention_v3_emu.inc"
#include "prefill_attention_v3n128_emu.inc"
#include "prefill_attention_v3pw_emu.inc"
#include "prefill_attention_v3pwpp_emu.inc"
#include "prefill_attention_v3tma_emu.inc"
#include "prefill_attention_v3tmap_emu.inc"
#include "prefill_attention_v3tmapp_emu.inc"
#include "prefill_attention_v3tmaq_emu.inc"
#include "prefill_emu_case.h"
// clang-format on

#include <cstdlib>
#include <string>

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
      // 128-key tiles: 5 tiles and a partial last one, chunks ending in either half of a tile.
      {bf, 8, 2, 128, 16, 0, {{600, 200}, {260, 1}, {129, 129}, {191, 70}}},
      {fp, 4, 1, 128, 24, 0, {{513, 300}, {64, 64}, {200, 8}, {100, 99}}},
      {bf, 2, 2, 128, 1, 0, {{300, 96}, {127, 127}, {256, 2}}},
      // One live warpgroup (rows <= 64) over 8 key tiles; and a full block over 7.
      {bf, 8, 2, 128, 16, 0, {{1000, 9}, {900, 40}}},
      // Groups of 16 and 64 q heads: v3tmaq's Q boxes of 16 heads x 4 tokens and 64 x 1.
      {fp, 16, 1, 128, 16, 0, {{300, 70}, {40, 40}}},
      {bf, 64, 1, 128, 32, 0, {{150, 9}, {3, 3}}},
  };
  const int only = argc > 1 ? std::atoi(argv[1]) : -1;
  int failures = 0;
  const std::string only_variant = argc > 2 ? argv[2] : "";
  // Variants 0..2: launch_v3's; 3: launch_v3n128; 4, 5: launch_v3pw, lazy / eager copies;
  // 6, 7: launch_v3pwpp, lazy / eager; 8, 9: launch_v3tma, 10, 11: launch_v3tmap, 12, 13:
  // launch_v3tmapp, 14, 15: launch_v3tmaq, lazy / eager (persistent: FOLIO_PREFILL_PERSISTENT=1
  // here).
  setenv("FOLIO_PREFILL_PERSISTENT", "1", 0);
  const char* const names[] = {"v3",     "v3p",    "v3pq",    "v3n128", "v3pw",
                               "v3pw",   "v3pwpp", "v3pwpp",  "v3tma",  "v3tma",
                               "v3tmap", "v3tmap", "v3tmapp", "v3tmapp", "v3tmaq",
                               "v3tmaq"};
  const emu::CopyPolicy default_policy = emu::copy_policy;
  for (int vi = 0; vi < 16; ++vi) {
    if (!only_variant.empty() && only_variant != names[vi]) continue;
    emu::copy_policy = vi >= 4 && vi % 2 == 0 ? emu::CopyPolicy::kLazy
                       : vi >= 4              ? emu::CopyPolicy::kEager
                                              : default_policy;
    emu::race_check = vi >= 4;
    emu::lagging_group = vi >= 4 && vi % 2 == 1 ? 0 : -1;  // eager: warpgroup 0 lags
    const char* const policy = emu::copy_policy == emu::CopyPolicy::kLazy ? "lazy" : "eager";
    const folio::cuda::emu_case::Launcher launch = [vi](const Case&, const auto& p,
                                                        const auto& plan) {
      using folio::cuda::prefill_detail::V3Variant;
      if (vi == 3) return folio::cuda::prefill_detail::launch_v3n128(p, plan, nullptr);
      if (vi == 4 || vi == 5) return folio::cuda::prefill_detail::launch_v3pw(p, plan, nullptr);
      if (vi == 6 || vi == 7) return folio::cuda::prefill_detail::launch_v3pwpp(p, plan, nullptr);
      // The dealt item walk's counters are back at zero after every launch (v3tma, v3tmaq).
      const auto counters_reset = [](folio::Status st) {
        for (unsigned t : folio::cuda::prefill_detail::item_deal::g_item_tickets)
          if (t != 0)
            return folio::internal_error("an item counter left at " + std::to_string(t));
        return st;
      };
      if (vi == 8 || vi == 9)
        return counters_reset(folio::cuda::prefill_detail::launch_v3tma(p, plan, nullptr));
      if (vi == 10 || vi == 11) return folio::cuda::prefill_detail::launch_v3tmap(p, plan, nullptr);
      if (vi == 12 || vi == 13) return folio::cuda::prefill_detail::launch_v3tmapp(p, plan, nullptr);
      if (vi >= 14)
        return counters_reset(folio::cuda::prefill_detail::launch_v3tmaq(p, plan, nullptr));
      const V3Variant v = vi == 0   ? V3Variant::kPlain
                          : vi == 1 ? V3Variant::kPipelined
                                    : V3Variant::kPipelinedQRegs;
      return folio::cuda::prefill_detail::launch_v3(p, plan, v, nullptr);
    };
    std::mt19937 rng(1);
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      if (only >= 0 && static_cast<int>(i) != only) continue;
      double row_err = INFINITY;
      const double err =
          c.dt == bf ? folio::cuda::emu_case::run_case<__nv_bfloat16>(c, launch, rng, &row_err)
                     : folio::cuda::emu_case::run_case<__half>(c, launch, rng, &row_err);
      // The worst row's bound: ~2.5x its rounding (bf16 ~3e-3, fp16 ~4e-4 here), below the
      // ~1.5e-2 of one key of 65 dropped from a row.
      const double tol = c.dt == bf ? 1e-2 : 3e-3, row_tol = c.dt == bf ? 8e-3 : 2e-3;
      const bool ok = err < tol && row_err < row_tol;
      failures += !ok;
      std::printf("%s %-6s %-5s case %zu %s h%d kv%d d%d bs%d: rel err %.3g, worst row %.3g\n",
                  ok ? "ok  " : "FAIL", names[vi], policy, i, c.dt == bf ? "bf16" : "fp16", c.heads,
                  c.kv_heads, c.head_dim, c.block_size, err, row_err);
      std::fflush(stdout);
    }
  }
  return failures == 0 ? 0 : 1;
}
