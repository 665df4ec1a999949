// Internal to the CUDA benchmarks (tests/cuda/*_bench_test.cc): the FOLIO_CUDA_BENCH switch
// (benchmarks are unit tests that skip unless it is 1: they print figures and assert nothing about
// speed), a fast random fill of large device buffers, and Llama-3-8B's four layer products with
// random operands for the GEMM benchmarks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/device_memory.h"
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

// One of Llama-3-8B's layer products y[m, n] (+)= x[m, k] · w[n, k]^T.
struct Layer {
  const char* name;
  int n, k;
  bool acc;  // accumulates into y (the residual add of o_proj and down)
};
inline constexpr Layer kLlamaLayers[] = {{"qkv", 6144, 4096, false},
                                         {"o_proj", 4096, 4096, true},
                                         {"gate_up", 28672, 4096, false},
                                         {"down", 4096, 14336, true}};

// One layer's random weights and activations (up to max_m rows) and a zeroed output.
struct Operands {
  Result<DeviceBuffer> w, x, y;
  bool ok() const { return w.ok() && x.ok() && y.ok(); }
  static Operands random(const Layer& L, int max_m, std::mt19937& rng) {
    Operands o{DeviceBuffer::allocate(size_t{2} * L.n * L.k),
               DeviceBuffer::allocate(size_t{2} * max_m * L.k),
               DeviceBuffer::allocate(size_t{2} * max_m * L.n)};
    EXPECT_TRUE(o.ok());
    if (!o.ok()) return o;
    fill_random(o.w->data(), o.w->bytes(), rng);
    fill_random(o.x->data(), o.x->bytes(), rng);
    EXPECT_EQ(cudaMemset(o.y->data(), 0, o.y->bytes()), cudaSuccess);
    return o;
  }
};

}  // namespace folio::cuda::bench
