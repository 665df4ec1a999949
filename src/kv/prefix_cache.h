// PrefixCache: content index over full device blocks (paged mode), vLLM's automatic prefix
// caching with a safety net against hash collisions.
//
// A block's key is a chained hash: hash(parent key, its block_size token ids, extra key such as
// a per-request cache salt). Every entry also stores its tokens, its salt and the unique id of
// its parent entry, and a lookup accepts a block only if all three match. By induction a hit
// therefore holds exactly the K/V of the same token prefix, even when the hash function
// collides (the hash function is injectable so tests can force collisions). Entry ids are never
// reused, so an entry whose parent was evicted can no longer be reached.
// Owns no blocks: the manager keeps ref counts in a BlockPool and tells the cache when a cached
// block is evicted (reallocated).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "core/sequence.h"

namespace folio {

using BlockHashFn =
    std::function<uint64_t(uint64_t parent, std::span<const TokenId> tokens, std::string_view extra)>;

// XXH3-64 over (parent, the tokens' bytes, the extra key's length and bytes).
uint64_t default_block_hash(uint64_t parent, std::span<const TokenId> tokens,
                            std::string_view extra);

// Where a sequence's chain of cached blocks stands: the key and entry id of its last block
// (kRootId/kRootHash before any block).
struct PrefixChain {
  static constexpr uint64_t kRootId = 0;
  static constexpr uint64_t kRootHash = 0x9e3779b97f4a7c15ull;
  uint64_t parent_id = kRootId;
  uint64_t parent_hash = kRootHash;
  int num_blocks = 0;    // leading blocks of the table the chain accounts for
  bool broken = false;   // a collision with a block in use: cache nothing more for this sequence
};

class PrefixCache {
 public:
  PrefixCache(int num_blocks, BlockHashFn hash_fn);

  // The cached block holding `tokens` right after `chain`, or -1.
  int32_t lookup(const PrefixChain& chain, std::span<const TokenId> tokens,
                 std::string_view salt) const;
  // Advances `chain` past cached block `block` (a hit).
  void follow(PrefixChain* chain, int32_t block) const;

  // `block` now holds `tokens` after `chain`; registers it and advances the chain. An identical
  // entry already there (another sequence computed the same prefix) is followed instead and
  // `block` stays uncached. A colliding entry of a free block (`is_free`) is dropped for this
  // one; one in use breaks the chain.
  void insert(PrefixChain* chain, int32_t block, std::span<const TokenId> tokens,
              std::string_view salt, const std::function<bool(int32_t)>& is_free);
  // Forgets `block`'s entry (the block is being reallocated). No-op if it has none.
  void evict(int32_t block);

  bool is_cached(int32_t block) const { return entries_[static_cast<size_t>(block)].id != 0; }
  int num_cached() const { return static_cast<int>(map_.size()); }
  // Every map entry points at a block whose stored tokens rehash to its key.
  Status check() const;

 private:
  struct Entry {
    uint64_t id = 0;  // 0: not cached
    uint64_t hash = 0, parent_hash = 0, parent_id = 0;
    std::vector<TokenId> tokens;
    std::string salt;
  };
  bool matches(const Entry& e, const PrefixChain& chain, std::span<const TokenId> tokens,
               std::string_view salt) const;

  BlockHashFn hash_fn_;
  std::vector<Entry> entries_;  // by block id
  std::unordered_map<uint64_t, int32_t> map_;
  uint64_t next_id_ = 1;
};

}  // namespace folio
