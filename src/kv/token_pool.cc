#include "kv/token_pool.h"

#include <algorithm>
#include <string>

#include "base/check.h"

namespace folio {

TokenPool::TokenPool(int num_slots) : ref_(static_cast<size_t>(num_slots), 0) {
  FOLIO_CHECK(num_slots >= 0);
  if (num_slots > 0) add_run(0, num_slots);
}

int TokenPool::largest_free_run() const { return by_len_.empty() ? 0 : by_len_.rbegin()->first; }

void TokenPool::remove_run(std::map<int32_t, int32_t>::iterator it) {
  by_len_.erase({it->second, it->first});
  num_free_ -= it->second;
  runs_.erase(it);
}

void TokenPool::add_run(int32_t start, int32_t len) {
  auto next = runs_.lower_bound(start);
  if (next != runs_.end() && next->first == start + len) {
    len += next->second;
    remove_run(next);
  }
  auto after = runs_.lower_bound(start);
  if (after != runs_.begin()) {
    auto prev = std::prev(after);
    if (prev->first + prev->second == start) {
      start = prev->first;
      len += prev->second;
      remove_run(prev);
    }
  }
  runs_.emplace(start, len);
  by_len_.insert({len, start});
  num_free_ += len;
}

void TokenPool::take_from_run(int32_t start, int32_t len, int k, std::vector<int32_t>* out) {
  remove_run(runs_.find(start));
  for (int32_t s = start; s < start + k; ++s) {
    ref_[s] = 1;
    out->push_back(s);
  }
  if (k < len) add_run(start + k, len - k);
}

void TokenPool::allocate(int k, std::vector<int32_t>* out) {
  FOLIO_CHECK(k <= num_free_, "token pool exhausted");
  if (k <= 0) return;
  auto fit = by_len_.lower_bound({k, -1});
  if (fit != by_len_.end()) {  // best fit: one contiguous run
    take_from_run(fit->second, fit->first, k, out);
    return;
  }
  while (k > 0) {  // scattered: longest runs first
    auto [len, start] = *by_len_.rbegin();
    int take = std::min(k, len);
    take_from_run(start, len, take, out);
    k -= take;
  }
}

void TokenPool::release(std::span<const int32_t> slots) {
  std::vector<int32_t> freed;
  for (int32_t s : slots) {
    FOLIO_CHECK(ref_[s] > 0, "release of a free slot");
    if (--ref_[s] == 0) freed.push_back(s);
  }
  std::sort(freed.begin(), freed.end());
  for (size_t i = 0; i < freed.size();) {
    size_t j = i + 1;
    while (j < freed.size() && freed[j] == freed[j - 1] + 1) ++j;
    add_run(freed[i], static_cast<int32_t>(j - i));
    i = j;
  }
}

Status TokenPool::check() const {
  int free = 0;
  int32_t prev_end = -1;
  for (const auto& [start, len] : runs_) {
    if (len <= 0 || start <= prev_end) return internal_error("free runs overlap or touch");
    if (!by_len_.count({len, start})) return internal_error("free run missing from the index");
    for (int32_t s = start; s < start + len; ++s)
      if (ref_[s] != 0) return internal_error("slot " + std::to_string(s) + " is free and used");
    free += len;
    prev_end = start + len;
  }
  if (free != num_free_ || by_len_.size() != runs_.size())
    return internal_error("free slot count drifted");
  int zero = static_cast<int>(std::count(ref_.begin(), ref_.end(), 0));
  if (zero != free) return internal_error("a slot with no reference is not in a free run");
  return Status::ok_status();
}

}  // namespace folio
