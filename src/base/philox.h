// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) and the
// exact mapping from its 32-bit outputs to the uniforms the sampler uses.
//
// Counter-based: the output is a pure function of (counter, key), so any draw can be recomputed
// anywhere (another row, another thread, a GPU kernel) without carrying a generator state. This
// is the property the sampler builds its per-sequence, batch-independent draws on. The function
// is checked against Random123's published known-answer vectors (tests/sample/philox_test.cc).
// It lives in base/ because both the host sampler (sample/) and the GPU sampler
// (backend/cuda/sample_rows.cu) compute it: the functions are __host__ __device__ under nvcc.
#pragma once

#include <array>
#include <cstdint>

#ifdef __CUDACC__
#define FOLIO_HOST_DEVICE __host__ __device__
#else
#define FOLIO_HOST_DEVICE
#endif

namespace folio {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

namespace philox_detail {
inline constexpr uint32_t kMul0 = 0xD2511F53u;
inline constexpr uint32_t kMul1 = 0xCD9E8D57u;
inline constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
inline constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

FOLIO_HOST_DEVICE inline PhiloxCounter round(const PhiloxCounter& c, const PhiloxKey& k) {
  const uint64_t p0 = uint64_t{kMul0} * c[0];
  const uint64_t p1 = uint64_t{kMul1} * c[2];
  const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  return {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
}
}  // namespace philox_detail

// Ten rounds; the key is bumped by the Weyl constants before rounds 1..9.
FOLIO_HOST_DEVICE inline PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      key[0] += philox_detail::kWeyl0;
      key[1] += philox_detail::kWeyl1;
    }
    counter = philox_detail::round(counter, key);
  }
  return counter;
}

// Maps 32 random bits to a float in the open interval (0, 1): the top 23 bits k give
// (k + 0.5) * 2^-23, exactly representable in binary32, so u is never 0 or 1 and -log(u) is
// finite and strictly positive. Identical on every IEEE-754 platform (no rounding involved).
FOLIO_HOST_DEVICE inline float uniform_open01(uint32_t bits) {
  return (static_cast<float>(bits >> 9) + 0.5f) * 0x1p-23f;
}

}  // namespace folio
