// KvCacheManager: which physical KV blocks (paged mode) or token slots (token mode) each sequence
// owns. Pure host bookkeeping: no device, clock or randomness; driven by the scheduler on the
// engine thread only.
//
// A sequence's block table maps its logical blocks to physical ids; logical block i holds
// positions [i * block_size(), (i + 1) * block_size()). Token mode is block_size() == 1, where an
// id is a slot. Sharing (forks, prefix-cache hits) is by reference count. Contract of a step:
//   1. new sequence: get_computed_prefix() registers it and returns how many leading tokens
//      already have K/V (a prefix-cache hit; always < the number of tokens given);
//   2. append_slots(seq, n) gives it room for positions [0, n), or returns false and changes
//      nothing; num_blocks_needed() tells beforehand what that costs (so a whole group can be
//      checked at once);
//   3. the engine applies, in this order, swap-out copies, swap-in copies and
//      take_pending_copies() (copy-on-write), then runs the model;
//   4. mark_computed() makes the full blocks (or tokens) that now hold K/V reusable by others.
//      The scheduler calls it as soon as it schedules them (vLLM V1's order): a reader in the
//      same step runs after the step's K/V writes, a reader in a later step after the step.
// With a sliding window (every layer attends to the last W positions only), the scheduler calls
// free_out_of_window() before step 2: blocks below the window of the step's first query go back
// to the pool and their table entries read kNullBlock (vLLM V1's SlidingWindowManager).
// Every id in a returned copy list is valid until the next call that allocates.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "core/sequence.h"

namespace folio {

// One (src, dst) copy: device -> device (copy-on-write), device -> host (swap out) or
// host -> device (swap in). The engine converts it to backend's BlockCopy; kv does not depend on
// backend. In token mode the ids are slots.
struct KvCopy {
  int32_t src = 0;
  int32_t dst = 0;
  bool operator==(const KvCopy&) const = default;
};

struct KvCacheStats {
  int64_t prefix_query_tokens = 0;  // tokens looked up in the prefix cache
  int64_t prefix_hit_tokens = 0;    // of those, tokens served from the cache
  int64_t blocks_allocated = 0;     // fresh device blocks/slots handed out (incl. copy-on-write)
  int64_t blocks_shared = 0;        // allocations avoided by sharing (forks, prefix hits)
  int64_t cow_copies = 0;
  int64_t evictions = 0;            // cached blocks/tokens evicted to make room
  int64_t swapped_out_blocks = 0;
  int64_t swapped_in_blocks = 0;
};

class KvCacheManager {
 public:
  virtual ~KvCacheManager() = default;

  virtual int block_size() const = 0;
  virtual int num_total_blocks() const = 0;
  // Blocks an allocation can obtain now, counting cached blocks nobody references (evictable).
  virtual int num_free_blocks() const = 0;
  // Blocks referenced by at least one sequence (cached-but-unreferenced ones are free).
  virtual int num_used_blocks() const = 0;
  // Token slots in used blocks that hold (or will hold this step) a token; / used slots is the
  // utilization (paged mode wastes the tail of each last block, token mode nothing).
  virtual int64_t num_filled_slots() const = 0;
  double usage() const {
    return num_total_blocks() ? 1.0 - double(num_free_blocks()) / num_total_blocks() : 0.0;
  }

  virtual bool has_seq(SeqId seq) const = 0;
  // Registers `seq` (which must be unknown) and shares the longest cached prefix of `tokens`
  // (extra key `cache_salt`). Returns the number of cached tokens, < tokens.size().
  virtual int get_computed_prefix(SeqId seq, std::span<const TokenId> tokens,
                                  std::string_view cache_salt) = 0;
  // New blocks append_slots(seq, num_tokens) would take (copy-on-write included). Conservative
  // for a group: two sequences sharing one partial block are each counted for a copy.
  virtual int num_blocks_needed(SeqId seq, int num_tokens) const = 0;
  // Makes room for positions [0, num_tokens). False (and no change) when out of blocks.
  virtual bool append_slots(SeqId seq, int num_tokens) = 0;
  // `child` (unknown) shares all of `parent`'s blocks.
  virtual void fork(SeqId parent, SeqId child) = 0;
  // Drops the sequence and its references (device or host). Unknown ids are ignored.
  virtual void free(SeqId seq) = 0;
  // tokens[0, num_computed) now have K/V: full blocks become prefix-cache entries.
  virtual void mark_computed(SeqId seq, std::span<const TokenId> tokens, int num_computed) = 0;
  virtual std::span<const int32_t> block_table(SeqId seq) const = 0;
  virtual std::vector<KvCopy> take_pending_copies() = 0;

  // The table entry of a block a sequence no longer holds because it fell out of the window: a
  // block the manager reserves and never hands out, so a kernel that reads a whole page around
  // the window's edge (masking the positions below it) reads memory no one writes.
  static constexpr int32_t kNullBlock = 0;
  // Window managers only (a no-op elsewhere): positions below num_computed - window + 1 are
  // never read again (the next query is at num_computed and attends to the window before it),
  // so the blocks wholly below them are released (full ones stay in the prefix cache, evictable)
  // and their entries become kNullBlock. Works on resident and swapped sequences.
  virtual void free_out_of_window(SeqId seq, int num_computed) {
    (void)seq;
    (void)num_computed;
  }
  // Blocks `seq` holds a reference to: its table less the entries freed out of the window.
  virtual int num_held_blocks(SeqId seq) const { return static_cast<int>(block_table(seq).size()); }

  // Swap space (host pool). Sharing is kept: a block several of `seqs` share moves once.
  virtual int num_free_host_blocks() const = 0;
  // Distinct blocks swap_out(seqs) would move.
  virtual int num_blocks_to_swap(std::span<const SeqId> seqs) const = 0;
  // Device -> host. False (no change) when the host pool is too small.
  virtual bool swap_out(std::span<const SeqId> seqs, std::vector<KvCopy>* copies) = 0;
  virtual bool can_swap_in(std::span<const SeqId> seqs) const = 0;
  // Host -> device into fresh blocks. False (no change) when the device is too full.
  virtual bool swap_in(std::span<const SeqId> seqs, std::vector<KvCopy>* copies) = 0;
  virtual bool is_swapped(SeqId seq) const = 0;

  virtual const KvCacheStats& stats() const = 0;
  // Ref counts equal table references, free/used sets partition the pool, cache entries hold
  // exactly their tokens. Costs O(pool + tables); for tests and debug builds.
  virtual Status check_invariants() const = 0;
};

}  // namespace folio
