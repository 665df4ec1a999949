#include "kv/paged_kv_cache_manager.h"

#include <algorithm>

#include "base/check.h"

namespace folio {

PagedKvCacheManager::PagedKvCacheManager(const PagedKvConfig& config)
    : block_size_(config.block_size),
      prefix_caching_(config.enable_prefix_caching),
      sliding_window_(config.sliding_window),
      num_reserved_blocks_(config.sliding_window > 0 ? 1 : 0),
      pool_(config.num_blocks),
      host_(config.num_host_blocks),
      cache_(config.num_blocks, config.hash_fn),
      fill_(static_cast<size_t>(config.num_blocks), 0) {
  FOLIO_CHECK(config.block_size > 0 && config.num_blocks >= 0 && config.num_host_blocks >= 0);
  FOLIO_CHECK(config.sliding_window >= 0);
  if (num_reserved_blocks_) {
    FOLIO_CHECK(config.num_blocks > 1, "a sliding window needs a pool of 2 blocks or more");
    FOLIO_CHECK(pool_.allocate() == kNullBlock);  // the fresh pool hands out ids in order
  }
}

PagedKvCacheManager::SeqState& PagedKvCacheManager::state(SeqId seq) {
  auto it = seqs_.find(seq);
  FOLIO_CHECK(it != seqs_.end(), "unknown sequence");
  return it->second;
}

const PagedKvCacheManager::SeqState& PagedKvCacheManager::state(SeqId seq) const {
  auto it = seqs_.find(seq);
  FOLIO_CHECK(it != seqs_.end(), "unknown sequence");
  return it->second;
}

int32_t PagedKvCacheManager::allocate_block() {
  int32_t b = pool_.allocate();
  if (cache_.is_cached(b)) {
    cache_.evict(b);
    ++stats_.evictions;
  }
  fill_[b] = 0;
  ++stats_.blocks_allocated;
  return b;
}

void PagedKvCacheManager::release_block(int32_t block) {
  int fill = fill_[block];
  if (pool_.decref(block, cache_.is_cached(block))) {
    filled_ -= fill;
    fill_[block] = 0;
  }
}

void PagedKvCacheManager::set_fill(int32_t block, int fill) {
  if (fill > fill_[block]) {
    filled_ += fill - fill_[block];
    fill_[block] = fill;
  }
}

int PagedKvCacheManager::get_computed_prefix(SeqId seq, std::span<const TokenId> tokens,
                                             std::string_view cache_salt) {
  FOLIO_CHECK(!has_seq(seq), "sequence registered twice");
  SeqState& s = seqs_[seq];
  s.salt.assign(cache_salt);
  if (!prefix_caching_ || tokens.empty()) return 0;
  stats_.prefix_query_tokens += static_cast<int64_t>(tokens.size());
  // Leave at least one token to compute: its logits are what the step samples from.
  const size_t max_blocks = (tokens.size() - 1) / static_cast<size_t>(block_size_);
  for (size_t i = 0; i < max_blocks; ++i) {
    auto block_tokens = tokens.subspan(i * block_size_, static_cast<size_t>(block_size_));
    int32_t b = cache_.lookup(s.chain, block_tokens, s.salt);
    if (b < 0) break;
    bool was_free = pool_.is_free(b);
    pool_.incref(b);
    if (was_free) set_fill(b, block_size_);
    cache_.follow(&s.chain, b);
    s.table.push_back(b);
    ++stats_.blocks_shared;
  }
  s.num_reserved = static_cast<int>(s.table.size()) * block_size_;
  stats_.prefix_hit_tokens += s.num_reserved;
  return s.num_reserved;
}

int PagedKvCacheManager::num_blocks_needed(SeqId seq, int num_tokens) const {
  const SeqState& s = state(seq);
  if (num_tokens <= s.num_reserved) return 0;
  const BlockPool& pool = s.swapped ? host_ : pool_;
  int cow = (s.num_reserved % block_size_ != 0 && pool.ref_count(s.table.back()) > 1) ? 1 : 0;
  int blocks = (num_tokens + block_size_ - 1) / block_size_;
  return cow + std::max(0, blocks - static_cast<int>(s.table.size()));
}

bool PagedKvCacheManager::append_slots(SeqId seq, int num_tokens) {
  SeqState& s = state(seq);
  FOLIO_CHECK(!s.swapped, "append to a swapped-out sequence");
  if (num_tokens <= s.num_reserved) return true;
  if (num_blocks_needed(seq, num_tokens) > pool_.num_free()) return false;
  if (s.num_reserved % block_size_ != 0 && pool_.ref_count(s.table.back()) > 1) {
    // Copy-on-write: the shared last block is partly filled and we are about to write into it.
    int32_t old = s.table.back();
    int32_t fresh = allocate_block();
    pending_copies_.push_back({old, fresh});
    ++stats_.cow_copies;
    release_block(old);
    s.table.back() = fresh;
    set_fill(fresh, s.num_reserved % block_size_);
  }
  const size_t blocks = static_cast<size_t>((num_tokens + block_size_ - 1) / block_size_);
  while (s.table.size() < blocks) s.table.push_back(allocate_block());
  for (size_t i = static_cast<size_t>(s.num_reserved / block_size_); i < blocks; ++i)
    set_fill(s.table[i], std::min(block_size_, num_tokens - static_cast<int>(i) * block_size_));
  s.num_reserved = num_tokens;
  return true;
}

void PagedKvCacheManager::fork(SeqId parent, SeqId child) {
  FOLIO_CHECK(!has_seq(child), "fork into an existing sequence");
  SeqState copy = state(parent);
  BlockPool& pool = copy.swapped ? host_ : pool_;
  for (int32_t b : held(copy)) pool.incref(b);
  stats_.blocks_shared += static_cast<int64_t>(held(copy).size());
  seqs_.emplace(child, std::move(copy));
}

void PagedKvCacheManager::free(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  SeqState& s = it->second;
  // Last block first: with equal age, the deeper blocks of a chain are evicted before their
  // parents (a child is useless without its parent).
  const std::span<int32_t> blocks = held(s);
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) {
    if (s.swapped) {
      host_.decref(*b, false);
    } else {
      release_block(*b);
    }
  }
  seqs_.erase(it);
}

