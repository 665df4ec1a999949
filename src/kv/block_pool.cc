#include "kv/block_pool.h"

#include <string>

#include "base/check.h"

namespace folio {

BlockPool::BlockPool(int num_blocks)
    : ref_(static_cast<size_t>(num_blocks), 0),
      prev_(static_cast<size_t>(num_blocks) + 1),
      next_(static_cast<size_t>(num_blocks) + 1),
      sentinel_(num_blocks),
      num_free_(0) {
  FOLIO_CHECK(num_blocks >= 0);
  prev_[sentinel_] = next_[sentinel_] = sentinel_;
  for (int32_t b = 0; b < num_blocks; ++b) {
    link_before(sentinel_, b);
    ++num_free_;
  }
}

void BlockPool::link_before(int32_t node, int32_t block) {
  int32_t p = prev_[node];
  next_[p] = block;
  prev_[block] = p;
  next_[block] = node;
  prev_[node] = block;
}

void BlockPool::unlink(int32_t block) {
  next_[prev_[block]] = next_[block];
  prev_[next_[block]] = prev_[block];
  prev_[block] = next_[block] = -1;
}

int32_t BlockPool::allocate() {
  FOLIO_CHECK(num_free_ > 0, "allocate from an empty block pool");
  int32_t b = next_[sentinel_];
  unlink(b);
  --num_free_;
  ref_[b] = 1;
  return b;
}

void BlockPool::incref(int32_t block) {
  if (ref_[block] == 0) {
    unlink(block);
    --num_free_;
  }
  ++ref_[block];
}

bool BlockPool::decref(int32_t block, bool keep_cached) {
  FOLIO_CHECK(ref_[block] > 0, "decref of a free block");
  if (--ref_[block] > 0) return false;
  link_before(keep_cached ? sentinel_ : next_[sentinel_], block);
  ++num_free_;
  return true;
}

std::vector<int32_t> BlockPool::free_list() const {
  std::vector<int32_t> out;
  for (int32_t b = next_[sentinel_]; b != sentinel_ && out.size() <= ref_.size(); b = next_[b])
    out.push_back(b);
  return out;
}

Status BlockPool::check() const {
  std::vector<char> seen(ref_.size(), 0);
  int count = 0;
  for (int32_t b = next_[sentinel_]; b != sentinel_; b = next_[b]) {
    if (b < 0 || b >= num_blocks()) return internal_error("free list holds a bad id");
    if (seen[b]) return internal_error("free list cycles through block " + std::to_string(b));
    if (ref_[b] != 0) return internal_error("block " + std::to_string(b) + " is free and used");
    if (prev_[next_[b]] != b) return internal_error("free list links broken");
    seen[b] = 1;
    ++count;
  }
  if (count != num_free_) return internal_error("free count " + std::to_string(num_free_) +
                                                " but the list holds " + std::to_string(count));
  for (int32_t b = 0; b < num_blocks(); ++b)
    if (ref_[b] == 0 && !seen[b])
      return internal_error("block " + std::to_string(b) + " has no reference and is not free");
  return Status::ok_status();
}

}  // namespace folio
