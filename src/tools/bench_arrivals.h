// Request arrival times for the serving benchmark: a Poisson process (exponential gaps with
// mean 1/rate, as `vllm bench serve` sends), or everything at t = 0 for an infinite rate.
#pragma once

#include <cstdint>
#include <vector>

namespace folio::tools {

// Seconds from the start at which each of `n` requests is sent: the first at 0, then
// cumulative exponential gaps drawn from a SplitMix64 stream seeded by `seed`. `rate` is
// requests per second; +infinity (or any non-finite or non-positive rate) gives all zeros.
std::vector<double> poisson_arrival_times(int n, double rate, uint64_t seed);

}  // namespace folio::tools
