#include "backend/cascade_plan.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "base/check.h"

namespace folio {
namespace {

// Blocks a row may share: the whole blocks before its last token (position context - 1), which
// is the row's own (it was just written, and a sibling's block there holds other K/V).
int32_t shareable_blocks(int32_t context_len, int block_size) {
  return (context_len - 1) / block_size;
}

// Leading block ids a and b have in common. Fixed-size memcmp probes compile to vector compares:
// neighbouring rows usually share a long run, which this skips 16 ids at a time.
int32_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  constexpr size_t kStep = 16;
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i + kStep <= n && std::memcmp(&a[i], &b[i], kStep * sizeof(int32_t)) == 0) i += kStep;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<int32_t>(i);
}

// Rows order[a, b) and a block count d. In build(), a node of the LCP tree whose tokens
// [0, d * block_size) are covered already (by its ancestors' segments; d == 0 when none was
// emitted); in sort_rows(), a range of rows known to agree on blocks [0, d).
struct Node {
  int32_t a, b, d;
};

class Planner {
 public:
  Planner(std::span<const int32_t> context_lens, std::span<const int32_t> block_table_start,
          std::span<const int32_t> block_table, int block_size, const CascadeOptions& o)
      : ctx_(context_lens), bts_(block_table_start), bs_(block_size) {
    max_rows_ = std::max(1, o.max_rows_per_item);
    chunk_ = int64_t{std::max(1, o.max_tokens_per_item / block_size)} * block_size;
    min_rows_ = std::max(2, o.min_shared_rows);
    min_tokens_ = o.min_shared_tokens;
    const int32_t n = static_cast<int32_t>(ctx_.size());
    tables_.resize(n);
    for (int32_t s = 0; s < n; ++s)
      tables_[s] = block_table.subspan(bts_[s], shareable_blocks(ctx_[s], bs_));
  }

  CascadePlan run() {
    const int32_t n = static_cast<int32_t>(ctx_.size());
    order_.resize(n);
    for (int32_t s = 0; s < n; ++s) order_[s] = s;
    lcp_.resize(n > 0 ? n - 1 : 0);
    if (n > 0) sort_rows();
    for (int32_t s = 0; s < n; ++s) plan_.logical_tokens += ctx_[s];
    if (n > 0) build();
    index_slots();
    return std::move(plan_);
  }

 private:
  // Sorts the rows by their shareable tables (lexicographically; a table that is a prefix of
  // another first; equal tables by row index), so rows that share a prefix become neighbours and
  // the blocks a range of rows shares are the minimum LCP of its neighbouring pairs; fills lcp_.
  // Most significant block first, a range of rows that agree on blocks [0, depth) at a time: the
  // blocks they all share next are skipped with one common_prefix per row, then one sort by the
  // block after them splits the range. A long common prefix costs one pass over the rows, where a
  // comparison sort would scan it again in every comparison.
  void sort_rows() {
    std::vector<Node> stack{{0, static_cast<int32_t>(order_.size()), 0}};
    std::vector<std::pair<int64_t, int32_t>> keys;  // (block id after the shared run, row)
    while (!stack.empty()) {
      const auto [a, b, depth] = stack.back();
      stack.pop_back();
      const std::span<const int32_t> first = tables_[order_[a]];
      int32_t k = static_cast<int32_t>(first.size());
      for (int32_t i = a + 1; i < b && k > depth; ++i)
        k = std::min(
            k, depth + common_prefix(first.subspan(depth), tables_[order_[i]].subspan(depth)));
      keys.clear();
      for (int32_t i = a; i < b; ++i) {
        const std::span<const int32_t> t = tables_[order_[i]];
        keys.push_back({t.size() > static_cast<size_t>(k) ? t[k] : INT64_MIN, order_[i]});
      }
      std::sort(keys.begin(), keys.end());  // tables that end at block k first
      for (int32_t i = a; i < b; ++i) order_[i] = keys[i - a].second;
      // Runs of one key share blocks [0, k]; a run of ended tables is equal, its rows ordered.
      for (int32_t i = a, j; i < b; i = j) {
        const int64_t key = keys[i - a].first;
        for (j = i + 1; j < b && keys[j - a].first == key; ++j) lcp_[j - 1] = k;
        if (j < b) lcp_[j - 1] = k;
        if (key != INT64_MIN && j - i >= 2) stack.push_back({i, j, k + 1});
      }
    }
  }

  // Walks the LCP tree depth first (an explicit stack: a deep tree must not overflow a thread's
  // stack), so each row meets its segments in token order and ends with its own suffix.
  void build() {
    std::vector<Node> stack{{0, static_cast<int32_t>(ctx_.size()), 0}};
    while (!stack.empty()) {
      const Node node = stack.back();
      stack.pop_back();
      if (node.b - node.a < min_rows_) {  // no segment can pay here or below: own suffixes
        for (int32_t i = node.a; i < node.b; ++i)
          emit(i, i + 1, int64_t{node.d} * bs_, ctx_[order_[i]]);
        continue;
      }
      const int32_t l = *std::min_element(lcp_.begin() + node.a, lcp_.begin() + node.b - 1);
      int32_t d = node.d;  // where the children start
      if (l > d && int64_t{l - d} * bs_ >= min_tokens_) {
        emit(node.a, node.b, int64_t{d} * bs_, int64_t{l} * bs_);
        ++plan_.num_segments;
        d = l;
      }
      // Children: the maximal runs whose neighbours share more than l blocks (each at least one
      // row, so l grows strictly down the tree). Pushed right to left to pop in row order.
      int32_t end = node.b;
      for (int32_t i = node.b - 2; i >= node.a; --i) {
        if (lcp_[i] > l) continue;
        stack.push_back({i + 1, end, d});
        end = i + 1;
      }
      stack.push_back({node.a, end, d});
    }
  }

