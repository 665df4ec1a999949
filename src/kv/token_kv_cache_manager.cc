#include "kv/token_kv_cache_manager.h"

#include <algorithm>
#include <map>
#include <unordered_set>

#include "base/check.h"

namespace folio {

TokenKvCacheManager::TokenKvCacheManager(const TokenKvConfig& config)
    : prefix_caching_(config.enable_prefix_caching),
      pool_(config.max_total_tokens),
      host_(config.num_host_slots) {}

TokenKvCacheManager::SeqState& TokenKvCacheManager::state(SeqId seq) {
  auto it = seqs_.find(seq);
  FOLIO_CHECK(it != seqs_.end(), "unknown sequence");
  return it->second;
}

const TokenKvCacheManager::SeqState& TokenKvCacheManager::state(SeqId seq) const {
  auto it = seqs_.find(seq);
  FOLIO_CHECK(it != seqs_.end(), "unknown sequence");
  return it->second;
}

void TokenKvCacheManager::allocate(int k, std::vector<int32_t>* out) {
  if (pool_.num_free() < k) {
    std::vector<int32_t> dropped;
    tree_.evict(k - pool_.num_free(), &dropped);
    stats_.evictions += static_cast<int64_t>(dropped.size());
    pool_.release(dropped);
  }
  pool_.allocate(k, out);
  stats_.blocks_allocated += k;
}

void TokenKvCacheManager::unlock(SeqState& s) {
  if (s.node) tree_.unlock(s.node);
  s.node = nullptr;
  s.node_len = 0;
}

int TokenKvCacheManager::get_computed_prefix(SeqId seq, std::span<const TokenId> tokens,
                                             std::string_view cache_salt) {
  FOLIO_CHECK(!has_seq(seq), "sequence registered twice");
  SeqState& s = seqs_[seq];
  s.salt.assign(cache_salt);
  if (!prefix_caching_ || tokens.empty()) return 0;
  stats_.prefix_query_tokens += static_cast<int64_t>(tokens.size());
  // Leave at least one token to compute: its logits are what the step samples from.
  auto [node, len] = tree_.match(s.salt, tokens, static_cast<int>(tokens.size()) - 1, &s.slots);
  for (int32_t slot : s.slots) pool_.incref(slot);
  if (len > 0) {
    tree_.lock(node);
    s.node = node;
    s.node_len = len;
  }
  stats_.prefix_hit_tokens += len;
  stats_.blocks_shared += len;
  return len;
}

int TokenKvCacheManager::num_blocks_needed(SeqId seq, int num_tokens) const {
  return std::max(0, num_tokens - static_cast<int>(state(seq).slots.size()));
}

bool TokenKvCacheManager::append_slots(SeqId seq, int num_tokens) {
  SeqState& s = state(seq);
  FOLIO_CHECK(!s.swapped, "append to a swapped-out sequence");
  int need = num_blocks_needed(seq, num_tokens);
  if (need > num_free_blocks()) return false;
  allocate(need, &s.slots);
  return true;
}

void TokenKvCacheManager::fork(SeqId parent, SeqId child) {
  FOLIO_CHECK(!has_seq(child), "fork into an existing sequence");
  SeqState copy = state(parent);
  for (int32_t slot : copy.slots) {
    if (copy.swapped) {
      host_.incref(slot);
    } else {
      pool_.incref(slot);
    }
  }
  if (copy.node) tree_.lock(copy.node);
  stats_.blocks_shared += static_cast<int64_t>(copy.slots.size());
  seqs_.emplace(child, std::move(copy));
}

void TokenKvCacheManager::free(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  SeqState& s = it->second;
  unlock(s);
  if (s.swapped) {
    for (int32_t slot : s.slots) host_.decref(slot, false);
  } else {
    pool_.release(s.slots);
  }
  seqs_.erase(it);
}

void TokenKvCacheManager::mark_computed(SeqId seq, std::span<const TokenId> tokens,
                                        int num_computed) {
  SeqState& s = state(seq);
  if (!prefix_caching_ || s.swapped || num_computed <= s.node_len) return;
  FOLIO_CHECK(num_computed <= static_cast<int>(s.slots.size()));
  // The tree adopts only slots this sequence holds alone. A slot also held by a fork sibling
  // (forked before this range was inserted, e.g. right after a swap-in) would sit in a node the
  // sibling does not lock and be counted evictable while in use; it is cached later, once the
  // sibling lets go.
  for (int p = s.node_len; p < num_computed; ++p) {
    if (pool_.ref_count(s.slots[static_cast<size_t>(p)]) > 1) {
      num_computed = p;
      break;
    }
  }
  if (num_computed <= s.node_len) return;
  std::vector<int32_t> stored;
  RadixNode* node = tree_.insert(s.salt, s.node, s.node_len, tokens.first(num_computed),
                                 std::span<const int32_t>(s.slots).first(num_computed), &stored);
  for (int32_t slot : stored) pool_.incref(slot);
  if (node != s.node) {
    tree_.lock(node);
    if (s.node) tree_.unlock(s.node);
    s.node = node;
  }
  s.node_len = num_computed;
}

std::span<const int32_t> TokenKvCacheManager::block_table(SeqId seq) const {
  return state(seq).slots;
}

bool TokenKvCacheManager::is_swapped(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it != seqs_.end() && it->second.swapped;
}

}  // namespace folio
