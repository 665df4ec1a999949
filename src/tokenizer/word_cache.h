// A bounded, thread-safe cache from a pre-tokenized word (its bytes) to its BPE token ids.
// Sharded by hash with one mutex per shard, so concurrent encoders rarely contend. A shard that
// reaches its capacity is cleared (words are cheap to recompute; no LRU bookkeeping on hits).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace folio {

class WordCache {
 public:
  // Words longer than this are never cached (rare, and they would crowd out common words).
  static constexpr size_t kMaxWordBytes = 128;

  explicit WordCache(size_t capacity = 1 << 16);

  // Appends the cached ids of `word` to `out`; false on a miss.
  bool lookup(std::string_view word, std::vector<int32_t>& out) const;
  void insert(std::string_view word, const int32_t* ids, size_t n);

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  };
  static constexpr size_t kShards = 32;
  Shard& shard_for(size_t h) const { return shards_[h % kShards]; }

  size_t per_shard_capacity_;
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace folio
