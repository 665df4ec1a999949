// PagedKvCacheManager: vLLM's PagedAttention bookkeeping. Fixed-size blocks from a BlockPool,
// one block table per sequence, blocks allocated on demand (at most one partly filled block per
// sequence), forks sharing blocks with copy-on-write of a shared partial last block, automatic
// prefix caching of full blocks (PrefixCache), a host swap pool, and with a sliding window the
// release of blocks that fell out of it (the table keeps its length: those entries read
// kNullBlock, a reserved block).
// See kv_cache_manager.h for the step contract. Engine thread only.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_cache_manager.h"
#include "kv/prefix_cache.h"

namespace folio {

struct PagedKvConfig {
  int num_blocks = 0;
  int block_size = 16;
  int num_host_blocks = 0;           // swap space, in blocks
  bool enable_prefix_caching = true;
  BlockHashFn hash_fn;               // empty: default_block_hash (XXH3)
  // > 0: every layer attends to the last `sliding_window` positions only, and blocks below the
  // window are freed (free_out_of_window); block kNullBlock is then reserved and never counted.
  int sliding_window = 0;
};

class PagedKvCacheManager final : public KvCacheManager {
 public:
  explicit PagedKvCacheManager(const PagedKvConfig& config);

  int block_size() const override { return block_size_; }
  int num_total_blocks() const override { return pool_.num_blocks() - num_reserved_blocks_; }
  int num_free_blocks() const override { return pool_.num_free(); }
  int num_used_blocks() const override { return pool_.num_used() - num_reserved_blocks_; }
  int64_t num_filled_slots() const override { return filled_; }

  bool has_seq(SeqId seq) const override { return seqs_.count(seq) != 0; }
  int get_computed_prefix(SeqId seq, std::span<const TokenId> tokens,
                          std::string_view cache_salt) override;
  int num_blocks_needed(SeqId seq, int num_tokens) const override;
  bool append_slots(SeqId seq, int num_tokens) override;
  void fork(SeqId parent, SeqId child) override;
  void free(SeqId seq) override;
  void mark_computed(SeqId seq, std::span<const TokenId> tokens, int num_computed) override;
  std::span<const int32_t> block_table(SeqId seq) const override;
  std::vector<KvCopy> take_pending_copies() override;
  void free_out_of_window(SeqId seq, int num_computed) override;
  int num_held_blocks(SeqId seq) const override;

  int num_free_host_blocks() const override { return host_.num_free(); }
  int num_blocks_to_swap(std::span<const SeqId> seqs) const override;
  bool swap_out(std::span<const SeqId> seqs, std::vector<KvCopy>* copies) override;
  bool can_swap_in(std::span<const SeqId> seqs) const override;
  bool swap_in(std::span<const SeqId> seqs, std::vector<KvCopy>* copies) override;
  bool is_swapped(SeqId seq) const override;

  const KvCacheStats& stats() const override { return stats_; }
  Status check_invariants() const override;

  // For tests: the device free list, head (evicted first) to tail.
  std::vector<int32_t> free_list() const { return pool_.free_list(); }
  bool is_cached(int32_t block) const { return cache_.is_cached(block); }
  int ref_count(int32_t block) const { return pool_.ref_count(block); }

 private:
  struct SeqState {
    std::vector<int32_t> table;  // device ids, or host ids while swapped
    int num_reserved = 0;        // positions [0, num_reserved) have a slot
    int num_skipped = 0;         // table[0, num_skipped) fell out of the window: kNullBlock
    PrefixChain chain;
    std::string salt;
    bool swapped = false;
  };
  SeqState& state(SeqId seq);
  const SeqState& state(SeqId seq) const;
  int32_t allocate_block();
  void release_block(int32_t block);
  void set_fill(int32_t block, int fill);
  // Distinct ids of `seqs`' tables (the blocks they hold), in first-seen order.
  std::vector<int32_t> distinct_blocks(std::span<const SeqId> seqs) const;
  // The entries of `s`'s table that hold a block (those past the window's freed ones).
  static std::span<int32_t> held(SeqState& s) {
    return std::span<int32_t>(s.table).subspan(static_cast<size_t>(s.num_skipped));
  }
  static std::span<const int32_t> held(const SeqState& s) {
    return std::span<const int32_t>(s.table).subspan(static_cast<size_t>(s.num_skipped));
  }

  int block_size_;
  bool prefix_caching_;
  int sliding_window_;
  int num_reserved_blocks_;  // 1 (kNullBlock) with a sliding window, else 0
  BlockPool pool_;
  BlockPool host_;
  PrefixCache cache_;
  std::unordered_map<SeqId, SeqState> seqs_;
  std::vector<int32_t> fill_;  // per device block: positions holding a token (used blocks)
  int64_t filled_ = 0;
  std::vector<KvCopy> pending_copies_;
  KvCacheStats stats_;
};

}  // namespace folio
