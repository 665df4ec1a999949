#include "tokenizer/word_cache.h"

namespace folio {

WordCache::WordCache(size_t capacity) : per_shard_capacity_(capacity / kShards + 1) {}

bool WordCache::lookup(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() > kMaxWordBytes) return false;
  size_t h = Hash{}(word);
  Shard& s = shard_for(h);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(word);
  if (it == s.map.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::insert(std::string_view word, const int32_t* ids, size_t n) {
  if (word.size() > kMaxWordBytes) return;
  size_t h = Hash{}(word);
  Shard& s = shard_for(h);
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.map.size() >= per_shard_capacity_) s.map.clear();
  s.map.emplace(std::string(word), std::vector<int32_t>(ids, ids + n));
}

}  // namespace folio