void PagedKvCacheManager::mark_computed(SeqId seq, std::span<const TokenId> tokens,
                                        int num_computed) {
  SeqState& s = state(seq);
  if (!prefix_caching_ || s.swapped) return;
  FOLIO_CHECK(num_computed <= s.num_reserved && num_computed <= static_cast<int>(tokens.size()));
  const int full = num_computed / block_size_;
  auto is_free = [this](int32_t b) { return pool_.is_free(b); };
  while (s.chain.num_blocks < full && !s.chain.broken) {
    size_t i = static_cast<size_t>(s.chain.num_blocks);
    if (s.chain.num_blocks < s.num_skipped) {  // freed before it was cached: the chain ends
      s.chain.broken = true;
      break;
    }
    cache_.insert(&s.chain, s.table[i],
                  tokens.subspan(i * block_size_, static_cast<size_t>(block_size_)), s.salt,
                  is_free);
  }
}

std::span<const int32_t> PagedKvCacheManager::block_table(SeqId seq) const {
  return state(seq).table;
}

void PagedKvCacheManager::free_out_of_window(SeqId seq, int num_computed) {
  if (sliding_window_ <= 0) return;
  SeqState& s = state(seq);
  // The next query (position num_computed) reads keys from num_computed - window + 1 on; block
  // i is wholly below that when (i + 1) * block_size <= num_computed - window + 1.
  const int first_needed = num_computed - sliding_window_ + 1;
  const int skip =
      std::min(std::max(0, first_needed) / block_size_, static_cast<int>(s.table.size()));
  // Lowest block last: with equal age, LRU eviction then takes the deeper blocks of a chain
  // first, as in free().
  for (int i = skip - 1; i >= s.num_skipped; --i) {
    int32_t& b = s.table[static_cast<size_t>(i)];
    if (s.swapped) {
      host_.decref(b, false);
    } else {
      release_block(b);
    }
    b = kNullBlock;
  }
  s.num_skipped = std::max(s.num_skipped, skip);
}

int PagedKvCacheManager::num_held_blocks(SeqId seq) const {
  return static_cast<int>(held(state(seq)).size());
}

std::vector<KvCopy> PagedKvCacheManager::take_pending_copies() {
  std::vector<KvCopy> out;
  out.swap(pending_copies_);
  return out;
}

bool PagedKvCacheManager::is_swapped(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it != seqs_.end() && it->second.swapped;
}

}  // namespace folio
