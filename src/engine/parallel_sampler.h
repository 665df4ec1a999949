// ParallelSampler: samples a step's rows on the parallel_for pool. A Sampler owns scratch
// buffers and is single-threaded, so each concurrent chunk borrows one from a free list. Each
// row's draw depends only on its own RNG stream (sample/rng_stream.h), so the result does not
// depend on how rows are split across threads.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "sample/sampler.h"

namespace folio {

class ParallelSampler {
 public:
  struct Job {
    std::span<const float> logits;  // [vocab]
    SampleRow row;
    int32_t logits_row = -1;  // the row's index in ForwardBatch::logits_rows (engine bookkeeping)
  };

  explicit ParallelSampler(SamplerConfig config) : config_(std::move(config)) {}

  // One result per job, in order.
  std::vector<TokenLogprobs> sample(const std::vector<Job>& jobs);

 private:
  std::unique_ptr<Sampler> acquire();
  void release(std::unique_ptr<Sampler> s);

  SamplerConfig config_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Sampler>> free_;
};

}  // namespace folio
