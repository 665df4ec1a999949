#include "dist/rank_threads.h"

#include <algorithm>
#include <string>

namespace folio {

RankThreads::RankThreads(int world) : results_(std::max(world, 1)) {
  for (int r = 0; r < std::max(world, 1); ++r) threads_.emplace_back([this, r] { loop(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void RankThreads::loop(int rank) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<Status(int)>* job = nullptr;
    {
      std::unique_lock<std::mutex> l(mu_);
      start_cv_.wait(l, [&] { return stop_ || generation_ != seen; });
      if (generation_ == seen) return;  // stop, nothing left to run
      seen = generation_;
      job = job_;
    }
    Status st = (*job)(rank);
    std::lock_guard<std::mutex> l(mu_);
    results_[rank] = std::move(st);
    if (--pending_ == 0) done_cv_.notify_one();
  }
}

Status RankThreads::run(const std::function<Status(int rank)>& fn) {
  std::unique_lock<std::mutex> l(mu_);
  job_ = &fn;
  pending_ = world();
  ++generation_;
  start_cv_.notify_all();
  done_cv_.wait(l, [&] { return pending_ == 0; });
  job_ = nullptr;
  for (int r = 0; r < world(); ++r)
    if (!results_[r].ok())
      return Status(results_[r].code(),
                    "tensor-parallel rank " + std::to_string(r) + ": " + results_[r].message());
  return Status();
}

Result<int64_t> RankAgreement::agree(const Status& own, int64_t value) {
  std::unique_lock<std::mutex> l(mu_);
  if (!own.ok() && failed_.ok()) failed_ = own;
  if (!failed_.ok()) {
    cv_.notify_all();
    return failed_;
  }
  min_ = arrived_ == 0 ? value : std::min(min_, value);
  const uint64_t round = round_;
  if (++arrived_ == world_) {
    arrived_ = 0;
    result_ = min_;
    ++round_;
    cv_.notify_all();
    return result_;
  }
  cv_.wait(l, [&] { return round_ != round || !failed_.ok(); });
  // result_ cannot have moved on: the next round needs this rank too.
  if (round_ != round) return result_;
  return Status(failed_.code(), "another tensor-parallel rank failed: " + failed_.message());
}

void RankAgreement::fail(const Status& st) {
  std::lock_guard<std::mutex> l(mu_);
  if (failed_.ok()) failed_ = st.ok() ? internal_error("a tensor-parallel rank gave up") : st;
  cv_.notify_all();
}

}  // namespace folio
