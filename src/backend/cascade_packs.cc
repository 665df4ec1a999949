#include "backend/cascade_packs.h"

#include <algorithm>

#include "base/check.h"

namespace folio {
namespace {

int64_t tiles_of(const CascadeItem& it, int tile_tokens) {
  return (int64_t{it.tok_end} - it.tok_begin + tile_tokens - 1) / tile_tokens;
}

}  // namespace

std::vector<int32_t> pack_cascade_items(const CascadePlan& plan, int begin,
                                        const CascadePackOptions& o) {
  const int n = static_cast<int>(plan.items.size());
  FOLIO_CHECK(begin >= 0 && begin <= n);
  FOLIO_CHECK(o.q_per_kv >= 1 && o.max_query_rows >= o.q_per_kv && o.tile_tokens >= 1);
  std::vector<int32_t> start{begin};
  int rows = 0, count = 0;
  int64_t tiles = 0;
  for (int i = begin; i < n; ++i) {
    const CascadeItem& it = plan.items[i];
    const int q_rows = it.num_rows * o.q_per_kv;
    FOLIO_CHECK(it.num_rows >= 1 && q_rows <= o.max_query_rows,
                "a packed item must fit a block alone");
    const int64_t t = tiles_of(it, o.tile_tokens);
    const bool fits = rows + q_rows <= o.max_query_rows &&
                      (o.max_items <= 0 || count < o.max_items) &&
                      (o.target_tiles <= 0 || tiles + t <= o.target_tiles);
    if (count > 0 && !fits) {
      start.push_back(i);
      rows = count = 0;
      tiles = 0;
    }
    rows += q_rows;
    tiles += t;
    ++count;
  }
  if (n > begin) start.push_back(n);
  return start;
}

int64_t cascade_pack_target_tiles(const CascadePlan& plan, int begin, int tile_tokens,
                                  int num_kv_heads, int num_sms) {
  FOLIO_CHECK(tile_tokens >= 1);
  const int n = static_cast<int>(plan.items.size());
  const int wide = std::clamp(plan.num_wide_items, 0, n);
  int64_t longest_wide = 0, longest = 0, packed = 0;
  for (int i = 0; i < wide; ++i)
    longest_wide = std::max(longest_wide, tiles_of(plan.items[i], tile_tokens));
  if (longest_wide > 0) return longest_wide;
  for (int i = std::max(begin, 0); i < n; ++i) {
    const int64_t t = tiles_of(plan.items[i], tile_tokens);
    longest = std::max(longest, t);
    packed += t;
  }
  const int64_t wave = 2 * int64_t{std::max(1, num_sms)};
  const int64_t spread =
      std::clamp<int64_t>(packed * std::max(1, num_kv_heads) / wave, 1, kMaxPackTiles);
  return std::min(std::max(longest, kMinPackTiles), spread);
}

}  // namespace folio
