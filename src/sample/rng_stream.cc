#include "sample/rng_stream.h"

#include <cmath>

namespace folio {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

RngStream RngStream::seeded(uint64_t seed, uint32_t seq_index) {
  return RngStream{seed, seq_index, kSeededTag};
}

RngStream RngStream::unseeded(uint64_t engine_seed, std::string_view request_id,
                              uint32_t seq_index) {
  return RngStream{splitmix64(engine_seed ^ fnv1a64(request_id)), seq_index, kUnseededTag};
}

float RngStream::exponential(uint32_t step, uint32_t token_id) const {
  return -std::log(uniform_open01(bits(step, token_id)));
}

}  // namespace folio
