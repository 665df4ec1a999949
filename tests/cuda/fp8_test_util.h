// Helpers for the fp8 (e4m3) KV cache tests: device byte arrays, random finite e4m3 codes, and
// the host codec (base/fp8.h) applied to 16-bit values given by their bits.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/fp8.h"
#include "cuda_test_util.h"

namespace folio::cuda::testing {

// A device array of bytes (an fp8 cache: one e4m3 code per element).
struct DevBytes {
  size_t n = 0;
  DeviceBuffer buf;

  static DevBytes upload(const std::vector<uint8_t>& host) {
    DevBytes b{host.size(), std::move(DeviceBuffer::allocate(host.size()).value())};
    EXPECT_TRUE(copy(b.buf.data(), host.data(), host.size()).ok());
    return b;
  }
  // Every byte `byte` (0xFF: the e4m3 NaN code, the poison of the fp8 tests).
  static DevBytes filled(size_t n, uint8_t byte) {
    DevBytes b{n, std::move(DeviceBuffer::allocate(n).value())};
    EXPECT_TRUE(memset_async(b.buf.data(), byte, n).ok());
    return b;
  }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> out(n);
    EXPECT_TRUE(copy(out.data(), buf.data(), n).ok());
    return out;
  }
  void* data() const { return buf.data(); }
};

// n e4m3 codes of values uniform in [lo, hi] (finite; the small ones give subnormal codes).
inline std::vector<uint8_t> random_e4m3(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<uint8_t> out(n);
  for (auto& c : out) c = float_to_fp8_e4m3(d(rng));
  return out;
}

inline std::vector<float> decode_e4m3(const std::vector<uint8_t>& codes) {
  std::vector<float> out(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) out[i] = fp8_e4m3_to_float(codes[i]);
  return out;
}

// The float a 16-bit value of dtype dt holds, exactly (a NaN keeps its sign).
inline float exact_from_bits(DType dt, uint16_t b) {
  if (dt == DType::kBF16) {
    const uint32_t w = uint32_t{b} << 16;
    float f;
    std::memcpy(&f, &w, 4);
    return f;
  }
  const bool neg = b & 0x8000;
  const int e = (b >> 10) & 0x1F, m = b & 0x3FF;
  float v;
  if (e == 31)
    v = m ? std::nanf("") : INFINITY;
  else if (e == 0)
    v = std::ldexp(static_cast<float>(m), -24);
  else
    v = std::ldexp(1.f + m / 1024.f, e - 15);
  return neg ? -v : v;
}

// What an fp8 cache holds for the 16-bit value with bits b: the host codec's code (every NaN
// 0x7F, as cvt.rn.satfinite.e4m3x2.f32 gives it: measured on an H200 over every bf16 and fp16
// NaN, 2026-11-26).
inline uint8_t e4m3_of_bits(DType dt, uint16_t b) {
  return float_to_fp8_e4m3(exact_from_bits(dt, b));
}

inline bool e4m3_is_nan(uint8_t c) {
  return (c & 0x7F) == 0x7F;
}

// Counts differing bytes; the message shows the first few (index: got vs want).
inline std::string byte_diff(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                             size_t* count) {
  *count = 0;
  std::string first;
  if (got.size() != want.size()) {
    *count = 1;
    return "sizes " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  }
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && ++*count <= 8)
      first += " [" + std::to_string(i) + "] " + std::to_string(got[i]) + " vs " +
               std::to_string(want[i]);
  return std::to_string(*count) + " of " + std::to_string(got.size()) + " bytes differ:" + first;
}

}  // namespace folio::cuda::testing
