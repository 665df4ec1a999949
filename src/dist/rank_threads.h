// RankThreads: one long-lived thread per tensor-parallel rank, and a way to run the same call
// on all of them at once. CUDA's current device is per thread, and NCCL's collectives in one
// process need every rank's call in flight together: each rank's GPU work runs on its own
// thread, which sets its device once and keeps it.
//
// run() is called from one thread at a time (the engine's); it returns when every rank's call
// has returned. Plain C++ (tested without a GPU).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "base/status.h"

namespace folio {

class RankThreads {
 public:
  explicit RankThreads(int world);
  ~RankThreads();  // joins the threads (a call in progress finishes first)
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  int world() const { return static_cast<int>(threads_.size()); }

  // fn(rank) on each rank's thread; ok, or the lowest failing rank's status, its message
  // prefixed with "tensor-parallel rank R: ".
  Status run(const std::function<Status(int rank)>& fn);

 private:
  void loop(int rank);

  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<Status(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::vector<Status> results_;
  std::vector<std::thread> threads_;
};

// RankAgreement: a host-side barrier between the ranks that also carries failure. Every rank
// calls agree() at the same points; it returns the minimum of the values passed, or an error as
// soon as any rank passed an error or fail() was called (a rank that gave up). Used before
// collectives so a rank that failed cannot leave the others waiting inside NCCL forever.
class RankAgreement {
 public:
  explicit RankAgreement(int world) : world_(world) {}
  Result<int64_t> agree(const Status& own, int64_t value);
  void fail(const Status& st);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int world_;
  int arrived_ = 0;
  uint64_t round_ = 0;
  int64_t min_ = 0, result_ = 0;
  Status failed_;
};

}  // namespace folio
