// FP8 E4M3 (the OCP "E4M3FN" format NVIDIA's __nv_fp8_e4m3 uses) on the host: the reference for
// the KV cache's fp8 storage (--kv-cache-dtype fp8). Header-only so the CPU executor, the CUDA
// tests' references and the kernels' host checks share one definition.
//
// Bits: sign, 4 exponent bits (bias 7), 3 mantissa bits. No infinities; S.1111.111 is NaN.
// Largest finite 448 (0.1111.110), smallest normal 2^-6, subnormals m/8 * 2^-6 down to 2^-9.
//
// Encoding rounds to nearest, ties to even, and saturates (PTX cvt.rn.satfinite.e4m3x2.f32,
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)): |x| > 448 and +-inf give +-448, NaN
// gives 0x7F whatever its sign (what the hardware conversion returns). Decoding is exact (every
// e4m3 value is a float).
#pragma once

#include <cmath>
#include <cstdint>

namespace folio {

inline constexpr float kFp8E4m3Max = 448.f;

inline float fp8_e4m3_to_float(uint8_t b) {
  const bool neg = b & 0x80;
  const int e = (b >> 3) & 0xF, m = b & 7;
  float v;
  if (e == 15 && m == 7)
    v = std::nanf("");
  else if (e == 0)
    v = std::ldexp(static_cast<float>(m), -9);  // subnormal: m/8 * 2^-6
  else
    v = std::ldexp(1.f + static_cast<float>(m) / 8.f, e - 7);
  return neg ? -v : v;
}

inline uint8_t float_to_fp8_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::fabs(x);
  if (a >= kFp8E4m3Max) return sign | 0x7E;  // saturate (inf too)
  if (a < 0x1p-6f) {
    // Subnormal range: code = round(a / 2^-9) in [0, 8]; 8 is the smallest normal's code.
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.f));
  }
  int k;
  const float f = std::frexp(a, &k);  // a = f * 2^k, f in [0.5, 1)
  int exp = k - 1;                    // a = s * 2^exp, s = 2f in [1, 2)
  int m = static_cast<int>(std::nearbyint((2.f * f - 1.f) * 8.f));  // exact product, RNE
  if (m == 8) {
    m = 0;
    ++exp;
  }
  const int code = ((exp + 7) << 3) | m;
  return sign | static_cast<uint8_t>(code > 0x7E ? 0x7E : code);
}

// The value x is stored as in an fp8 cache: x rounded to the nearest e4m3 value (saturated).
inline float round_to_fp8_e4m3(float x) { return fp8_e4m3_to_float(float_to_fp8_e4m3(x)); }

}  // namespace folio
