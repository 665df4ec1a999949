// Decode kernel tc's register layouts (decode_attention_tc.cuh): which dims and tokens each
// lane's 16-byte loads of K and V hold, and how they become mma.m16n8k16 fragments, for a 16-bit
// cache (Cache<T, T>: mma in T) and an fp8 e4m3 cache (Cache<T, uint8_t>: pairs converted to
// f16x2 exactly, mma in fp16). The kernel's header comment gives the derivation.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"

namespace folio::cuda::detail {
namespace {
namespace tc {

constexpr int kD = 128;     // head_dim
constexpr int kHeads = 8;   // q heads per block: the n of O^T's mma
constexpr int kChunk = 16;  // tokens per warp step

__device__ __forceinline__ uint32_t prmt(uint32_t x, uint32_t y, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(x), "r"(y), "r"(sel));
  return r;
}

// An 8 x 8 matrix of 16-bit values, lane L holding row L / 4 at columns 2 (L % 4) and + 1 (lower
// column in the low half), transposed across the warp: lane L then holds row L / 4 of the
// transpose the same way.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
  return r;
}

// The four e4m3 codes of w (low byte first) -> two f16x2 (codes 0, 1 -> lo; 2, 3 -> hi, low half
// first), exactly (cvt.rn.f16x2.e4m3x2 on each 16-bit half). The high half is named in place
// (mov.b32 {l, h}), so ptxas converts it as F2FP's .H1 operand; cuda_fp8.h's conversion of
// `w >> 16` shifted it down first: 32 SHF per 16-token chunk, 6% of the fp8 loop's instructions
// (NOTES.md, session 29). Here rather than in fp8_e4m3.cuh, whose conversions must also build
// for the host emulator (inline PTX cannot).
__device__ __forceinline__ void e4m3x4_to_f16x2x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\n"
      "cvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The fragment layouts per cache element type. Cache<T, T>: a 16-bit cache, mma in T.
template <typename T, typename C>
struct Cache {
  using Mma = T;
  static constexpr int kKLoads = 4;  // 16-byte loads per K row per lane (32 dims)
  static constexpr int kVLoads = 2;  // per V row per lane (16 dims)
  // First of the 4 dims (2 in q's b0 / K's a[0], a[1]; 2 in b1 / a[2], a[3]) k-step j of lane t
  // sums over.
  static __device__ __forceinline__ int kdim(int j, int t) {
    return 8 * (4 * (j / 2) + t) + 4 * (j % 2);
  }
  // The first of the 2 dims in q's b1 / K's a[2], a[3] (every layout: kdim for b0 / a[0], a[1]).
  static __device__ __forceinline__ int kdim_hi(int j, int t) { return kdim(j, t) + 2; }
  static __device__ __forceinline__ int k_load_elem(int q, int t) { return 8 * (4 * q + t); }
  // One K row's two words of k-step j (its A row's k 2t, 2t + 1 and 2t + 8, 2t + 9).
  static __device__ __forceinline__ void k_words(const uint4 (&k)[kKLoads], int j, uint32_t& lo,
                                                 uint32_t& hi) {
    lo = word(k[j / 2], 2 * (j % 2));
    hi = word(k[j / 2], 2 * (j % 2) + 1);
  }
  // Lane g's dims of O^T m-tile i: vdim(i, g) (A row g) and vdim + 1 (row g + 8).
  static __device__ __forceinline__ int vdim(int i, int g) {
    return 8 * (g + 8 * (i / 4)) + 2 * (i % 4);
  }
  static __device__ __forceinline__ int vdim_hi(int i, int g) { return vdim(i, g) + 1; }
  static __device__ __forceinline__ int v_load_elem(int c, int g) { return 8 * (g + 8 * c); }
  // V^T's A fragment of m-tile i from rows r[0..3] (tokens 4t .. 4t + 3).
  static __device__ __forceinline__ void v_a(const uint4 (&v)[4][kVLoads], int i,
                                             uint32_t (&a)[4]) {
    const uint32_t w0 = word(v[0][i / 4], i % 4), w1 = word(v[1][i / 4], i % 4);
    const uint32_t w2 = word(v[2][i / 4], i % 4), w3 = word(v[3][i / 4], i % 4);
    a[0] = prmt(w0, w1, 0x5410);
    a[1] = prmt(w0, w1, 0x7632);
    a[2] = prmt(w2, w3, 0x5410);
    a[3] = prmt(w2, w3, 0x7632);
  }
};

// An fp8 e4m3 cache: mma in fp16.
template <typename T>
struct Cache<T, uint8_t> {
  using Mma = __half;
  static constexpr int kKLoads = 2;
  static constexpr int kVLoads = 1;
  static __device__ __forceinline__ int kdim(int j, int t) {
    return 16 * (t + 4 * (j / 4)) + 4 * (j % 4);
  }
  static __device__ __forceinline__ int kdim_hi(int j, int t) { return kdim(j, t) + 2; }
  static __device__ __forceinline__ int k_load_elem(int q, int t) { return 16 * (t + 4 * q); }
  static __device__ __forceinline__ void k_words(const uint4 (&k)[kKLoads], int j, uint32_t& lo,
                                                 uint32_t& hi) {
    e4m3x4_to_f16x2x2(word(k[j / 4], j % 4), lo, hi);
  }
  static __device__ __forceinline__ int vdim(int i, int g) { return 16 * g + 2 * i; }
  static __device__ __forceinline__ int vdim_hi(int i, int g) { return vdim(i, g) + 1; }
  static __device__ __forceinline__ int v_load_elem(int, int g) { return 16 * g; }
  static __device__ __forceinline__ void v_a(const uint4 (&v)[4][kVLoads], int i,
                                             uint32_t (&a)[4]) {
    const uint32_t sel = i % 2 ? 0x7362 : 0x5140;  // bytes (2h, 2h + 1) of two rows, interleaved
    const uint32_t x01 = prmt(word(v[0][0], i / 2), word(v[1][0], i / 2), sel);
    const uint32_t x23 = prmt(word(v[2][0], i / 2), word(v[3][0], i / 2), sel);
    e4m3x4_to_f16x2x2(x01, a[0], a[1]);
    e4m3x4_to_f16x2x2(x23, a[2], a[3]);
  }
};

// A 16-bit cache whose fragments come from whole rows in shared memory by ldmatrix (tc's bulk
// form read by fragments, decode_attention_tc_stages.cuh): the dims in their natural order, as
// ldmatrix delivers them. k-step j sums dims 16j .. 16j + 15 (b0 / a[0], a[1]: 16j + 2t, + 1;
// b1 / a[2], a[3]: + 8); O^T m-tile i holds dims 16i .. 16i + 15 (row g: 16i + g, row g + 8:
// 16i + 8 + g). The tokens keep tc's order (S^T rows pi(g), pi(g) + 2; P·V's k 4t .. 4t + 3).
// The rest (the pieces' offsets, used when a register chunk is refetched) is Cache<T, T>'s.
template <typename T>
struct RowsLayout : Cache<T, T> {
  static __device__ __forceinline__ int kdim(int j, int t) { return 16 * j + 2 * t; }
  static __device__ __forceinline__ int kdim_hi(int j, int t) { return 16 * j + 2 * t + 8; }
  static __device__ __forceinline__ int vdim(int i, int g) { return 16 * i + g; }
  static __device__ __forceinline__ int vdim_hi(int i, int g) { return 16 * i + 8 + g; }
};

// 16-byte loads per lane per 16-token chunk (16-bit cache: 16, fp8: 8).
template <typename T, typename C>
constexpr int kLoadsPerLane = 2 * Cache<T, C>::kKLoads + 4 * Cache<T, C>::kVLoads;

template <typename T, typename C>
struct ChunkRegs {
  uint4 k[2][Cache<T, C>::kKLoads];  // K rows pi(g), pi(g) + 2
  uint4 v[4][Cache<T, C>::kVLoads];  // V rows 4t .. 4t + 3
};

// One 16-token chunk's loads into r (tc's register forms; the read probe, decode_read_probe.cu):
// lane (g, t) loads K rows pi(g), pi(g) + 2 and V rows 4t .. 4t + 3, their slots taken from lanes
// 0-15 of slot_lane (-1: zeros, nothing read). Element offsets: slot * slot_stride + head_off.
template <typename T, typename C>
__device__ __forceinline__ void issue_chunk(ChunkRegs<T, C>& r, const C* k_cache, const C* v_cache,
                                            int64_t slot_stride, int64_t head_off, int slot_lane,
                                            int pg, int g, int t) {
  using L = Cache<T, C>;
  auto load = [&](const C* base, int slot, int elem) {
    return slot >= 0
               ? __ldg(reinterpret_cast<const uint4*>(base + slot * slot_stride + head_off + elem))
               : make_uint4(0, 0, 0, 0);
  };
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    const int sl = __shfl_sync(0xffffffffu, slot_lane, pg + 2 * x);
#pragma unroll
    for (int q = 0; q < L::kKLoads; ++q) r.k[x][q] = load(k_cache, sl, L::k_load_elem(q, t));
  }
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    const int sl = __shfl_sync(0xffffffffu, slot_lane, 4 * t + x);
#pragma unroll
    for (int c = 0; c < L::kVLoads; ++c) r.v[x][c] = load(v_cache, sl, L::v_load_elem(c, g));
  }
}

}  // namespace tc
}  // namespace
}  // namespace folio::cuda::detail
