// TokenKvCacheManager: LightLLM's TokenAttention bookkeeping. One preallocated pool of
// `max_total_tokens` single-token slots (TokenPool: contiguous runs preferred), a slot table per
// sequence (block_size() == 1, so a block id is a slot id), forks sharing slots by reference
// count (no copy-on-write: every slot is written once), token-granular prefix reuse through a
// RadixTree with LRU eviction of unreferenced leaves, and a host swap pool of slots.
// See kv_cache_manager.h for the step contract. Engine thread only.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_cache_manager.h"
#include "kv/radix_tree.h"
#include "kv/token_pool.h"

namespace folio {

struct TokenKvConfig {
  int max_total_tokens = 0;
  int num_host_slots = 0;            // swap space, in token slots
  bool enable_prefix_caching = true;
};

class TokenKvCacheManager final : public KvCacheManager {
 public:
  explicit TokenKvCacheManager(const TokenKvConfig& config);

  int block_size() const override { return 1; }
  int num_total_blocks() const override { return pool_.num_slots(); }
  int num_free_blocks() const override { return pool_.num_free() + tree_.evictable_tokens(); }
  int num_used_blocks() const override { return num_total_blocks() - num_free_blocks(); }
  int64_t num_filled_slots() const override { return num_used_blocks(); }

  bool has_seq(SeqId seq) const override { return seqs_.count(seq) != 0; }
  int get_computed_prefix(SeqId seq, std::span<const TokenId> tokens,
                          std::string_view cache_salt) override;
  int num_blocks_needed(SeqId seq, int num_tokens) const override;
  bool append_slots(SeqId seq, int num_tokens) override;
  void fork(SeqId parent, SeqId child) override;
  void free(SeqId seq) override;
  void mark_computed(SeqId seq, std::span<const TokenId> tokens, int num_computed) override;
  std::span<const int32_t> block_table(SeqId seq) const override;
  std::vector<KvCopy> take_pending_copies() override { return {}; }

  int num_free_host_blocks() const override { return host_.num_free(); }
  int num_blocks_to_swap(std::span<const SeqId> seqs) const override;
  bool swap_out(std::span<const SeqId> seqs, std::vector<KvCopy>* copies) override;
  bool can_swap_in(std::span<const SeqId> seqs) const override;
  bool swap_in(std::span<const SeqId> seqs, std::vector<KvCopy>* copies) override;
  bool is_swapped(SeqId seq) const override;

  const KvCacheStats& stats() const override { return stats_; }
  Status check_invariants() const override;

  // For tests.
  const TokenPool& pool() const { return pool_; }
  int cached_tokens() const { return tree_.stored_tokens(); }

 private:
  struct SeqState {
    std::vector<int32_t> slots;   // device slots, or host slots while swapped
    RadixNode* node = nullptr;    // locked radix node covering tokens [0, node_len)
    int node_len = 0;
    std::string salt;
    bool swapped = false;
  };
  SeqState& state(SeqId seq);
  const SeqState& state(SeqId seq) const;
  // Allocates k device slots, evicting cached tokens first if needed. Requires k <= free.
  void allocate(int k, std::vector<int32_t>* out);
  void unlock(SeqState& s);
  std::vector<int32_t> distinct_slots(std::span<const SeqId> seqs) const;

  bool prefix_caching_;
  TokenPool pool_;
  BlockPool host_;
  RadixTree tree_;
  std::unordered_map<SeqId, SeqState> seqs_;
  KvCacheStats stats_;
};

}  // namespace folio
