// TokenPool: LightLLM TokenAttention's KV pool of `num_slots` single-token slots, preallocated,
// with reference counts (forks and the radix tree share slots).
//
// Free slots are kept as maximal runs [start, start + len), indexed by start (to coalesce on
// free) and by (len, start) (best fit). allocate(k) hands out one contiguous run when any free
// run is long enough (the smallest such run, lowest start on ties, so long runs survive for long
// requests); otherwise it gathers slots from the longest runs first (fewest fragments).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "base/status.h"

namespace folio {

class TokenPool {
 public:
  explicit TokenPool(int num_slots);

  int num_slots() const { return static_cast<int>(ref_.size()); }
  int num_free() const { return num_free_; }
  int largest_free_run() const;
  int num_free_runs() const { return static_cast<int>(runs_.size()); }

  // Appends k slots (ref count 1 each) to `out`. Requires k <= num_free().
  void allocate(int k, std::vector<int32_t>* out);
  void incref(int32_t slot) { ++ref_[static_cast<size_t>(slot)]; }
  // Drops one reference from each slot; slots reaching 0 return to the free runs together
  // (sorted and coalesced, O(k log k + runs)).
  void release(std::span<const int32_t> slots);

  int ref_count(int32_t slot) const { return ref_[static_cast<size_t>(slot)]; }
  // Runs are disjoint, maximal, and hold exactly the slots with count 0.
  Status check() const;

 private:
  void add_run(int32_t start, int32_t len);  // coalescing with neighbours
  void remove_run(std::map<int32_t, int32_t>::iterator it);
  void take_from_run(int32_t start, int32_t len, int k, std::vector<int32_t>* out);

  std::vector<int32_t> ref_;
  std::map<int32_t, int32_t> runs_;              // start -> len
  std::set<std::pair<int32_t, int32_t>> by_len_;  // (len, start)
  int num_free_ = 0;
};

}  // namespace folio
