// Runs the cascade wgmma kernel's device code (src/backend/cuda/cascade_attention_wg.cuh) on the
// SIMT emulator (simt_emu.h; wgmma, TMA and mbarriers from shim/) over the items of real plans
// (backend/cascade_plan.h), merges the partials on the host as cascade_merge_kernel does, and
// compares every (row, head) with a double-precision reference: bf16 and fp16 (each also over an
// e4m3 cache, the reference reading the values of its codes), GQA 4 and 8 (16
// and 8 rows per item), pages of 8, 16, 32 and 64, groups sharing prefixes of several tiles,
// nested prefixes, loners, own suffixes of 1 token to a few tiles, items shorter than one tile, a
// prefix of 10 tiles (the 3-stage ring wraps), cut pages at tok_end, and the pool's slots past
// each row's end holding NaN. Each case runs with the engine's split (items of more than 32 query
// rows alone) and the narrow items packed several to a block (backend/cascade_packs.h, at most
// Case::pack items: each item owns G x its rows query rows, a tile is read by its item's rows
// only; groups of 2-8 rows give packs of items of several rows beside one-row ones) and with
// every item alone in its block; each twice: TMA copies landing as late as the protocol allows
// (lazy), then at issue (eager), under the happens-before race
// check; the packed eager passes over a grid as a CUDA graph's bound leaves it (three idle
// blocks past the work). What it cannot check: PTX syntax, the memory model beyond that, timing.
// Built and run by scripts/emu-cascade-wg.sh; exits non-zero on any miss.
// clang-format off
#include "simt_emu.h"  // first: the kernel's headers use its shims
#include "backend/cascade_packs.h"
#include "backend/cuda/cascade_attention_wg.cuh"
#include "backend/cuda/tensor_map.h"
#include "base/fp8.h"
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

