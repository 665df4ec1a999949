// Cascade decode attention: packs of a plan's narrow items, several to one thread block. Host
// only, no device code.
//
// The GPU's wgmma partial kernel (cuda/cascade_attention_wg.cuh) gives a thread block 64 query
// rows (an item's rows x the q heads of one kv head). A wide item, a shared prefix's 16 rows at
// GQA 4, fills them alone. The plan's narrow items, a few rows sharing a prompt (the n samples of
// one request, beam candidates) and each row's own suffix (one row), would leave most of them
// empty and pay a block's fixed costs (Q load, pipeline fill, epilogue) each, so a block takes a
// pack of them: a run of consecutive items whose query rows fit the block, item j's rows after
// item j - 1's, the block walking their tiles one after another. The tensor cores do the
// empty rows' work too, which they have to spare at a 64-token tile of 32 KB.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cascade_plan.h"

namespace folio {

struct CascadePackOptions {
  int q_per_kv = 1;         // q heads per kv head: an item of r rows has r * q_per_kv query rows
  int max_query_rows = 64;  // a block's
  int tile_tokens = 64;     // the kernel's key tile: an item of t tokens is ceil(t / 64) tiles
  int max_items = 0;        // at most this many items to a pack; 0: as many as fit
  // A pack takes the next item only while its tiles stay within this (0: no limit); a pack
  // always takes at least one item.
  int64_t target_tiles = 0;
};

// Packs of items [begin, plan.items.size()), in order: pack b holds items [pack_start[b],
// pack_start[b + 1]) (pack_start.front() == begin, back() == items.size(); {begin} alone when
// no items are left). Every item must fit a block alone (num_rows * q_per_kv <= max_query_rows).
std::vector<int32_t> pack_cascade_items(const CascadePlan& plan, int begin,
                                        const CascadePackOptions& options);

// How many tiles a pack of items [begin, items.size()) may hold for a kernel of tile_tokens-token
// tiles. Where the plan has wide items (its first num_wide_items): as many as the longest of them,
// so that the grid's blocks run about equally long. Else (groups of at most 8 rows at GQA 4, such
// as n = 4 samples of each prompt): as many as the longest packed item or kMinPackTiles, whichever
// is more, so that long items (a shared prompt's 16 tiles) stay alone and short ones (256-token
// suffixes, 4 tiles) go four to a block; but no more than spreads those items' tiles over a wave of
// blocks (two per SM over the kv heads); at least 1.
int64_t cascade_pack_target_tiles(const CascadePlan& plan, int begin, int tile_tokens,
                                  int num_kv_heads, int num_sms);

// The shortest pack worth forming without wide items. H200, session 49 (K1SharedPrefix, groups of
// 4 rows sharing 2048 tokens + 256 own, so items of 4 rows x 16 tiles and one-row items of 4): at
// b1024 the 4-row items alone and suffixes 4 to a block took 843 us, packs of up to 64 tiles (the
// wave rule alone) 871, at most 2 items to a pack 834; at b256 226 against 240 and 249. On rows
// that share nothing (items of 16 / 16 / 4 tiles) every item alone was the fastest (b1024 2320 us
// against 2368 in packs of 64 tiles).
inline constexpr int64_t kMinPackTiles = 16;

// The wave rule's cap: on rows that share nothing (b256 x 2304, items of 16 / 16 / 4 tiles, H200)
// 16 items to a block took 835 us, 8 677, 4 682 (session 47).
inline constexpr int64_t kMaxPackTiles = 64;

}  // namespace folio
