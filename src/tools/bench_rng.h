// SplitMix64: a tiny seeded generator for benchmark inputs (prompt ids, arrival gaps). Chosen
// over <random> distributions because those are implementation-defined: the same seed must give
// the same workload on every machine the results are compared across.
#pragma once

#include <cstdint>

namespace folio::tools {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace folio::tools
