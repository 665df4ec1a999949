#include "kv/prefix_cache.h"

#include <algorithm>
#include <cstring>

#include <xxhash.h>

#include "base/check.h"

namespace folio {

uint64_t default_block_hash(uint64_t parent, std::span<const TokenId> tokens,
                            std::string_view extra) {
  // Length-prefixed fields, so (tokens, salt) pairs cannot alias each other.
  std::string buf;
  buf.resize(sizeof(uint64_t) * 2 + tokens.size_bytes() + extra.size());
  char* p = buf.data();
  uint64_t n = extra.size();
  std::memcpy(p, &parent, sizeof parent);
  p += sizeof parent;
  if (!tokens.empty()) std::memcpy(p, tokens.data(), tokens.size_bytes());
  p += tokens.size_bytes();
  std::memcpy(p, &n, sizeof n);
  p += sizeof n;
  if (!extra.empty()) std::memcpy(p, extra.data(), extra.size());
  return XXH3_64bits(buf.data(), buf.size());
}

PrefixCache::PrefixCache(int num_blocks, BlockHashFn hash_fn)
    : hash_fn_(hash_fn ? std::move(hash_fn) : BlockHashFn(default_block_hash)),
      entries_(static_cast<size_t>(num_blocks)) {}

bool PrefixCache::matches(const Entry& e, const PrefixChain& chain,
                          std::span<const TokenId> tokens, std::string_view salt) const {
  return e.id != 0 && e.parent_id == chain.parent_id && e.salt == salt &&
         std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end());
}

int32_t PrefixCache::lookup(const PrefixChain& chain, std::span<const TokenId> tokens,
                            std::string_view salt) const {
  auto it = map_.find(hash_fn_(chain.parent_hash, tokens, salt));
  if (it == map_.end()) return -1;
  return matches(entries_[it->second], chain, tokens, salt) ? it->second : -1;
}

void PrefixCache::follow(PrefixChain* chain, int32_t block) const {
  const Entry& e = entries_[block];
  FOLIO_CHECK(e.id != 0);
  chain->parent_id = e.id;
  chain->parent_hash = e.hash;
  ++chain->num_blocks;
}

void PrefixCache::insert(PrefixChain* chain, int32_t block, std::span<const TokenId> tokens,
                         std::string_view salt, const std::function<bool(int32_t)>& is_free) {
  if (chain->broken) return;
  uint64_t h = hash_fn_(chain->parent_hash, tokens, salt);
  auto it = map_.find(h);
  if (it != map_.end()) {
    int32_t other = it->second;
    if (matches(entries_[other], *chain, tokens, salt)) {  // same content (maybe this block)
      follow(chain, other);
      return;
    }
    if (!is_free(other)) {  // a true collision with a block someone reads: give up caching
      chain->broken = true;
      return;
    }
    evict(other);  // a stale or colliding free entry: the newer content wins
  }
  if (entries_[block].id != 0) {  // cached under another chain: keep that entry
    chain->broken = true;
    return;
  }
  Entry& e = entries_[block];
  e.id = next_id_++;
  e.hash = h;
  e.parent_hash = chain->parent_hash;
  e.parent_id = chain->parent_id;
  e.tokens.assign(tokens.begin(), tokens.end());
  e.salt.assign(salt);
  map_.emplace(h, block);
  follow(chain, block);
}

void PrefixCache::evict(int32_t block) {
  Entry& e = entries_[block];
  if (e.id == 0) return;
  auto it = map_.find(e.hash);
  if (it != map_.end() && it->second == block) map_.erase(it);
  e = Entry{};
}

Status PrefixCache::check() const {
  size_t cached = 0;
  for (const Entry& e : entries_) cached += e.id != 0;
  if (cached != map_.size())
    return internal_error("prefix cache: " + std::to_string(cached) + " entries but " +
                          std::to_string(map_.size()) + " keys");
  for (const auto& [h, b] : map_) {
    const Entry& e = entries_[b];
    if (e.id == 0 || e.hash != h) return internal_error("prefix cache key points at a stale block");
    if (hash_fn_(e.parent_hash, e.tokens, e.salt) != h)
      return internal_error("prefix cache block " + std::to_string(b) +
                            " does not hold the tokens of its key");
  }
  return Status::ok_status();
}

}  // namespace folio
