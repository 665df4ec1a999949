#include "engine/parallel_sampler.h"

#include "base/parallel_for.h"

namespace folio {

std::unique_ptr<Sampler> ParallelSampler::acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) return std::make_unique<Sampler>(config_);
  auto s = std::move(free_.back());
  free_.pop_back();
  return s;
}

void ParallelSampler::release(std::unique_ptr<Sampler> s) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(s));
}

std::vector<TokenLogprobs> ParallelSampler::sample(const std::vector<Job>& jobs) {
  std::vector<TokenLogprobs> out(jobs.size());
  // A row at a 128k vocabulary costs about a millisecond: one row is worth a task.
  parallel_for(static_cast<int64_t>(jobs.size()), 1, [&](int64_t begin, int64_t end) {
    auto sampler = acquire();
    for (int64_t i = begin; i < end; ++i) out[i] = sampler->sample_row(jobs[i].logits, jobs[i].row);
    release(std::move(sampler));
  });
  return out;
}

}  // namespace folio
