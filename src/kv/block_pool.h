// BlockPool: reference counts over `num_blocks` block ids and the free list, an intrusive doubly
// linked list over index arrays (no allocation after construction).
//
// Free-list order is eviction order: allocate() takes the head; a block whose count falls to 0
// goes to the tail when it still holds something worth keeping (a prefix-cache entry: least
// recently used is evicted first) or to the head when it holds nothing (reused before any cached
// block). incref() on a free block (a cache hit) unlinks it from the middle in O(1).
// Used for the device pool (with a PrefixCache beside it) and for the host swap pool.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace folio {

class BlockPool {
 public:
  explicit BlockPool(int num_blocks);

  int num_blocks() const { return static_cast<int>(ref_.size()); }
  int num_free() const { return num_free_; }
  int num_used() const { return num_blocks() - num_free_; }

  // Takes the head of the free list (the least recently used). Requires num_free() > 0.
  // The block comes back with ref count 1.
  int32_t allocate();
  // Adds a reference; a free block is unlinked from the free list first.
  void incref(int32_t block);
  // Drops a reference. Returns true when the block became free; it is then linked at the tail
  // (keep_cached) or the head.
  bool decref(int32_t block, bool keep_cached);

  int ref_count(int32_t block) const { return ref_[static_cast<size_t>(block)]; }
  bool is_free(int32_t block) const { return ref_count(block) == 0; }
  // Free blocks from head (evicted first) to tail.
  std::vector<int32_t> free_list() const;
  // The free list is a well-formed cycle holding exactly the blocks with count 0.
  Status check() const;

 private:
  void link_before(int32_t node, int32_t block);
  void unlink(int32_t block);

  std::vector<int32_t> ref_;
  std::vector<int32_t> prev_, next_;  // size num_blocks + 1; index num_blocks is the sentinel
  int32_t sentinel_;
  int num_free_;
};

}  // namespace folio
