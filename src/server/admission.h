// Admission: counts engine requests admitted but not yet producing output (queued or
// prefilling, as the server sees them) against max_queued_requests. Past the limit the server
// answers 503 with Retry-After at once instead of queueing. Thread-safe, lock-free.
#pragma once

#include <atomic>

namespace folio {

class Admission {
 public:
  explicit Admission(int limit) : limit_(limit) {}
  // Takes `n` slots if all fit under the limit; false (nothing taken) otherwise.
  bool try_acquire(int n) {
    int cur = pending_.load(std::memory_order_relaxed);
    while (cur + n <= limit_) {
      if (pending_.compare_exchange_weak(cur, cur + n, std::memory_order_acq_rel)) return true;
    }
    return false;
  }
  void release(int n) { pending_.fetch_sub(n, std::memory_order_acq_rel); }
  int pending() const { return pending_.load(std::memory_order_acquire); }
  int limit() const { return limit_; }

 private:
  const int limit_;
  std::atomic<int> pending_{0};
};

}  // namespace folio
