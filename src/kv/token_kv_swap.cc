// TokenKvCacheManager: swap space and invariant checks.
#include <map>
#include <string>
#include <unordered_map>

#include "base/check.h"
#include "kv/token_kv_cache_manager.h"

namespace folio {

std::vector<int32_t> TokenKvCacheManager::distinct_slots(std::span<const SeqId> seqs) const {
  std::vector<int32_t> out;
  std::unordered_map<int32_t, bool> seen;
  for (SeqId id : seqs)
    for (int32_t slot : state(id).slots)
      if (seen.emplace(slot, true).second) out.push_back(slot);
  return out;
}

int TokenKvCacheManager::num_blocks_to_swap(std::span<const SeqId> seqs) const {
  return static_cast<int>(distinct_slots(seqs).size());
}

bool TokenKvCacheManager::swap_out(std::span<const SeqId> seqs, std::vector<KvCopy>* copies) {
  std::vector<int32_t> dev = distinct_slots(seqs);
  if (static_cast<int>(dev.size()) > host_.num_free()) return false;
  std::unordered_map<int32_t, int32_t> to_host;
  for (int32_t d : dev) {
    int32_t h = host_.allocate();
    to_host.emplace(d, h);
    copies->push_back({d, h});
  }
  for (SeqId id : seqs) {
    SeqState& s = state(id);
    FOLIO_CHECK(!s.swapped, "swapping out a swapped sequence");
    // The radix tree keeps its own references; this sequence re-enters it after swap-in.
    unlock(s);
    pool_.release(s.slots);
    for (int32_t& slot : s.slots) {
      slot = to_host.at(slot);
      host_.incref(slot);
    }
    s.swapped = true;
  }
  for (const auto& [d, h] : to_host) host_.decref(h, false);  // drop the allocation's reference
  stats_.swapped_out_blocks += static_cast<int64_t>(dev.size());
  return true;
}

bool TokenKvCacheManager::can_swap_in(std::span<const SeqId> seqs) const {
  return num_blocks_to_swap(seqs) <= num_free_blocks();
}

bool TokenKvCacheManager::swap_in(std::span<const SeqId> seqs, std::vector<KvCopy>* copies) {
  std::vector<int32_t> host = distinct_slots(seqs);
  if (static_cast<int>(host.size()) > num_free_blocks()) return false;
  std::vector<int32_t> dev;
  allocate(static_cast<int>(host.size()), &dev);  // one contiguous run when possible
  std::unordered_map<int32_t, int32_t> to_dev;
  for (size_t i = 0; i < host.size(); ++i) {
    to_dev.emplace(host[i], dev[i]);
    copies->push_back({host[i], dev[i]});
  }
  for (SeqId id : seqs) {
    SeqState& s = state(id);
    FOLIO_CHECK(s.swapped, "swapping in a resident sequence");
    for (int32_t& slot : s.slots) {
      host_.decref(slot, false);
      slot = to_dev.at(slot);
      pool_.incref(slot);
    }
    s.swapped = false;
  }
  pool_.release(dev);  // drop the allocation's reference
  stats_.swapped_in_blocks += static_cast<int64_t>(host.size());
  return true;
}

Status TokenKvCacheManager::check_invariants() const {
  FOLIO_RETURN_IF_ERROR(pool_.check());
  FOLIO_RETURN_IF_ERROR(host_.check());
  std::map<const RadixNode*, int> held;
  std::vector<int> refs(static_cast<size_t>(pool_.num_slots()), 0);
  std::vector<int> host_refs(static_cast<size_t>(host_.num_blocks()), 0);
  for (const auto& [id, s] : seqs_) {
    if (s.node) ++held[s.node];
    if (s.node_len > static_cast<int>(s.slots.size()))
      return internal_error("seq " + std::to_string(id) + " caches tokens it does not hold");
    for (int32_t slot : s.slots) ++(s.swapped ? host_refs : refs)[slot];
  }
  FOLIO_RETURN_IF_ERROR(tree_.check(held));
  Status unlocked_shared = Status::ok_status();
  tree_.for_each_node([&](const RadixNode& n) {
    for (int32_t slot : n.slots) {
      ++refs[slot];
      if (n.lock_ref == 0 && pool_.ref_count(slot) != 1)
        unlocked_shared = internal_error("evictable slot " + std::to_string(slot) +
                                         " is also held by a sequence (ref " + std::to_string(pool_.ref_count(slot)) + ", node len " + std::to_string(n.tokens.size()) + ")");
    }
  });
  FOLIO_RETURN_IF_ERROR(unlocked_shared);
  for (int32_t slot = 0; slot < pool_.num_slots(); ++slot)
    if (refs[slot] != pool_.ref_count(slot))
      return internal_error("slot " + std::to_string(slot) + " has ref count " +
                            std::to_string(pool_.ref_count(slot)) + " but " +
                            std::to_string(refs[slot]) + " references");
  for (int32_t b = 0; b < host_.num_blocks(); ++b)
    if (host_refs[b] != host_.ref_count(b))
      return internal_error("host slot " + std::to_string(b) + " ref count mismatch");
  return Status::ok_status();
}

}  // namespace folio