  // One segment: rows order[a, b) read tokens [tok_begin, tok_end) through the first row's table
  // (all of them hold the same ids there). Tiles of max_rows_ rows by chunk_ tokens, chunks
  // starting on block boundaries (tok_begin is one); the last chunk ends at tok_end.
  void emit(int32_t a, int32_t b, int64_t tok_begin, int64_t tok_end) {
    const int32_t bt_start = bts_[order_[a]];
    for (int64_t t = tok_begin; t < tok_end; t += chunk_) {
      const int64_t t_end = std::min(t + chunk_, tok_end);
      for (int32_t r = a; r < b; r += max_rows_) {
        CascadeItem item;
        item.row_begin = static_cast<int32_t>(plan_.rows.size());
        item.num_rows = std::min(max_rows_, b - r);
        item.bt_start = bt_start;
        item.tok_begin = static_cast<int32_t>(t);
        item.tok_end = static_cast<int32_t>(t_end);
        item.slot_begin = plan_.num_slots;
        plan_.rows.insert(plan_.rows.end(), order_.begin() + r, order_.begin() + r + item.num_rows);
        plan_.num_slots += item.num_rows;
        plan_.read_tokens += t_end - t;
        plan_.items.push_back(item);
      }
    }
  }

  // The per-row CSR of partial slots, in item order (which is token order for each row).
  void index_slots() {
    const size_t n = ctx_.size();
    plan_.row_slot_start.assign(n + 1, 0);
    for (int32_t r : plan_.rows) ++plan_.row_slot_start[r + 1];
    for (size_t s = 0; s < n; ++s) plan_.row_slot_start[s + 1] += plan_.row_slot_start[s];
    plan_.row_slots.resize(plan_.num_slots);
    std::vector<int32_t> next(plan_.row_slot_start.begin(), plan_.row_slot_start.end() - 1);
    for (const CascadeItem& item : plan_.items)
      for (int32_t i = 0; i < item.num_rows; ++i)
        plan_.row_slots[next[plan_.rows[item.row_begin + i]]++] = item.slot_begin + i;
  }

  std::span<const int32_t> ctx_, bts_;
  int bs_;
  int32_t max_rows_, min_rows_;
  int64_t chunk_, min_tokens_;
  std::vector<std::span<const int32_t>> tables_;  // [num_seqs] each row's shareable blocks
  std::vector<int32_t> order_;                    // rows sorted by table
  std::vector<int32_t> lcp_;                      // [num_seqs - 1] blocks order[i], [i+1] share
  CascadePlan plan_;
};

// Checks the shapes the plan relies on (the engine builds them; a mismatch is a bug).
void check_inputs(std::span<const int32_t> context_lens, std::span<const int32_t> block_table_start,
                  std::span<const int32_t> block_table, int block_size) {
  FOLIO_CHECK(block_size >= 1);
  FOLIO_CHECK(block_table_start.size() == context_lens.size() + 1);
  FOLIO_CHECK(static_cast<size_t>(block_table_start.back()) <= block_table.size());
  for (size_t s = 0; s < context_lens.size(); ++s) {
    FOLIO_CHECK(context_lens[s] >= 1, "every context must hold at least one token");
    const int64_t blocks = (int64_t{context_lens[s]} + block_size - 1) / block_size;
    FOLIO_CHECK(block_table_start[s] >= 0 &&
                block_table_start[s] + blocks <= int64_t{block_table_start[s + 1]});
  }
}

}  // namespace

CascadePlan plan_cascade(std::span<const int32_t> context_lens,
                         std::span<const int32_t> block_table_start,
                         std::span<const int32_t> block_table, int block_size,
                         const CascadeOptions& options) {
  check_inputs(context_lens, block_table_start, block_table, block_size);
  CascadeOptions o = options;
  CascadePlan plan = Planner(context_lens, block_table_start, block_table, block_size, o).run();
  while (static_cast<int64_t>(plan.items.size()) < o.min_items &&
         o.max_tokens_per_item / 2 >= kMinSplitTokens) {
    o.max_tokens_per_item /= 2;
    plan = Planner(context_lens, block_table_start, block_table, block_size, o).run();
  }
  if (o.wide_min_rows > 0) {
    const auto wide_end = std::stable_partition(
        plan.items.begin(), plan.items.end(),
        [&](const CascadeItem& it) { return it.num_rows >= o.wide_min_rows; });
    plan.num_wide_items = static_cast<int>(wide_end - plan.items.begin());
    const auto single_begin = std::stable_partition(
        wide_end, plan.items.end(), [](const CascadeItem& it) { return it.num_rows > 1; });
    plan.num_single_row_items = static_cast<int>(plan.items.end() - single_begin);
  }
  return plan;
}

bool rows_may_share(std::span<const int32_t> context_lens,
                    std::span<const int32_t> block_table_start,
                    std::span<const int32_t> block_table, int block_size) {
  // Two rows can share only if they share their first block: sort the first blocks of the rows
  // that have a shareable block and look for a repeat.
  std::vector<int32_t> first;
  first.reserve(context_lens.size());
  for (size_t s = 0; s < context_lens.size(); ++s)
    if (shareable_blocks(context_lens[s], block_size) >= 1)
      first.push_back(block_table[block_table_start[s]]);
  std::sort(first.begin(), first.end());
  return std::adjacent_find(first.begin(), first.end()) != first.end();
}

}  // namespace folio
