// FakeKvMemory: a stand-in for the device KV cache and the host swap pool in host-logic tests.
// Each token slot stores a fingerprint of the whole prefix up to its token (what real K/V at
// that position depends on). Copy lists are applied exactly as the engine would, so a wrong
// block table, a missed copy-on-write or swap copy, or a bad prefix hit shows up as a wrong
// fingerprint when a sequence reads its context back.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace folio::testing {

// Fingerprint of tokens[0, i] for every i (FNV-1a style chain; any injective-enough mix works).
inline std::vector<uint64_t> prefix_fingerprints(std::span<const TokenId> tokens) {
  std::vector<uint64_t> out;
  uint64_t h = 1469598103934665603ull;
  for (TokenId t : tokens) {
    h = (h ^ static_cast<uint64_t>(static_cast<uint32_t>(t))) * 1099511628211ull;
    h ^= h >> 29;
    out.push_back(h);
  }
  return out;
}

class FakeKvMemory {
 public:
  FakeKvMemory(int num_blocks, int num_host_blocks, int block_size)
      : block_size_(block_size),
        device_(static_cast<size_t>(num_blocks) * block_size, 0),
        host_(static_cast<size_t>(num_host_blocks) * block_size, 0) {}

  void copy_blocks(std::span<const KvCopy> copies, bool from_device, bool to_device) {
    for (const KvCopy& c : copies)
      for (int i = 0; i < block_size_; ++i)
        at(to_device, c.dst, i) = at(from_device, c.src, i);
  }
  // Writes the fingerprints of positions [begin, end) through `table`.
  void write(std::span<const int32_t> table, std::span<const uint64_t> fp, int begin, int end) {
    for (int p = begin; p < end; ++p) slot(table, p) = fp[static_cast<size_t>(p)];
  }
  // The first position of [begin, end) whose stored fingerprint is wrong, or end.
  int first_invalid(std::span<const int32_t> table, std::span<const uint64_t> fp, int begin,
                    int end) {
    for (int p = begin; p < end; ++p)
      if (slot(table, p) != fp[static_cast<size_t>(p)]) return p;
    return end;
  }
  // Number of leading positions of [0, end) whose stored fingerprint is right.
  int num_valid(std::span<const int32_t> table, std::span<const uint64_t> fp, int end) {
    return first_invalid(table, fp, 0, end);
  }

 private:
  uint64_t& at(bool device, int32_t block, int offset) {
    auto& mem = device ? device_ : host_;
    return mem.at(static_cast<size_t>(block) * block_size_ + offset);
  }
  uint64_t& slot(std::span<const int32_t> table, int pos) {
    return at(true, table[static_cast<size_t>(pos / block_size_)], pos % block_size_);
  }

  int block_size_;
  std::vector<uint64_t> device_, host_;
};

}  // namespace folio::testing
