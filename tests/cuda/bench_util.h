// Internal to the CUDA benchmarks (tests/cuda/*_bench_test.cc): the FOLIO_CUDA_BENCH switch
// (benchmarks are unit tests that skip unless it is 1: they print figures and assert nothing about
// speed) and a fast random fill of large device buffers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace folio::cuda::bench {

inline bool bench_enabled() {
  const char* e = std::getenv("FOLIO_CUDA_BENCH");
  return e && std::string(e) == "1";
}

// Fills a device buffer with random bf16 by replicating a 16 MiB random chunk.
inline void fill_random(void* dst, size_t bytes, std::mt19937& rng) {
  const size_t chunk = std::min<size_t>(bytes, 16u << 20);
  auto host = testing::random_vec(chunk / 2, rng);
  std::vector<uint16_t> bits(host.size());
  for (size_t i = 0; i < host.size(); ++i) bits[i] = testing::to_bits(DType::kBF16, host[i]);
  for (size_t off = 0; off < bytes; off += chunk)
    ASSERT_TRUE(
        copy(static_cast<char*>(dst) + off, bits.data(), std::min(chunk, bytes - off)).ok());
}

}  // namespace folio::cuda::bench
