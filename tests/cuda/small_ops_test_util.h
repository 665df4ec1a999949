// Shared by the small-op tests and benchmark (rms_norm, rope, qkv_post): llama3-like inv_freq,
// paged slot mappings, raw-bit downloads, and the CPU reference of the split -> qk norm -> rope
// -> cache chain that qkv_post fuses, with the chain's rounding points.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "cuda_test_util.h"

namespace folio::cuda::testing {

// llama3-like: the upper half of the frequencies scaled down by 8 (the ops only see the values).
inline std::vector<float> make_inv_freq(int head_dim) {
  const int half = head_dim / 2;
  std::vector<float> f(half);
  for (int i = 0; i < half; ++i)
    f[i] = static_cast<float>(std::pow(500000.0, -2.0 * i / head_dim) / (i > half / 2 ? 8 : 1));
  return f;
}

inline std::vector<int32_t> make_positions(int T, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> d(0, 20000);
  std::vector<int32_t> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = t == 0 ? 0 : d(rng);
  return pos;
}

// Token t goes to offset t % block_size of a shuffled physical block; every 7th token from the
// sixth on is padding (-1) when there are several tokens. *num_slots gets the cache's row count.
inline std::vector<int64_t> make_slots(int T, int block_size, std::mt19937& rng,
                                       int64_t* num_slots) {
  const int blocks = (T + block_size - 1) / block_size + 2;
  std::vector<int64_t> perm(blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int64_t> slots(T);
  for (int t = 0; t < T; ++t)
    slots[t] = (T > 1 && t % 7 == 5) ? -1 : perm[t / block_size] * block_size + t % block_size;
  *num_slots = static_cast<int64_t>(blocks) * block_size;
  return slots;
}

inline std::vector<uint16_t> download_bits(const DevTensor& t) {
  std::vector<uint16_t> bits(t.n);
  EXPECT_TRUE(copy(bits.data(), t.data(), t.n * 2).ok());
  return bits;
}

inline int ulp_distance(uint16_t a, uint16_t b) {  // same-sign 16-bit floats; sign flip: large
  if ((a ^ b) & 0x8000) return (a & 0x7FFF) == 0 && (b & 0x7FFF) == 0 ? 0 : 1 << 16;
  return std::abs(static_cast<int>(a & 0x7FFF) - static_cast<int>(b & 0x7FFF));
}

struct QkvShape {
  int T, nh, nkv, hd;
};

// The chain on the CPU: split (+bias), round; [norm per head, round]; rope, round; then q
// [T, nh, hd] and the caches (rows at slots >= 0; other rows untouched).
inline void reference_qkv_post(DType dt, const QkvShape& s, const std::vector<float>& qkv,
                               const float* bias, const float* q_norm, const float* k_norm,
                               float eps, const std::vector<int32_t>& pos,
                               const std::vector<float>& inv_freq,
                               const std::vector<int64_t>& slots, std::vector<float>* q,
                               std::vector<float>* k_cache, std::vector<float>* v_cache) {
  const int qs = s.nh * s.hd, kvs = s.nkv * s.hd, width = qs + 2 * kvs;
  std::vector<float> k(static_cast<size_t>(s.T) * kvs), v(k.size());
  q->assign(static_cast<size_t>(s.T) * qs, 0.f);
  for (int t = 0; t < s.T; ++t)
    for (int i = 0; i < width; ++i) {
      const float x = qkv[static_cast<size_t>(t) * width + i] + (bias ? bias[i] : 0.f);
      float* dst = i < qs         ? &(*q)[static_cast<size_t>(t) * qs + i]
                   : i < qs + kvs ? &k[static_cast<size_t>(t) * kvs + i - qs]
                                  : &v[static_cast<size_t>(t) * kvs + i - qs - kvs];
      *dst = x;
    }
  *q = rounded(dt, *q);
  k = rounded(dt, k);
  v = rounded(dt, v);
  if (q_norm) {
    cpu::rms_norm(q->data(), q_norm, q->data(), s.T * s.nh, s.hd, eps);
    cpu::rms_norm(k.data(), k_norm, k.data(), s.T * s.nkv, s.hd, eps);
    *q = rounded(dt, *q);
    k = rounded(dt, k);
  }
  std::vector<double> f(inv_freq.begin(), inv_freq.end());
  cpu::apply_rope(q->data(), pos.data(), s.T, s.nh, s.hd, f);
  cpu::apply_rope(k.data(), pos.data(), s.T, s.nkv, s.hd, f);
  *q = rounded(dt, *q);
  k = rounded(dt, k);
  cpu::reshape_and_cache(k.data(), v.data(), slots.data(), s.T, kvs, k_cache->data(),
                         v_cache->data());
}

}  // namespace folio::cuda::testing
