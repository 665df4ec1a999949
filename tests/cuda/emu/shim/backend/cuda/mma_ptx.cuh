// Emulated stand-in for src/backend/cuda/mma_ptx.cuh (same API, host code on simt_emu.h). The
// fragment layouts are the ones that file documents (PTX ISA, mma.m16n8k16 and ldmatrix).
#pragma once

#include <utility>

#include "emu_block_sync.h"
#include "simt_emu.h"

namespace folio::cuda {

template <typename T>
inline float half_bits_to_float(uint16_t b) {
  T v;
  std::memcpy(&v, &b, 2);
  return static_cast<float>(v);
}

// Shared "addresses" are byte offsets into the block's emulated shared memory.
inline uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(static_cast<const unsigned char*>(p) - emu::smem());
}

// Lane l of matrix i receives (row l / 4, cols 2 (l % 4) ..+1) of the 8x8 matrix whose rows
// lanes 8i..8i+7 point at (transposed with .trans).
inline void emu_ldmatrix(uint32_t (&r)[4], const void* p, bool trans) {
  const int lane = emu::tid % 32;
  emu::warp_sync();
  emu::lane_slot(lane)[0] = reinterpret_cast<uint64_t>(p);
  emu::warp_sync();
  for (int i = 0; i < 4; ++i) {
    uint16_t e[2];
    for (int k = 0; k < 2; ++k) {
      int row = lane / 4, col = 2 * (lane % 4) + k;
      if (trans) std::swap(row, col);
      e[k] = reinterpret_cast<const uint16_t*>(emu::lane_slot(8 * i + row)[0])[col];
    }
    r[i] = e[0] | (static_cast<uint32_t>(e[1]) << 16);
  }
}
inline void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  emu_ldmatrix(r, p, false);
}
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  emu_ldmatrix(r, p, true);
}

template <typename T>
inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const int lane = emu::tid % 32;
  emu::warp_sync();
  auto& mine = emu::lane_slot(lane);
  for (int i = 0; i < 4; ++i) mine[i] = a[i];
  mine[4] = b0;
  mine[5] = b1;
  emu::warp_sync();
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    const auto& y = emu::lane_slot(l);
    for (int k = 0; k < 2; ++k) {
      auto el = [&](uint64_t reg) { return half_bits_to_float<T>(uint16_t(reg >> (16 * k))); };
      A[g][2 * t + k] = el(y[0]);
      A[g + 8][2 * t + k] = el(y[1]);
      A[g][2 * t + 8 + k] = el(y[2]);
      A[g + 8][2 * t + 8 + k] = el(y[3]);
      B[2 * t + k][g] = el(y[4]);
      B[2 * t + 8 + k][g] = el(y[5]);
    }
  }
  const int g = lane / 4, t = lane % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
    float s = 0;
    for (int k = 0; k < 16; ++k) s += A[row][k] * B[k][col];
    d[e] += s;
  }
}

template <typename T>
inline uint32_t pack2(float lo, float hi) {
  const T a = T(lo), b = T(hi);
  uint16_t x, y;
  std::memcpy(&x, &a, 2);
  std::memcpy(&y, &b, 2);
  return x | (static_cast<uint32_t>(y) << 16);
}

// cp.async as emu_async.h models it (landing time per FOLIO_EMU_CP_ASYNC).
inline void cp_async_16(void* dst, const void* src, bool valid) {
  emu::cp_async_issue(dst, src, valid);
}
inline void cp_async_commit() {
  emu::cp_async_commit_group();
}
template <int N>
inline void cp_async_wait() {
  emu::cp_async_wait_group(N);
}
inline float fast_exp2(float x) {
  return std::exp2(x);
}
inline float fast_rcp(float x) {
  return 1.f / x;
}

}  // namespace folio::cuda