namespace {

using namespace folio::cuda::cascade_wide;
using folio::CascadeItem;
using folio::CascadeOptions;
using folio::CascadePlan;
using folio::cuda::DType;

template <typename T, int kSt, typename C>
void kernel(Args a, Maps maps) {
  partial_body<T, kSt, C>(a, maps, emu::smem());
}

struct Group {
  int rows, prefix_blocks;  // rows sharing their first prefix_blocks blocks (1 row: a loner)
};

struct Case {
  DType dt;
  int heads, kv_heads, block_size;
  std::vector<Group> groups;
  int max_tokens_per_item;  // the plan's; small values give items shorter than a tile
  int pack;                 // at most this many items to a pack where packed
  bool fp8 = false;         // an e4m3 cache (the kernel's fp16 products)
};

// Returns the worst relative error of one (row, head) output, INFINITY on a launch failure or a
// non-finite output.
template <typename T>
double run(const Case& c, bool packed, bool bounded, int stages, std::mt19937& rng) {
  const int H = c.heads, KV = c.kv_heads, G = H / KV, bs = c.block_size;
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::uniform_int_distribution<int> own_len(1, 3 * 64 + 5);
  // Block tables: each group's prefix blocks, then each row's own blocks (at least its last
  // token is its own, as in the engine).
  std::vector<int32_t> ctx, bts{0}, table;
  int32_t next_block = 0;
  for (const Group& g : c.groups) {
    std::vector<int32_t> prefix(g.prefix_blocks);
    for (auto& b : prefix) b = next_block++;
    for (int r = 0; r < g.rows; ++r) {
      const int len = g.prefix_blocks * bs + own_len(rng);
      for (int b = 0; b < (len + bs - 1) / bs; ++b)
        table.push_back(b < g.prefix_blocks ? prefix[b] : next_block++);
      ctx.push_back(len);
      bts.push_back(static_cast<int32_t>(table.size()));
    }
  }
  // Nested sharing: the second half of the first group's rows also share the next 2 blocks of
  // its first row (where both hold 2 full blocks past the prefix: never a row's last block).
  const int lead = c.groups[0].rows / 2, past = (c.groups[0].prefix_blocks + 3) * bs;
  if (c.groups[0].rows >= 4 && ctx[lead] > past)
    for (int r = lead + 1; r < c.groups[0].rows; ++r)
      if (ctx[r] > past)
        for (int b = 0; b < 2; ++b)
          table[bts[r] + c.groups[0].prefix_blocks + b] =
              table[bts[lead] + c.groups[0].prefix_blocks + b];
  const int n = static_cast<int>(ctx.size());
  const size_t slots = static_cast<size_t>(next_block) * bs;
  // The cache as the kernel reads it (T, or e4m3 codes), and as the reference reads it (the
  // values those codes stand for).
  std::vector<T> kc(slots * KV * D), vc(slots * KV * D);
  std::vector<uint8_t> k8(c.fp8 ? kc.size() : 0), v8(k8.size());
  auto fill = [&](std::vector<T>& vals, std::vector<uint8_t>& codes) {
    for (size_t i = 0; i < vals.size(); ++i) {
      const float x = u(rng);
      if (!c.fp8) {
        vals[i] = T(x);
        continue;
      }
      codes[i] = folio::float_to_fp8_e4m3(x);
      vals[i] = T(folio::fp8_e4m3_to_float(codes[i]));
    }
  };
  fill(kc, k8);
  fill(vc, v8);
  for (int s = 0; s < n; ++s)  // NaN past each row's end in its last block
    for (int j = ctx[s]; j < (bts[s + 1] - bts[s]) * bs; ++j) {
      const size_t slot = static_cast<size_t>(table[bts[s] + j / bs]) * bs + j % bs;
      std::fill_n(kc.begin() + slot * KV * D, KV * D, T(NAN));
      std::fill_n(vc.begin() + slot * KV * D, KV * D, T(NAN));
      if (c.fp8) {
        std::fill_n(k8.begin() + slot * KV * D, KV * D, uint8_t{0x7F});  // e4m3 NaN
        std::fill_n(v8.begin() + slot * KV * D, KV * D, uint8_t{0x7F});
      }
    }
  std::vector<T> q(static_cast<size_t>(n) * H * D);
  for (auto& x : q) x = T(u(rng));
  std::vector<int32_t> query_start(n);
  for (int s = 0; s < n; ++s) query_start[s] = n - 1 - s;  // rows read q out of order

  CascadeOptions o;
  o.max_rows_per_item = 64 / G;
  o.max_tokens_per_item = c.max_tokens_per_item;
  o.min_shared_tokens = bs;
  // Packed: items of more than 32 query rows one per block (the engine's cascade_wide_min_rows),
  // the others in packs; else every item alone.
  o.wide_min_rows = packed ? 32 / G + 1 : 1;
  const CascadePlan plan = folio::plan_cascade(ctx, bts, table, bs, o);
  std::vector<float> part_o(static_cast<size_t>(plan.num_slots) * H * D, NAN);
  std::vector<float> part_ml(static_cast<size_t>(plan.num_slots) * H * 2, NAN);
  Args a{};
  a.q = q.data();
  a.query_start = query_start.data();
  a.block_table = table.data();
  a.items = plan.items.data();
  a.rows = plan.rows.data();
  a.part_o = part_o.data();
  a.part_ml = part_ml.data();
  a.num_heads = H;
  a.num_kv_heads = KV;
  a.block_size = bs;
  a.block_shift = __builtin_ctz(static_cast<unsigned>(bs));
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  a.scale_log2 = scale * 1.4426950408889634f;
  folio::CascadePackOptions po;
  po.q_per_kv = G;
  po.tile_tokens = kTileTokens;
  po.max_items = c.pack;
  const std::vector<int32_t> packs = folio::pack_cascade_items(plan, plan.num_wide_items, po);
  a.pack_start = packs.data();
  int multi_row_packed = 0;  // packed items of several rows
  for (size_t i = plan.num_wide_items; i < plan.items.size(); ++i)
    multi_row_packed += plan.items[i].num_rows > 1;
  // The counts the kernel reads ("device" memory: CascadeCounts' first two), and a grid three
  // blocks wider than the work where bounded, as a CUDA graph's bound leaves it.
  const std::vector<int32_t> counts = {plan.num_wide_items, static_cast<int>(packs.size()) - 1};
  a.counts = counts.data();
  const int blocks = counts[0] + counts[1] + (bounded ? 3 : 0);
  Maps maps;
  // An e4m3 cache's maps see its rows as 64 16-bit pairs (cascade_attention_wg.cu's launch_wide).
  const void* kmap = c.fp8 ? static_cast<const void*>(k8.data()) : kc.data();
  const void* vmap = c.fp8 ? static_cast<const void*>(v8.data()) : vc.data();
  const int map_dim = c.fp8 ? D / 2 : D;
  using folio::cuda::encode_paged_cache_map;
  if (!encode_paged_cache_map(&maps.k_page, c.dt, kmap, KV, map_dim, bs).ok() ||
      !encode_paged_cache_map(&maps.v_page, c.dt, vmap, KV, map_dim, bs).ok() ||
      !encode_paged_cache_map(&maps.k_row, c.dt, kmap, KV, map_dim, 1).ok() ||
      !encode_paged_cache_map(&maps.v_row, c.dt, vmap, KV, map_dim, 1).ok())
    return INFINITY;
  const dim3 grid(static_cast<unsigned>(blocks), KV);
  if (c.fp8 && stages == 2)
    emu::launch(kernel<T, 2, uint8_t>, grid, kThreads, smem_bytes_fp8(2), a, maps);
  else if (c.fp8 && stages == 4)
    emu::launch(kernel<T, 4, uint8_t>, grid, kThreads, smem_bytes_fp8(4), a, maps);
  else if (c.fp8)
    emu::launch(kernel<T, 3, uint8_t>, grid, kThreads, smem_bytes_fp8(3), a, maps);
  else if (stages == 2)
    emu::launch(kernel<T, 2, T>, grid, kThreads, smem_bytes(2), a, maps);
  else
    emu::launch(kernel<T, 3, T>, grid, kThreads, smem_bytes(3), a, maps);

  double worst = 0;
  for (int s = 0; s < n; ++s)
    for (int h = 0; h < H; ++h) {
      // The merge (cascade_merge_kernel), in double.
      double m = -INFINITY;
      for (int i = plan.row_slot_start[s]; i < plan.row_slot_start[s + 1]; ++i)
        m = std::max<double>(m, part_ml[(static_cast<size_t>(plan.row_slots[i]) * H + h) * 2]);
      std::vector<double> got(D, 0.0);
      double den = 0;
      for (int i = plan.row_slot_start[s]; i < plan.row_slot_start[s + 1]; ++i) {
        const size_t base = static_cast<size_t>(plan.row_slots[i]) * H + h;
        const double w = std::exp2(part_ml[base * 2] - m);
        den += w * part_ml[base * 2 + 1];
        for (int d = 0; d < D; ++d) got[d] += w * part_o[base * D + d];
      }
      // The reference over the row's whole context.
      const T* qv = q.data() + (static_cast<size_t>(query_start[s]) * H + h) * D;
      auto kv_at = [&](int j) {
        return (static_cast<size_t>(table[bts[s] + j / bs]) * bs + j % bs) * KV * D + (h / G) * D;
      };
      std::vector<double> w(ctx[s]);
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j < ctx[s]; ++j) {
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += float(qv[d]) * float(kc[kv_at(j) + d]);
        w[j] = dot * scale;
        mx = std::max(mx, w[j]);
      }
      for (double& x : w) sum += (x = std::exp(x - mx));
      double num = 0, rden = 0;
      for (int d = 0; d < D; ++d) {
        double ref = 0;
        for (int j = 0; j < ctx[s]; ++j) ref += w[j] * float(vc[kv_at(j) + d]);
        ref /= sum;
        const double g = got[d] / den;
        if (!std::isfinite(g)) {
          std::printf("  row %d (context %d) head %d: output %d not finite; its slots:", s, ctx[s],
                      h, d);
          for (int i = plan.row_slot_start[s]; i < plan.row_slot_start[s + 1]; ++i) {
            const int slot = plan.row_slots[i];
            const size_t base = static_cast<size_t>(slot) * H + h;
            std::printf(" %d (m %g, l %g, o %g)", slot, part_ml[base * 2], part_ml[base * 2 + 1],
                        part_o[base * D + d]);
          }
          std::printf("\n");
          return INFINITY;
        }
        num += (g - ref) * (g - ref);
        rden += ref * ref;
      }
      worst = std::max(worst, std::sqrt(num / rden));
    }
  std::printf(
      "  %zu items (%d segments, %d alone, %d one-row and %d of more rows in %d packs), %d "
      "blocks, %d rows, contexts %d..%d\n",
      plan.items.size(), plan.num_segments, plan.num_wide_items, plan.num_single_row_items,
      multi_row_packed, counts[1], blocks, n, *std::min_element(ctx.begin(), ctx.end()),
      *std::max_element(ctx.begin(), ctx.end()));
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  const DType bf = DType::kBF16, fp = DType::kFP16;
  const std::vector<Case> cases = {
      {bf, 8, 2, 16, {{5, 12}, {1, 0}, {3, 9}}, 1024, 16},  // GQA 4, prefixes of 3 and 2+ tiles
      {fp, 8, 2, 16, {{5, 12}, {1, 0}, {3, 9}}, 1024, 3},   // packs of 3
      {bf, 16, 2, 8, {{9, 17}, {2, 8}}, 1024, 8},           // GQA 8: 8 rows per item, page 8
      {bf, 8, 2, 32, {{6, 5}, {1, 0}}, 64, 16},             // page 32, items of one tile
      {bf, 8, 1, 64, {{4, 3}, {2, 2}}, 1024, 5},            // page 64: one page per tile
      {bf, 8, 2, 16, {{17, 6}, {1, 0}}, 32, 2},             // 17 rows (2 items), items of 2 pages
      {bf, 8, 2, 16, {{3, 40}}, 1024, 16},  // 10-tile prefix: the ring wraps 3 times
      // An e4m3 cache: bf16 and fp16 q, pages 16, 8 and 64, cut pages, the ring wrapping.
      {bf, 8, 2, 16, {{5, 12}, {1, 0}, {3, 9}}, 1024, 16, true},
      {fp, 16, 2, 8, {{9, 17}, {2, 8}}, 1024, 8, true},
      {bf, 8, 1, 64, {{4, 3}, {2, 2}}, 1024, 5, true},
      {bf, 8, 2, 16, {{3, 40}}, 1024, 16, true},
  };
  const int only = argc > 1 ? std::atoi(argv[1]) : -1;
  int failures = 0;
  std::mt19937 rng(7);
  for (int pass = 0; pass < 8; ++pass) {
    emu::copy_policy = pass % 2 == 0 ? emu::CopyPolicy::kLazy : emu::CopyPolicy::kEager;
    emu::race_check = true;
    const bool packed = pass % 4 < 2;
    const bool bounded = packed && pass % 2 == 1;  // passes 1 and 5
    for (size_t i = 0; i < cases.size(); ++i) {
      if (only >= 0 && static_cast<int>(i) != only) continue;
      const Case& c = cases[i];
      // An fp8 cache's first passes: 3 stages packed, 4 (its own form) alone.
      const int stages = pass >= 4 ? 2 : c.fp8 && !packed ? 4 : 3;
      const double err = c.dt == bf ? run<__nv_bfloat16>(c, packed, bounded, stages, rng)
                                    : run<__half>(c, packed, bounded, stages, rng);
      // P is rounded to 16 bits before P V: bf16 ~4e-3 relative per row, fp16 ~5e-4 (an fp8
      // cache's products are fp16's whatever q's type; the reference reads the codes' values).
      const bool ok = err < (c.dt == bf && !c.fp8 ? 1e-2 : 2e-3);
      failures += !ok;
      std::printf("%s %-5s %d stages %s case %zu %s%s h%d kv%d page %d: worst row error %.3g\n",
                  ok ? "ok  " : "FAIL", pass % 2 == 0 ? "lazy" : "eager", stages,
                  bounded  ? "bounded"
                  : packed ? "packed"
                           : "alone ",
                  i, c.dt == bf ? "bf16" : "fp16", c.fp8 ? " fp8 cache" : "", c.heads, c.kv_heads,
                  c.block_size, err);
      std::fflush(stdout);
    }
  }
  return failures == 0 ? 0 : 1;
}
