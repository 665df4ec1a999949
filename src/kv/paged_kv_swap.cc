// PagedKvCacheManager: swap space and invariant checks (the allocation path is in
// paged_kv_cache_manager.cc).
#include <algorithm>
#include <span>
#include <string>
#include <unordered_map>

#include "base/check.h"
#include "kv/paged_kv_cache_manager.h"

namespace folio {
namespace {

// Moves the held entries of every table of `seqs` from pool `from` to pool `to`, one new block
// per distinct old block so sharing is kept. `release` drops one reference in `from`; `on_new`
// sees each copy.
template <typename Release, typename OnNew>
void move_tables(std::vector<std::span<int32_t>>& tables, BlockPool& to, Release release,
                 OnNew on_new) {
  std::unordered_map<int32_t, int32_t> moved;
  for (std::span<int32_t> table : tables) {
    for (int32_t b : table) {
      auto [it, fresh] = moved.try_emplace(b, -1);
      if (fresh) {
        it->second = to.allocate();  // ref 1 for this first use
        on_new(b, it->second);
      } else {
        to.incref(it->second);
      }
    }
  }
  for (std::span<int32_t> table : tables) {
    for (auto b = table.rbegin(); b != table.rend(); ++b) {
      release(*b);
      *b = moved.at(*b);
    }
  }
}

}  // namespace

std::vector<int32_t> PagedKvCacheManager::distinct_blocks(std::span<const SeqId> seqs) const {
  std::vector<int32_t> out;
  std::unordered_map<int32_t, bool> seen;
  for (SeqId id : seqs)
    for (int32_t b : held(state(id)))
      if (seen.emplace(b, true).second) out.push_back(b);
  return out;
}

int PagedKvCacheManager::num_blocks_to_swap(std::span<const SeqId> seqs) const {
  return static_cast<int>(distinct_blocks(seqs).size());
}

bool PagedKvCacheManager::swap_out(std::span<const SeqId> seqs, std::vector<KvCopy>* copies) {
  if (num_blocks_to_swap(seqs) > host_.num_free()) return false;
  std::vector<std::span<int32_t>> tables;
  for (SeqId id : seqs) {
    SeqState& s = state(id);
    FOLIO_CHECK(!s.swapped, "swapping out a swapped sequence");
    tables.push_back(held(s));
    s.swapped = true;
  }
  move_tables(
      tables, host_, [this](int32_t b) { release_block(b); },
      [&](int32_t dev, int32_t host) {
        copies->push_back({dev, host});
        ++stats_.swapped_out_blocks;
      });
  return true;
}

bool PagedKvCacheManager::can_swap_in(std::span<const SeqId> seqs) const {
  return num_blocks_to_swap(seqs) <= pool_.num_free();
}

bool PagedKvCacheManager::swap_in(std::span<const SeqId> seqs, std::vector<KvCopy>* copies) {
  if (!can_swap_in(seqs)) return false;
  std::vector<std::span<int32_t>> tables;
  for (SeqId id : seqs) {
    SeqState& s = state(id);
    FOLIO_CHECK(s.swapped, "swapping in a resident sequence");
    tables.push_back(held(s));
    s.swapped = false;
  }
  // Fresh device blocks may evict cached ones; move_tables allocates through the pool directly,
  // so evict cache entries of the blocks it is about to take first.
  move_tables(
      tables, pool_, [this](int32_t b) { host_.decref(b, false); },
      [&](int32_t host, int32_t dev) {
        if (cache_.is_cached(dev)) {
          cache_.evict(dev);
          ++stats_.evictions;
        }
        fill_[dev] = 0;
        ++stats_.blocks_allocated;
        copies->push_back({host, dev});
        ++stats_.swapped_in_blocks;
      });
  for (SeqId id : seqs) {
    SeqState& s = state(id);
    for (size_t i = static_cast<size_t>(s.num_skipped); i < s.table.size(); ++i)
      set_fill(s.table[i], std::min(block_size_, s.num_reserved - static_cast<int>(i) * block_size_));
  }
  return true;
}

Status PagedKvCacheManager::check_invariants() const {
  FOLIO_RETURN_IF_ERROR(pool_.check());
  FOLIO_RETURN_IF_ERROR(host_.check());
  FOLIO_RETURN_IF_ERROR(cache_.check());
  std::vector<int> dev_refs(static_cast<size_t>(pool_.num_blocks()), 0);
  std::vector<int> host_refs(static_cast<size_t>(host_.num_blocks()), 0);
  for (const auto& [id, s] : seqs_) {
    size_t want = static_cast<size_t>((s.num_reserved + block_size_ - 1) / block_size_);
    if (s.table.size() != want)
      return internal_error("seq " + std::to_string(id) + " has " +
                            std::to_string(s.table.size()) + " blocks for " +
                            std::to_string(s.num_reserved) + " tokens");
    if (s.chain.num_blocks > static_cast<int>(s.table.size()))
      return internal_error("seq " + std::to_string(id) + " caches blocks it does not hold");
    if (s.num_skipped < 0 || s.num_skipped > static_cast<int>(s.table.size()) ||
        (s.num_skipped > 0 && sliding_window_ <= 0))
      return internal_error("seq " + std::to_string(id) + " skips a bad number of blocks");
    for (int i = 0; i < s.num_skipped; ++i)
      if (s.table[static_cast<size_t>(i)] != kNullBlock)
        return internal_error("seq " + std::to_string(id) + " holds a block below its window");
    for (int32_t b : held(s)) ++(s.swapped ? host_refs : dev_refs)[b];
  }
  if (num_reserved_blocks_) ++dev_refs[kNullBlock];  // the manager's own reference
  int64_t filled = 0;
  for (int32_t b = 0; b < pool_.num_blocks(); ++b) {
    if (dev_refs[b] != pool_.ref_count(b))
      return internal_error("block " + std::to_string(b) + " has ref count " +
                            std::to_string(pool_.ref_count(b)) + " but " +
                            std::to_string(dev_refs[b]) + " table references");
    if (fill_[b] < 0 || fill_[b] > block_size_ || (pool_.is_free(b) && fill_[b] != 0))
      return internal_error("block " + std::to_string(b) + " has a bad fill");
    filled += fill_[b];
  }
  if (filled != filled_) return internal_error("filled slot count drifted");
  for (int32_t b = 0; b < host_.num_blocks(); ++b)
    if (host_refs[b] != host_.ref_count(b))
      return internal_error("host block " + std::to_string(b) + " ref count mismatch");
  return Status::ok_status();
}

}  // namespace folio
