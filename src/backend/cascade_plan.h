// Cascade (shared-prefix) decode attention: the host plan. Host only, no device code.
//
// With prefix caching, decode rows that started from the same prompt prefix (a system prompt,
// few-shot examples) hold the same physical KV blocks for it. A per-row decode kernel reads those
// blocks once per row; the cascade form reads them once per group of rows: an item computes the
// attention of several rows' queries (all their q heads of one kv head, at most 64 query rows)
// over one token range of one block table, writing an unnormalised partial result (max, sum,
// accumulator) per row, and a merge combines each row's partials (FlashInfer's cascade
// inference; vLLM V1's cascade attention for one prefix common to the whole batch).
//
// The plan finds the sharing from the block tables alone: rows whose tables start with the same
// block ids share those tokens' K/V. Sorted by their tables, such rows are neighbours, and the
// longest common prefixes (LCP) of neighbours form a tree: each node a set of rows and a range of
// blocks they all share. A node becomes a "segment" (its rows read that range together) when it
// has at least `min_shared_rows` rows and `min_shared_tokens` tokens; a node too small to pay is
// left to its children, which then start where it started. What remains of each row past its
// deepest segment (at least its last token: only whole blocks before position context - 1 are
// shared, since a row's newest token is its own) is a one-row segment over the row's own table.
// Every row's context [0, context_len) is covered exactly once, by consecutive ranges.
//
// Items split segments into at most `max_rows_per_item` rows and `max_tokens_per_item` tokens
// (token ranges on block boundaries); each (row, item) pair owns one partial slot. With
// `wide_min_rows`, the items of that many rows or more are moved to the front and the other
// one-row items to the back (stable partitions: slots and each row's slot order stay as they
// were).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace folio {

// One unit of work (one thread block per kv head): rows [row_begin, row_begin + num_rows) of
// CascadePlan::rows read tokens [tok_begin, tok_end) through block_table[bt_start + t /
// block_size], and row i of the item writes partial slot slot_begin + i.
struct CascadeItem {
  int32_t row_begin = 0;
  int32_t num_rows = 0;
  int32_t bt_start = 0;  // index into the step's block_table array (a row's table start)
  int32_t tok_begin = 0;
  int32_t tok_end = 0;
  int32_t slot_begin = 0;
  bool operator==(const CascadeItem&) const = default;
};

struct CascadeOptions {
  int max_rows_per_item = 16;      // <= 64 / (num_heads / num_kv_heads): the kernel's 64 q rows
  int max_tokens_per_item = 1024;  // rounded down to whole blocks (at least one)
  int min_shared_rows = 2;         // a shared range is read together by at least this many rows
  int min_shared_tokens = 256;     // ... and is at least this long
  // A plan of fewer items than this (a few rows leave the GPU idle: the kernel runs one thread
  // block per item and kv head) is planned again with max_tokens_per_item halved, while that
  // stays at least kMinSplitTokens. 0: one plan as the options say.
  int min_items = 0;
  // Items of at least this many rows come first in CascadePlan::items (num_wide_items of them),
  // and items of one row (below this) last (num_single_row_items), for kernels of their own (the
  // GPU's wgmma kernel takes each wide item alone and packs single-row items several to a
  // block); 0: no such order.
  int wide_min_rows = 0;
};

// The shortest max_tokens_per_item that CascadeOptions::min_items halves down to: two of the
// kernel's 64-token tiles, below which an item's fixed costs (Q load, pipeline fill, one more
// partial to merge) outweigh the parallelism gained.
inline constexpr int kMinSplitTokens = 128;

struct CascadePlan {
  std::vector<int32_t> rows;  // batch rows (sequence indices), in item order
  std::vector<CascadeItem> items;
  // Row s's partial slots (to merge): row_slots[row_slot_start[s] .. row_slot_start[s + 1]).
  std::vector<int32_t> row_slot_start;  // [num_seqs + 1]
  std::vector<int32_t> row_slots;
  int num_slots = 0;
  // With CascadeOptions::wide_min_rows: items[0, num_wide_items) have that many rows or more,
  // the last num_single_row_items one row (and fewer than that many), the others in between.
  int num_wide_items = 0;
  int num_single_row_items = 0;
  int num_segments = 0;        // shared segments (of two or more rows)
  int64_t logical_tokens = 0;  // sum of the contexts: what a per-row kernel reads
  int64_t read_tokens = 0;     // tokens the items read (a shared range once per item)
  // The fraction of a per-row kernel's reads the plan saves (0 when nothing is shared).
  double saving() const {
    return logical_tokens > 0 ? 1.0 - double(read_tokens) / double(logical_tokens) : 0.0;
  }
};

// The plan for decode rows s = 0 .. context_lens.size() - 1 (one query each), with the tables of
// ForwardBatch (block_table_start has num_seqs + 1 entries; row s's table is
// block_table[block_table_start[s] ..]). Every context must be >= 1.
CascadePlan plan_cascade(std::span<const int32_t> context_lens,
                         std::span<const int32_t> block_table_start,
                         std::span<const int32_t> block_table, int block_size,
                         const CascadeOptions& options);

// True if any two rows' tables start with the same block: the cheap test run before a plan.
bool rows_may_share(std::span<const int32_t> context_lens,
                    std::span<const int32_t> block_table_start,
                    std::span<const int32_t> block_table, int block_size);

}  // namespace folio
